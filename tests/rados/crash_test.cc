// RadosCrash: a client SIGKILLed in the middle of a spill leaves only whole checkpoints visible;
// the next sweep (at open) removes the dead spill's chunks and lease once its lease is stale, and
// never touches a spill whose lease is fresh (a live writer's) nor a published checkpoint; a writer
// held past its lease withdraws its header instead of publishing into the sweep.
#include <signal.h>
#include <time.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "checkpoint_bytes.h"
#include "format.h"
#include "held_hook.h"
#include "rados_provider.h"
#include "rados_test_env.h"

namespace tier::rados::test {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

uint64_t UnixNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

constexpr int kGraceS = 8;  // lease_grace_s (the least op_timeout_s=3 allows)

TEST(RadosCrash, KilledSpillLeavesWholeCheckpointsAndTheSweepRemovesOnlyTheDeadSpill) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  auto admin = Admin::Connect(c);
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  const std::string ns = UniqueNamespace("crash");
  const std::string rns = RadosNamespaceOf(ns);
  const ProviderOptions options = Options(
      c, {{"op_timeout_s", "3"}, {"lease_grace_s", std::to_string(kGraceS)}, {"queue_depth", "1"}});
  ::tier::test::ScopedTempDir tmp("rados-crash");
  std::vector<std::string> args = {"--ns", ns};
  for (const auto& x : OptionArgs(options)) args.push_back(x);
  for (const char* x : {"spill-loop", "crash", "1000", "16000000"}) args.push_back(x);
  const int pid = StartWorker(args, tmp.path() + "/worker.out");
  ASSERT_GT(pid, 0);

  // Kill it once a spill (after at least one whole one) has chunk objects and no header. The
  // worker is stopped (SIGSTOP) before it is looked at, and what it had already sent is given
  // time to land, so the header cannot appear between the look and the kill; a spill caught
  // whole lets the worker go on (SIGCONT) to the next.
  int killed_index = -1;
  ASSERT_TRUE(Eventually(90, [&] {
    const std::string out = ReadFile(tmp.path() + "/worker.out");
    for (int i = 1; i < 1000; ++i) {
      if (out.find("spilling " + std::to_string(i) + "\n") == std::string::npos) break;
      if (out.find("spilled " + std::to_string(i) + " ") != std::string::npos) continue;
      ::kill(pid, SIGSTOP);
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // operations in flight land
      const tier_key key = KeyFromText("crash/" + std::to_string(i));
      const std::string hex = Hex(ToKey(&key));
      bool chunk = false, header = false;
      for (const std::string& name : admin.value()->List(rns)) {
        chunk |= name.rfind("c." + hex, 0) == 0;
        header |= name == "h." + hex;
      }
      if (chunk && !header) {
        ::kill(pid, SIGKILL);
        killed_index = i;
        return true;
      }
      ::kill(pid, SIGCONT);
      return false;
    }
    return false;
  })) << "never caught the worker mid-spill";
  const uint64_t killed_at_ns = UnixNowNs();
  EXPECT_EQ(WaitWorker(pid, 10), 128 + SIGKILL);
  const std::string out = ReadFile(tmp.path() + "/worker.out");
  const tier_key dead_key = KeyFromText("crash/" + std::to_string(killed_index));
  const std::string dead_hex = Hex(ToKey(&dead_key));

  // A server that was open all along (it does not sweep: it opened before the crash) sees only
  // whole checkpoints: every completed one restores exactly, the killed one is not there.
  auto observer = Provider::Open(ns, options);
  ASSERT_TRUE(observer.ok()) << observer.status().ToString();
  std::vector<int> whole;
  for (int i = 0; i < killed_index; ++i) {
    if (out.find("spilled " + std::to_string(i) + " ok") != std::string::npos) whole.push_back(i);
  }
  ASSERT_FALSE(whole.empty()) << out;
  for (int i : whole) {
    Checkpoint cp = MakeCheckpoint("crash/" + std::to_string(i), 16000000);
    const Done d = observer.value()->Restore(cp.key, cp.EmptySegments());
    ASSERT_EQ(d.status, TIER_OK) << "crash/" << i << ": " << d.message;
    EXPECT_TRUE(cp.Matches()) << "crash/" << i;
  }
  EXPECT_EQ(observer.value()->Stat(dead_key).status().code(), TIER_NOT_FOUND);
  auto probe = observer.value()->Probe({dead_key});
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ((*probe)[0], 0) << "a spill that never published is not visible";

  // A live spill the sweep must leave alone: a fresh lease and its chunks (what a paused writer
  // leaves), plus a real spill in flight from another instance
  // while the sweep runs.
  KeyBytes live_key;
  live_key.fill(0x5A);
  const uint64_t live_spill = 0x1234567890abcdefull;
  ASSERT_TRUE(admin.value()->WriteFull(rns, LeaseName(live_key, live_spill), "").ok());
  ASSERT_TRUE(
      admin.value()
          ->SetXattr(rns, LeaseName(live_key, live_spill), kXattrLease, std::to_string(UnixNowNs()))
          .ok());
  for (uint32_t seq = 0; seq < 2; ++seq) {
    ASSERT_TRUE(admin.value()->WriteFull(rns, ChunkName(live_key, live_spill, seq), "x").ok());
  }

  // Wait until the dead spill's lease is stale, then let the next server's open sweep it.
  const uint64_t stale_at = killed_at_ns + (kGraceS + 1) * 1'000'000'000ull;
  while (UnixNowNs() < stale_at) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(admin.value()
                  ->SetXattr(rns, LeaseName(live_key, live_spill), kXattrLease,
                             std::to_string(UnixNowNs()))
                  .ok());  // the paused writer refreshes, as a live one does
  Checkpoint concurrent = MakeCheckpoint("crash/concurrent", 48000000);
  Provider::Pending concurrent_done;
  ASSERT_EQ(observer.value()->SpillAsync(concurrent.key, concurrent.Segments(), &concurrent_done),
            TIER_OK);
  auto sweeper = Provider::Open(ns, options);
  ASSERT_TRUE(sweeper.ok()) << sweeper.status().ToString();

  const std::vector<std::string> after = admin.value()->List(rns);
  for (const std::string& name : after) {
    EXPECT_EQ(name.find(dead_hex), std::string::npos) << "left behind by the dead spill: " << name;
  }
  const std::set<std::string> present(after.begin(), after.end());
  EXPECT_EQ(present.count(LeaseName(live_key, live_spill)), 1u) << "a live lease was removed";
  EXPECT_EQ(present.count(ChunkName(live_key, live_spill, 0)), 1u) << "a live chunk was removed";
  EXPECT_EQ(present.count(ChunkName(live_key, live_spill, 1)), 1u) << "a live chunk was removed";

  ASSERT_TRUE(concurrent_done.Wait(120));
  EXPECT_EQ(concurrent_done.done.status, TIER_OK) << concurrent_done.done.message;
  const Done restored = sweeper.value()->Restore(concurrent.key, concurrent.EmptySegments());
  ASSERT_EQ(restored.status, TIER_OK) << restored.message;
  EXPECT_TRUE(concurrent.Matches()) << "the spill in flight during the sweep is whole";
  for (int i : whole) {
    Checkpoint cp = MakeCheckpoint("crash/" + std::to_string(i), 16000000);
    ASSERT_EQ(sweeper.value()->Restore(cp.key, cp.EmptySegments()).status, TIER_OK);
    EXPECT_TRUE(cp.Matches()) << "a published checkpoint lost bytes to the sweep";
  }
}

// Issue 26, 4: a writer held (as by a debugger) between its lease check and its header publish,
// while another server's sweep judged it dead and removed its chunks and lease. It must not
// report a checkpoint whose chunks are gone: after the publish it finds its lease gone and
// withdraws the header, so the spill fails (the server keeps its Host copy) and the key is a
// miss, never DATA_LOSS. The hold is a hook in the pipeline, released by the test.
TEST(RadosCrash, WriterHeldPastItsLeaseWithdrawsItsHeaderInsteadOfPublishingIntoASweep) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  auto admin = Admin::Connect(c);
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  const std::string ns = UniqueNamespace("crash-held");
  const std::string rados_ns = RadosNamespaceOf(ns);
  HeldHook hold;
  RadosHooks hooks;
  hooks.before_publish = hold.Hook();
  MetricsRegistry registry;
  HostServices services(&registry);
  const ProviderOptions options =
      Options(c, {{"lease_grace_s", std::to_string(kGraceS)}, {"op_timeout_s", "3"}});
  auto writer = OpenHooked(services, ns, options, hooks);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  const HeldHook::Guard release_at_exit = hold.ReleaseAtExit();  // before the writer closes
  Checkpoint cp = MakeCheckpoint("held-writer", 3000000);
  Provider::Pending pending;
  const std::vector<tier_segment> segments = cp.Segments();
  ASSERT_TRUE((*writer)
                  ->Spill(&cp.key, segments.data(), static_cast<uint32_t>(segments.size()),
                          Provider::Pending::Complete, &pending)
                  .ok());
  ASSERT_TRUE(hold.WaitHeld(60)) << "the spill never reached its publish";
  // Held past the grace, as far as the fleet can tell: its lease says it was refreshed long ago.
  const std::string prefix = "l." + Hex(ToKey(&cp.key)) + ".";
  std::string lease;
  for (const std::string& name : admin.value()->List(rados_ns)) {
    if (name.rfind(prefix, 0) == 0) lease = name;
  }
  ASSERT_FALSE(lease.empty()) << "no lease while the spill runs";
  ASSERT_TRUE(admin.value()->SetXattr(rados_ns, lease, kXattrLease, "1").ok());
  // Another server's sweep (the one at its open) removes the lease and the chunks.
  auto sweeper = Provider::Open(ns, options);
  ASSERT_TRUE(sweeper.ok()) << sweeper.status().ToString();
  const std::string chunk_prefix = "c." + Hex(ToKey(&cp.key)) + ".";
  ASSERT_TRUE(Eventually(30, [&] {
    for (const std::string& name : admin.value()->List(rados_ns)) {
      if (name.rfind(chunk_prefix, 0) == 0 || name == lease) return false;
    }
    return true;
  })) << "the sweep did not remove the held spill's chunks and lease";
  hold.Release();
  ASSERT_TRUE(pending.Wait(60)) << "the held spill never completed";
  EXPECT_NE(pending.done.status, TIER_OK)
      << "a spill whose chunks were swept reported OK: " << pending.done.message;
  EXPECT_NE(pending.done.message.find("lease"), std::string::npos) << pending.done.message;
  EXPECT_EQ(sweeper.value()->Stat(cp.key).status().code(), TIER_NOT_FOUND);
  const Done restore = sweeper.value()->Restore(cp.key, cp.EmptySegments());
  EXPECT_EQ(restore.status, TIER_NOT_FOUND)
      << "a miss, not " << tier_status_name(restore.status) << ": " << restore.message;
  (*writer)->Close();
}

}  // namespace
}  // namespace tier::rados::test
