// CrashRecovery: the crash loop in CI (30 kills by default) and its long standalone mode.
//   tier_reliability_tests --gtest_filter='CrashRecovery.*'      (TIER_CRASH_KILLS,
//   TIER_CRASH_SEED) tier_reliability_tests --crash-loop --kills 500 [--seed N] [--dir PATH]
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "crash_loop.h"
#include "disk_test_util.h"
#include "test_support.h"

namespace tier::disk::test {

namespace {

using ::tier::test::EnvOr;
using ::tier::test::RandomSeed;
using ::tier::test::SelfExe;

// Kill times are random on purpose (new interleavings every run); the seed is printed, and
// TIER_CRASH_SEED=<seed> replays a failing run.
TEST(CrashRecovery, SigkillLoopLeavesOnlyWholeCheckpoints) {
  TempDir tmp;
  CrashLoopConfig config;
  config.root = tmp.path();
  config.self_exe = SelfExe();
  ASSERT_FALSE(config.self_exe.empty());
  config.kills = static_cast<int>(EnvOr("TIER_CRASH_KILLS", 30));
  config.seed = EnvOr("TIER_CRASH_SEED", RandomSeed());
  std::printf("crash loop: %d kills, seed %llu (rerun with TIER_CRASH_SEED=%llu)\n", config.kills,
              static_cast<unsigned long long>(config.seed),
              static_cast<unsigned long long>(config.seed));
  RecordProperty("crash_loop_seed", std::to_string(config.seed));
  const CrashLoopResult r = RunCrashLoop(config);
  EXPECT_EQ(r.failure, "");
  std::printf("crash loop: %llu spills completed, %llu cut by a kill, %llu removes\n",
              static_cast<unsigned long long>(r.completed_spills),
              static_cast<unsigned long long>(r.spills_cut_by_kill),
              static_cast<unsigned long long>(r.removes));
  EXPECT_GT(r.completed_spills, 0u) << "the worker never completed a spill: nothing was tested";
}

void Usage() {
  std::printf(
      "usage: tier_reliability_tests --crash-loop [--kills N] [--seed N] [--dir PATH]\n"
      "                              [--max-segment-kib N]\n"
      "Kills a worker that spills and removes checkpoints through the disk provider N times\n"
      "(default 500) with SIGKILL at random moments, and after each kill reopens the directory "
      "and\n"
      "checks: every visible checkpoint restores byte-exact, every completed spill survived,\n"
      "nothing removed came back, no temporary file is left, nothing was quarantined, used bytes\n"
      "equal the files on disk. --dir keeps the scratch directory (default: a fresh one under the\n"
      "build tree, removed on success). Exit status 0 when every kill verified, 1 otherwise.\n");
}

}  // namespace

int CrashLoopMain(int argc, char** argv) {
  CrashLoopConfig config;
  config.kills = 500;
  config.seed = RandomSeed();
  config.progress = true;
  std::string dir;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--help" || a == "-h") {
      Usage();
      return 0;
    } else if (a == "--kills" && has_value) {
      config.kills = std::atoi(argv[++i]);
    } else if (a == "--seed" && has_value) {
      config.seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--dir" && has_value) {
      dir = argv[++i];
    } else if (a == "--max-segment-kib" && has_value) {
      config.max_segment_bytes = std::strtoull(argv[++i], nullptr, 10) << 10;
    } else {
      std::fprintf(stderr, "crash loop: unknown argument '%s'\n", a.c_str());
      Usage();
      return 2;
    }
  }
  config.self_exe = SelfExe();
  std::unique_ptr<TempDir> tmp;
  if (dir.empty()) {
    tmp = std::make_unique<TempDir>();
    config.root = tmp->path();
  } else {
    ::mkdir(dir.c_str(), 0700);
    config.root = dir;
  }
  std::printf("crash loop: %d kills in %s, seed %llu (replay with --seed %llu)\n", config.kills,
              config.root.c_str(), static_cast<unsigned long long>(config.seed),
              static_cast<unsigned long long>(config.seed));
  std::fflush(stdout);
  const CrashLoopResult r = RunCrashLoop(config);
  std::printf("crash loop: %llu spills completed, %llu cut by a kill, %llu removes\n",
              static_cast<unsigned long long>(r.completed_spills),
              static_cast<unsigned long long>(r.spills_cut_by_kill),
              static_cast<unsigned long long>(r.removes));
  if (!r.failure.empty()) {
    std::printf("crash loop: FAILED: %s\n", r.failure.c_str());
    return 1;
  }
  std::printf("crash loop: all %d kills verified\n", config.kills);
  return 0;
}

}  // namespace tier::disk::test
