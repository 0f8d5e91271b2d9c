// DiskPlugin across processes: a checkpoint spilled by one process is restored by the next, and a
// SIGKILL at any moment of a spill leaves only complete, verifiable checkpoints.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "disk_test_util.h"
#include "test_seams.h"

namespace tier::disk::test {
namespace {

constexpr const char* kNs = "process-ns";

TEST(DiskPlugin, NextProcessRestoresByteExact) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    FakeHost host;
    auto p = OpenDisk(host, kNs, BaseOptions(dir).Set("durability", "fdatasync"));
    if (!p.ok()) ::_exit(2);
    Checkpoint cp = StandardCheckpoint(500, 3);
    Done d = SpillSync(*p.value(), MakeKey(500), cp);
    ::_exit(d.status == TIER_OK ? 0 : 3);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus));
  ASSERT_EQ(WEXITSTATUS(wstatus), 0);
  FakeHost host;
  auto p = OpenDisk(host, kNs, BaseOptions(dir));
  ASSERT_TRUE(p.ok()) << p.status().message();
  Checkpoint cp = StandardCheckpoint(500, 3);
  RestoreTarget t = MakeTarget(cp, 7);
  ASSERT_EQ(RestoreSync(*p.value(), MakeKey(500), t).status, TIER_OK);
  EXPECT_TRUE(t.Equals(cp));
}

TEST(DiskPlugin, SigkillMidSpillLeavesOnlyCompleteCheckpoints) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  int progress[2];
  ASSERT_EQ(::pipe(progress), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(progress[0]);
    FakeHost host;
    std::shared_ptr<FaultyBackend> gate;
    Seams seams;
    seams.wrap_backend = WrapWith(&gate);
    auto p = OpenDisk(host, kNs, BaseOptions(dir).Set("durability", "none").Set("chunk_kib", "256"),
                      seams);
    if (!p.ok()) ::_exit(2);
    for (uint64_t i = 0;; ++i) {
      Checkpoint cp = StandardCheckpoint(600 + i, 2);
      std::vector<tier_segment> segs = cp.Segments();
      const tier_key key = MakeKey(600 + i);
      auto* w = new Waiter;  // leaked on purpose: the process dies mid-spill
      if (i == 2) gate->CloseGate(/*writes=*/true);  // the third spill stalls with a temp file
      if (!p.value()->Spill(&key, segs.data(), segs.size(), Waiter::Callback, w).ok()) ::_exit(4);
      if (i == 2) {
        while (gate->held_reads() == 0) ::usleep(1000);  // its first write is held
        const char c = 'x';  // two complete, the third in flight: the parent kills us now
        if (::write(progress[1], &c, 1) != 1) ::_exit(5);
        for (;;) ::pause();
      }
      if (w->Wait().status != TIER_OK) ::_exit(3);
    }
  }
  ::close(progress[1]);
  char c = 0;
  ASSERT_EQ(::read(progress[0], &c, 1), 1);
  ::kill(child, SIGKILL);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ::close(progress[0]);
  EXPECT_TRUE(WIFSIGNALED(wstatus));

  FakeHost host;
  auto p = OpenDisk(host, kNs, BaseOptions(dir));
  ASSERT_TRUE(p.ok()) << p.status().message();
  tier_stats st{};
  st.struct_size = sizeof(st);
  ASSERT_TRUE(p.value()->Stats(&st).ok());
  EXPECT_EQ(st.entries, 2u);
  EXPECT_EQ(p.value()->temps_removed_at_open(), 1u);
  EXPECT_EQ(st.used_bytes, SumCheckpointFileBytes(dir));  // the budget is what is on disk
  for (const std::string& n : ListDir(dir)) {
    EXPECT_EQ(n.find(".tmp"), std::string::npos) << "temporary file survived reopen: " << n;
  }
  EXPECT_EQ(p.value()->quarantined_at_open(), 0u);
  for (uint64_t i = 0; i < st.entries; ++i) {
    Checkpoint cp = StandardCheckpoint(600 + i, 2);
    RestoreTarget t = MakeTarget(cp);
    ASSERT_EQ(RestoreSync(*p.value(), MakeKey(600 + i), t).status, TIER_OK) << i;
    EXPECT_TRUE(t.Equals(cp)) << i;
  }
}

}  // namespace
}  // namespace tier::disk::test
