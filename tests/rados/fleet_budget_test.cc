// RadosFleetBudget: N servers on one pool keep their namespace within one byte budget
// (fleet_budget_bytes; plugins/rados/README.md, "Fleet budget"). Two and three provider instances
// spill and restore concurrently while a monitor sums the namespace's objects: within the budget
// plus one checkpoint at every observation, every spill admitted (eviction made room: the pool
// quota is never what stops a spill), every restore whole or a miss. A restore in progress is
// never evicted. A server killed while holding budget gives it back within fleet_lease_s.
#include <signal.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "checkpoint_bytes.h"
#include "fleet.h"
#include "format.h"
#include "held_hook.h"
#include "rados_provider.h"
#include "rados_test_env.h"

namespace tier::rados::test {
namespace {

constexpr uint64_t kMiB = 1u << 20;
constexpr uint64_t kBudgetBytes = 12 * kMiB;
constexpr uint64_t kKvBytes = kMiB;  // one checkpoint: ~1.1 MiB stored
constexpr int kLeaseS = 6;           // refreshed every 1.5 s: a loaded CI machine never misses it

ProviderOptions FleetOptions(const ClusterInfo& c) {
  return Options(c, {{"fleet_budget_bytes", std::to_string(kBudgetBytes)},
                     {"fleet_lease_s", std::to_string(kLeaseS)},
                     {"op_timeout_s", "5"}});
}

// Bytes of the namespace's checkpoints and chunks (headers and chunk objects), as listed now.
uint64_t NamespaceBytes(Admin& admin, const std::string& rados_ns) {
  uint64_t total = 0;
  for (const std::string& oid : admin.List(rados_ns)) {
    if (oid.rfind("h.", 0) != 0 && oid.rfind("c.", 0) != 0) continue;
    Result<uint64_t> size = admin.Size(rados_ns, oid);
    if (size.ok()) total += *size;  // removed meanwhile: nothing
  }
  return total;
}

Result<FleetLedger> ReadLedger(Admin& admin, const std::string& rados_ns) {
  Result<std::string> text = admin.Read(rados_ns, FleetBudget::kObject);
  if (!text.ok()) return text.status();
  FleetLedger ledger;
  if (!FleetLedger::Parse(*text, &ledger)) return Status::DataLoss("ledger does not parse");
  return ledger;
}

// `servers` instances each spill `per_server` checkpoints (3x the budget in all) and restore the
// one they spilled before each, while a monitor observes the namespace.
void RunFleet(int servers) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  auto admin = Admin::Connect(c);
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  const std::string ns = UniqueNamespace("fleet-budget-" + std::to_string(servers));
  const std::string rados_ns = RadosNamespaceOf(ns);
  std::vector<std::unique_ptr<Provider>> fleet;
  for (int i = 0; i < servers; ++i) {
    auto p = Provider::Open(ns, FleetOptions(c));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    fleet.push_back(p.take());
  }
  const uint64_t one_checkpoint = [] {
    Checkpoint cp = MakeCheckpoint("size-probe", kKvBytes);
    return cp.logical_bytes() + 64 * 1024;  // chunk headers and the header object, generously
  }();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> max_seen{0}, observations{0};
  std::thread monitor([&] {
    auto own = Admin::Connect(c);
    if (!own.ok()) return;
    while (!stop.load()) {
      const uint64_t bytes = NamespaceBytes(**own, rados_ns);
      uint64_t prev = max_seen.load();
      while (bytes > prev && !max_seen.compare_exchange_weak(prev, bytes)) {
      }
      observations.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const int per_server = static_cast<int>(3 * kBudgetBytes / one_checkpoint / servers) + 1;
  std::atomic<int> spilled_ok{0}, restored_ok{0}, restore_misses{0};
  std::vector<std::string> failures;
  std::mutex failures_mu;
  auto fail = [&](const std::string& what) {
    std::lock_guard lock(failures_mu);
    failures.push_back(what);
  };
  std::vector<std::thread> threads;
  for (int s = 0; s < servers; ++s) {
    threads.emplace_back([&, s] {
      for (int i = 0; i < per_server; ++i) {
        const std::string name = "s" + std::to_string(s) + "/" + std::to_string(i);
        Checkpoint cp = MakeCheckpoint(name, kKvBytes);
        const Done d = fleet[s]->Spill(cp.key, cp.Segments());
        if (d.status == TIER_OK) {
          spilled_ok.fetch_add(1);
        } else {
          fail("spill " + name + ": " + tier_status_name(d.status) + " " + d.message);
        }
        // Another server's earlier checkpoint: whole, or a miss (evicted), never anything else.
        const std::string other =
            "s" + std::to_string((s + 1) % servers) + "/" + std::to_string(std::max(0, i - 1));
        Checkpoint back = MakeCheckpoint(other, kKvBytes);
        Checkpoint into = back;
        const Done r = fleet[s]->Restore(back.key, into.EmptySegments());
        if (r.status == TIER_OK) {
          if (into.Matches()) {
            restored_ok.fetch_add(1);
          } else {
            fail("restore " + other + ": wrong bytes");
          }
        } else if (r.status == TIER_NOT_FOUND) {
          restore_misses.fetch_add(1);
        } else {
          fail("restore " + other + ": " + tier_status_name(r.status) + " " + r.message);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  stop.store(true);
  monitor.join();
  for (const std::string& f : failures) ADD_FAILURE() << f;
  EXPECT_EQ(spilled_ok.load(), servers * per_server) << "eviction must make room for every spill";
  EXPECT_GT(restored_ok.load(), 0);
  EXPECT_GT(observations.load(), 0u);
  EXPECT_LE(max_seen.load(), kBudgetBytes + one_checkpoint)
      << "the namespace held " << max_seen.load() << " bytes (" << observations.load()
      << " observations); budget " << kBudgetBytes;
  // At rest (the reaper's last chunk removes done): within the budget.
  uint64_t at_rest = 0;
  EXPECT_TRUE(Eventually(10, [&] {
    at_rest = NamespaceBytes(**admin, rados_ns);
    return at_rest <= kBudgetBytes;
  })) << at_rest;
  auto ledger = ReadLedger(**admin, rados_ns);
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
  EXPECT_LE(ledger->TotalBytes(), kBudgetBytes);
  EXPECT_GE(ledger->committed_bytes, at_rest) << "the shared count never under-counts";
  EXPECT_TRUE(ledger->pins.empty());
  EXPECT_TRUE(ledger->evicting.empty());
  std::printf(
      "[fleet %d] %d spills, %d restores ok, %d misses; max %llu bytes over %llu "
      "observations, budget %llu\n",
      servers, spilled_ok.load(), restored_ok.load(), restore_misses.load(),
      static_cast<unsigned long long>(max_seen.load()),
      static_cast<unsigned long long>(observations.load()),
      static_cast<unsigned long long>(kBudgetBytes));
}

TEST(RadosFleetBudget, TwoServersKeepTheNamespaceWithinOneBudget) {
  RunFleet(2);
}

TEST(RadosFleetBudget, ThreeServersKeepTheNamespaceWithinOneBudget) {
  RunFleet(3);
}

// A restore held after its fleet pin (a hook) while another server fills the fleet: the held
// checkpoint is the least recently used, yet it stays; the others are evicted; the restore ends
// byte-exact.
TEST(RadosFleetBudget, CheckpointBeingRestoredIsNeverEvicted) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  auto admin = Admin::Connect(c);
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  const std::string ns = UniqueNamespace("fleet-pinned");
  const std::string rados_ns = RadosNamespaceOf(ns);
  HeldHook hold;
  RadosHooks hooks;
  hooks.restore_pinned = hold.Hook();
  MetricsRegistry registry;
  HostServices services(&registry);
  const ProviderOptions options = FleetOptions(c);
  auto a = OpenHooked(services, ns, options, hooks);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = Provider::Open(ns, options);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const HeldHook::Guard release_at_exit = hold.ReleaseAtExit();  // before `a` closes

  Checkpoint oldest = MakeCheckpoint("oldest", kKvBytes);
  ASSERT_EQ((*b)->Spill(oldest.key, oldest.Segments()).status, TIER_OK);
  Checkpoint into = oldest;
  const std::vector<tier_segment> targets = into.EmptySegments();
  Provider::Pending pending;
  ASSERT_EQ((*a)->Restore(&oldest.key, targets.data(), static_cast<uint32_t>(targets.size()),
                          Provider::Pending::Complete, &pending)
                .code(),
            TIER_OK);
  ASSERT_TRUE(hold.WaitHeld(30));
  // Twice the budget through B: every spill admitted, by evicting everything but the pinned one.
  const int count = static_cast<int>(2 * kBudgetBytes / kKvBytes);
  for (int i = 0; i < count; ++i) {
    Checkpoint cp = MakeCheckpoint("filler/" + std::to_string(i), kKvBytes);
    const Done d = (*b)->Spill(cp.key, cp.Segments());
    ASSERT_EQ(d.status, TIER_OK) << i << ": " << d.message;
  }
  const auto names = admin.value()->List(rados_ns);
  EXPECT_NE(std::find(names.begin(), names.end(), HeaderName(ToKey(&oldest.key))), names.end())
      << "the checkpoint being restored was evicted";
  Checkpoint first = MakeCheckpoint("filler/0", kKvBytes);
  EXPECT_EQ(std::find(names.begin(), names.end(), HeaderName(ToKey(&first.key))), names.end())
      << "the least recently used unpinned checkpoint should have gone";
  hold.Release();
  ASSERT_TRUE(pending.Wait(30));
  EXPECT_EQ(pending.done.status, TIER_OK) << pending.done.message;
  EXPECT_TRUE(into.Matches());
}

// A server SIGKILLed while it holds a reservation (spills in flight): its entry, and the bytes
// it held, leave the ledger within fleet_lease_s (plus one refresh of a live server).
TEST(RadosFleetBudget, KilledServerGivesItsBudgetBackWithinTheLease) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  auto admin = Admin::Connect(c);
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  const std::string ns = UniqueNamespace("fleet-killed");
  const std::string rados_ns = RadosNamespaceOf(ns);
  auto survivor = Provider::Open(ns, FleetOptions(c));
  ASSERT_TRUE(survivor.ok()) << survivor.status().ToString();
  auto ledger = ReadLedger(**admin, rados_ns);
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
  ASSERT_EQ(ledger->servers.size(), 1u);
  const uint64_t survivor_id = ledger->servers.begin()->first;

  std::vector<std::string> args = {"--ns", ns};
  for (const auto& arg : OptionArgs(FleetOptions(c))) args.push_back(arg);
  for (const char* arg : {"spill-loop", "doomed", "400", "3000000"}) args.push_back(arg);
  const std::string out = ::testing::TempDir() + "fleet-killed.out";
  const int pid = StartWorker(args, out);
  ASSERT_GT(pid, 0);
  uint64_t victim = 0;
  const bool holding = Eventually(60, [&] {
    auto l = ReadLedger(**admin, rados_ns);
    if (!l.ok()) return false;
    for (const auto& [id, s] : l->servers) {
      if (id != survivor_id && s.reserved_bytes > 0) victim = id;
    }
    return victim != 0;
  });
  ::kill(pid, SIGKILL);
  EXPECT_EQ(WaitWorker(pid, 30), 128 + SIGKILL);
  ASSERT_TRUE(holding) << "the worker never held a reservation";
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(Eventually(kLeaseS + 10, [&] {
    auto l = ReadLedger(**admin, rados_ns);
    return l.ok() && l->servers.count(victim) == 0;
  })) << "the killed server's entry stayed past the lease";
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  EXPECT_LE(seconds, kLeaseS + 10.0);
  auto after = ReadLedger(**admin, rados_ns);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->TotalBytes(),
            after->committed_bytes + after->servers[survivor_id].reserved_bytes);
  EXPECT_LE(after->TotalBytes(), kBudgetBytes);
  // The budget is usable again: the survivor spills (evicting what the dead one left).
  Checkpoint cp = MakeCheckpoint("after-the-kill", kKvBytes);
  EXPECT_EQ((*survivor)->Spill(cp.key, cp.Segments()).status, TIER_OK);
}

}  // namespace
}  // namespace tier::rados::test
