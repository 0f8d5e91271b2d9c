// open_test.cc -- HostOpen: Host::Open's errors are values naming the cause, never an abort; a
// restarted server re-adopts what the cold tier kept; a shared tier serves a fleet (probe), a
// spill of what a peer stored is a cold placement, a peer's checkpoint of another layout is a
// miss left in place; host services stay valid (and become inert) behind a provider that
// returns after the host gave up on it.
#include <dlfcn.h>
#include <tier/host/identity.h>
#include <tier/host/plugin_loader.h>

#include <chrono>
#include <thread>

#include "host_fixture.h"
#include "test_support.h"

namespace tier::host::test {
namespace {

using HostOpen = HostTest;

TEST_F(HostOpen, MissingPluginIsAnErrorNamingThePath) {
  auto host = TryOpen("/no/such/libtier_x.so", {});
  ASSERT_FALSE(host.ok());
  EXPECT_NE(host.status().message().find("/no/such/libtier_x.so"), std::string::npos)
      << host.status().ToString();
  EXPECT_NE(host.status().message().find("no such file"), std::string::npos);
}

TEST_F(HostOpen, BadProviderOptionIsInvalidArgumentNamingIt) {
  auto host = TryOpen("scripted", {{"no_such_option", "1"}});
  ASSERT_FALSE(host.ok());
  EXPECT_EQ(host.status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(host.status().message().find("no_such_option"), std::string::npos)
      << host.status().ToString();
}

TEST_F(HostOpen, WrongAbiMajorIsRefusedNamingBothVersions) {
  auto host = TryOpen(TEST_WRONG_MAJOR_PLUGIN, {});
  ASSERT_FALSE(host.ok());
  EXPECT_NE(host.status().message().find("ABI major version mismatch"), std::string::npos)
      << host.status().ToString();
}

TEST_F(HostOpen, BadOptionsOfTheHostItselfAreRefused) {
  auto no_namespace = TryOpen("null", {}, [](HostOptions& o) { o.namespace_id.clear(); });
  ASSERT_FALSE(no_namespace.ok());
  EXPECT_NE(no_namespace.status().message().find("namespace_id"), std::string::npos);
  auto bad_pool = TryOpen("null", {}, [](HostOptions& o) { o.pool.view.plane_base.clear(); });
  ASSERT_FALSE(bad_pool.ok());
  EXPECT_NE(bad_pool.status().message().find("pool"), std::string::npos)
      << bad_pool.status().ToString();
  auto no_device = TryOpen("null", {}, [](HostOptions& o) {
    o.engine = nullptr;
    o.device = "warp-drive";
  });
  ASSERT_FALSE(no_device.ok());
  EXPECT_EQ(no_device.status().code(), TIER_INVALID_ARGUMENT);
}

TEST_F(HostOpen, NoColdTierIsTwoTiers) {
  Open("", {}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  EXPECT_EQ(host_->provider_name(), "");
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(Seal(Blocks(10 * (i + 1), 1), i + 1));
  EXPECT_EQ(host_->Stats().cold_entries, 0u);
  EXPECT_EQ(PlacementsOf(Blocks(10, 1)), 0) << "dropped: there is nowhere below Host";
}

TEST_F(HostOpen, RestartReadoptsColdCheckpointsOfTheSameNamespace) {
  tier::test::ScopedTempDir dir;
  const ProviderOptions disk = {
      {"dir", dir.path() + "/cold"}, {"capacity_bytes", "67108864"}, {"chunk_kib", "64"}};
  Open("disk", disk, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  host_.reset();  // the server stops; the disk keeps what it holds
  Open("disk", disk, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  EXPECT_EQ(host_->Stats().readopted, 3u)
      << "the two checkpoints that were in Cold and the one close wrote from Host";
  EXPECT_EQ(PlacementsOf(a), kC);
  Admission admission = AdmitAndWait(a, 10);
  ASSERT_EQ(admission.state, AdmissionState::kReady);
  EXPECT_EQ(admission.outcome, Outcome::kColdRestore);
  EXPECT_EQ(host_->Stats().readopted_hits, 1u);
  EXPECT_EQ(mismatched_, 0u);
  Release(admission);
  host_.reset();
  // Another namespace (another model or layout) over the same directory adopts none of them.
  Open("disk", disk, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2,
       [](HostOptions& o) { o.namespace_id = "another-model"; });
  EXPECT_EQ(host_->Stats().readopted, 0u);
}

TEST_F(HostOpen, ServersOfAFleetFindEachOthersCheckpointsInASharedTier) {
  const std::string store = "fleet-" + std::to_string(::getpid());
  // Server B first: its own catalog over the shared tier, empty when it starts.
  Open("scripted", {{"store", store}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2,
       [](HostOptions& o) { o.metrics = nullptr; });
  std::unique_ptr<Host> server_b = std::move(host_);
  // Server A parks a while B runs.
  Open("scripted", {{"store", store}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  std::unique_ptr<Host> server_a = std::move(host_);
  host_ = std::move(server_b);  // the router sends the session back to B
  EXPECT_EQ(host_->Stats().readopted, 0u);
  EXPECT_FALSE(Info(a).has_value()) << "B never heard of a";
  std::vector<uint64_t> request = a;
  request.push_back(777);  // the session goes on
  Admission admission = AdmitAndWait(request, 10);
  ASSERT_EQ(admission.state, AdmissionState::kReady);
  EXPECT_EQ(admission.outcome, Outcome::kColdRestore);
  EXPECT_EQ(admission.cached_tokens, 512u);
  EXPECT_EQ(mismatched_, 0u) << "B restored A's bytes exactly";
  EXPECT_GE(host_->Stats().remote_hits, 1u);
  EXPECT_TRUE(Info(a)->remote);
  Release(admission);
  // A sibling branch nobody stored is not found by probing.
  Admission miss = AdmitAndWait({11, 12}, 11);
  EXPECT_EQ(miss.state, AdmissionState::kRoot);
  host_.reset();
  server_a.reset();
}

// Issue 26, 8: server B seals and spills a prefix server A already stored in the shared tier. The
// provider answers ALREADY_EXISTS: for the fleet the checkpoint is in Cold, so B places it there
// (no failure, no back-off, its Host copy released) and restores it from there.
TEST_F(HostOpen, ASpillAPeerAlreadyStoredIsAColdPlacementNotAFailure) {
  const std::string store = "dedup-" + std::to_string(::getpid());
  // B opens first (nothing to re-adopt), then A parks `a` while B runs.
  Open("scripted", {{"store", store}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2,
       [](HostOptions& o) { o.metrics = nullptr; });
  std::unique_ptr<Host> server_b = std::move(host_);
  Open("scripted", {{"store", store}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(20, 1);
  SealAndPushToCold(a);
  std::unique_ptr<Host> server_a = std::move(host_);
  host_ = std::move(server_b);
  SealAndPushToCold(a);  // B computed the same prefix; asserts its placement is Cold
  EXPECT_EQ(host_->Stats().spill_failures, 0u);
  EXPECT_GE(host_->Stats().spills_already_stored, 1u);
  Admission back = AdmitAndWait(a, 10);
  ASSERT_EQ(back.state, AdmissionState::kReady);
  EXPECT_EQ(back.outcome, Outcome::kColdRestore);
  EXPECT_EQ(mismatched_, 0u);
  Release(back);
  host_.reset();
  server_a.reset();
}

// Issue 26, 3: server B has the namespace of server A but another bytes scale (a layout its bytes
// do not fit). A's checkpoint verifies (checksums) but its manifest names another scale: a miss
// for B, left in the shared tier, so A still restores it.
TEST_F(HostOpen, APeersCheckpointOfAnotherScaleIsAMissLeftInPlace) {
  const std::string store = "mismatch-" + std::to_string(::getpid());
  Open("scripted", {{"store", store}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(30, 1);
  SealAndPushToCold(a);
  std::unique_ptr<Host> server_a = std::move(host_);
  Open("scripted", {{"store", store}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2, [](HostOptions& o) {
    o.metrics = nullptr;
    o.bytes_scale = 2;
  });
  Admission miss = AdmitAndWait(a, 10);
  EXPECT_EQ(miss.state, AdmissionState::kRoot);
  EXPECT_NE(miss.root_reason, RootReason::kCorrupt) << "another layout is not damage";
  host_.reset();
  host_ = std::move(server_a);
  Admission back = AdmitAndWait(a, 20);
  ASSERT_EQ(back.state, AdmissionState::kReady) << "the mismatched peer removed A's checkpoint";
  EXPECT_EQ(back.outcome, Outcome::kColdRestore);
  Release(back);
}

// The scripted provider's controls for late calls (exported by libtier_scripted.so).
struct LateControls {
  void* handle = nullptr;
  void (*release)() = nullptr;
  void (*reset)() = nullptr;
  uint64_t (*returned)() = nullptr;
  uint64_t (*live_answers)() = nullptr;
  uint64_t (*closed)() = nullptr;

  ~LateControls() {
    if (handle != nullptr) ::dlclose(handle);
  }
  bool Load() {
    handle = ::dlopen(ResolvePluginPath("scripted").c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return false;
    release = reinterpret_cast<void (*)()>(::dlsym(handle, "tier_scripted_release_late"));
    reset = reinterpret_cast<void (*)()>(::dlsym(handle, "tier_scripted_reset_late"));
    returned = reinterpret_cast<uint64_t (*)()>(::dlsym(handle, "tier_scripted_late_returned"));
    live_answers =
        reinterpret_cast<uint64_t (*)()>(::dlsym(handle, "tier_scripted_late_live_answers"));
    closed = reinterpret_cast<uint64_t (*)()>(::dlsym(handle, "tier_scripted_closed"));
    return release && reset && returned && live_answers && closed;
  }
  // Waits (bounded) until `count()` reaches `n`.
  static bool WaitFor(uint64_t (*count)(), uint64_t n) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (count() < n && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return count() >= n;
  }
  bool WaitReturned(uint64_t n) const { return WaitFor(returned, n); }
};

// Issue 26, 6: an open that returns after its deadline. The Host gave up, and the server freed its
// metrics registry (tier-host does as it exits); the provider then uses the services it was handed.
// They are still there and inert: no handle into the freed registry, no use after free.
TEST_F(HostOpen, AnOpenReturningAfterTheHostGaveUpFindsInertServices) {
  LateControls late;
  ASSERT_TRUE(late.Load()) << ::dlerror();
  late.reset();
  auto registry = std::make_unique<MetricsRegistry>();
  auto host = TryOpen("scripted", {{"late_open", "1"}}, [&](HostOptions& o) {
    o.metrics = registry.get();
    o.provider_timeout_ns = 100ull * 1000 * 1000;
  });
  ASSERT_FALSE(host.ok()) << "the open was held past its deadline";
  registry.reset();
  late.release();
  ASSERT_TRUE(late.WaitReturned(1)) << "the late open never returned";
  EXPECT_EQ(late.live_answers(), 0u) << "the services answered a late open from a freed registry";
  // The instance it opened is closed by the thread that waited for it, nothing is left behind.
  EXPECT_TRUE(LateControls::WaitFor(late.closed, 1)) << "the late instance was never closed";
  late.reset();
}

// Issue 26, 6: every call but open is late: info passes its deadline, Open fails and the instance
// is abandoned with the call in flight. The server frees its registry; the late call then uses a
// metric handle it got at open and asks for a new one: both inert.
TEST_F(HostOpen, AnAbandonedProviderReturningLateFindsInertServices) {
  LateControls late;
  ASSERT_TRUE(late.Load()) << ::dlerror();
  late.reset();
  auto registry = std::make_unique<MetricsRegistry>();
  auto host = TryOpen("scripted", {{"late_calls", "1"}}, [&](HostOptions& o) {
    o.metrics = registry.get();
    o.provider_timeout_ns = 100ull * 1000 * 1000;
    o.close_timeout_ns = 100ull * 1000 * 1000;
  });
  ASSERT_FALSE(host.ok()) << "info was held past its deadline";
  registry.reset();
  late.release();
  ASSERT_TRUE(late.WaitReturned(1)) << "the late call never returned";
  EXPECT_EQ(late.live_answers(), 0u) << "the services answered a late call from a freed registry";
  late.reset();
}

}  // namespace
}  // namespace tier::host::test

namespace tier::host::test {
namespace {

using HostOpenAlignment = HostTest;

// tier_info.buffer_alignment (abi/tier_provider.h): the host passes segment pointers so aligned,
// and refuses, naming the field, a provider whose alignment it cannot give or that is no power
// of two.
TEST_F(HostOpenAlignment, AProviderAskingMoreThanTheHostGivesIsRefusedNamingIt) {
  for (const char* alignment : {"8192", "3", "0"}) {
    auto host = TryOpen("scripted", {{"buffer_alignment", alignment}});
    ASSERT_FALSE(host.ok()) << alignment;
    EXPECT_NE(host.status().message().find("buffer_alignment " + std::string(alignment)),
              std::string::npos)
        << host.status().ToString();
  }
}

TEST_F(HostOpenAlignment, SpillsAndRestoresPassPointersAtTheDeclaredAlignment) {
  // The scripted provider refuses any segment pointer off its declared alignment.
  Open("scripted", {{"buffer_alignment", "4096"}, {"max_inflight_ops", "0"}}, Bytes(1) * 3 / 2,
       Bytes(1) / 2);
  const auto a = Blocks(10, 1), b = Blocks(20, 1);
  ASSERT_TRUE(Seal(a, 1));
  ASSERT_TRUE(Seal(b, 2));
  ASSERT_EQ(PlacementsOf(a), kC) << "spilled: the provider took its pointers";
  Admission restored = AdmitAndWait(a, 10);
  ASSERT_EQ(restored.state, AdmissionState::kReady);
  EXPECT_EQ(restored.outcome, Outcome::kColdRestore);
  EXPECT_TRUE(Check(a, restored));
  Release(restored);
}

}  // namespace
}  // namespace tier::host::test
