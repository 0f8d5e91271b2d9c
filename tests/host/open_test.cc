// open_test.cc -- HostOpen: Host::Open's errors are values naming the cause, never an abort; a
// restarted server re-adopts what the cold tier kept; a shared tier serves a fleet (probe).
#include <tier/host/identity.h>

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
  EXPECT_EQ(host_->Stats().readopted, 2u) << "the two checkpoints that were in Cold";
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

}  // namespace
}  // namespace tier::host::test
