// PowerLoss: the power-loss loop in CI (1,000 cuts; TIER_POWERLOSS_CUTS scales it, and
// tests/run-sanitizers.sh sets it lower) and its long standalone mode:
//   tier_powerloss_tests --gtest_filter='PowerLoss.*'     (TIER_POWERLOSS_CUTS,
//   TIER_POWERLOSS_SEED) tier_powerloss_tests --soak --cuts 100000 [--seed N] [--dir PATH]
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "powerloss_loop.h"
#include "powerloss_util.h"

namespace tier::powerloss::test {
namespace {

// Cut points are random on purpose (new interleavings every run); the seed is printed, and
// TIER_POWERLOSS_SEED=<seed> replays its choices (workload, cut points, what each cut keeps).
TEST(PowerLoss, CutsAtRandomCallsLoseNothingCompletedAndServeNothingWrong) {
  ScratchDir scratch("loop");
  PowerLossConfig config;
  config.root = scratch.path();
  config.self_exe = SelfExe();
  ASSERT_FALSE(config.self_exe.empty());
  config.cuts = EnvOr("TIER_POWERLOSS_CUTS", 1000);
  config.seed = EnvOr("TIER_POWERLOSS_SEED", RandomSeed());
  std::printf("power-loss loop: %llu cuts, seed %llu (rerun with TIER_POWERLOSS_SEED=%llu)\n",
              static_cast<unsigned long long>(config.cuts),
              static_cast<unsigned long long>(config.seed),
              static_cast<unsigned long long>(config.seed));
  RecordProperty("powerloss_seed", std::to_string(config.seed));
  const PowerLossTotals t = RunPowerLossLoop(config);
  EXPECT_EQ(t.failure, "");
  std::printf("power-loss loop: %s\n", t.Summary().c_str());
  EXPECT_EQ(t.cuts, config.cuts);
  EXPECT_GT(t.spills_synced, 0u) << "no synced spill completed: the survival check checked nothing";
  EXPECT_GT(t.removes_completed, 0u) << "no remove completed";
  EXPECT_GT(t.pending_at_cut, 0u) << "no cut found anything unsynced: the model lost nothing";
}

void Usage() {
  std::printf(
      "usage: tier_powerloss_tests --soak [--cuts N] [--seed N] [--dir PATH]\n"
      "Runs the power-loss loop: a worker spills, restores and removes checkpoints through the\n"
      "disk provider on the fault-injecting FUSE filesystem, which stops at a random mutating "
      "call;\n"
      "the worker is killed, the directory rebuilt as a power loss leaves it (unsynced writes,\n"
      "creates, renames and unlinks kept or lost, the last writes torn at 512 B or 4 KiB), and "
      "the\n"
      "provider reopened on it: every completed synced spill must restore byte-exact, no "
      "completed\n"
      "remove may come back, nothing may restore wrong bytes, recovery must finish within budget.\n"
      "N cuts (default 100000); --seed replays a run's choices; --dir keeps the scratch directory\n"
      "(default: a fresh one under /dev/shm, removed at the end). Exit 0 when every cut "
      "verified.\n");
}

}  // namespace

int SoakMain(int argc, char** argv) {
  PowerLossConfig config;
  config.cuts = 100000;
  config.seed = RandomSeed();
  config.progress = true;
  std::string dir;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--help" || a == "-h") {
      Usage();
      return 0;
    } else if (a == "--cuts" && has_value) {
      config.cuts = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--seed" && has_value) {
      config.seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--dir" && has_value) {
      dir = argv[++i];
    } else {
      std::fprintf(stderr, "soak: unknown argument '%s'\n", a.c_str());
      Usage();
      return 2;
    }
  }
  config.self_exe = SelfExe();
  std::unique_ptr<ScratchDir> scratch;
  if (dir.empty()) {
    scratch = std::make_unique<ScratchDir>("soak");
    config.root = scratch->path();
  } else {
    ::mkdir(dir.c_str(), 0700);
    config.root = dir;
  }
  std::printf("power-loss soak: %llu cuts in %s, seed %llu (replay with --seed %llu)\n",
              static_cast<unsigned long long>(config.cuts), config.root.c_str(),
              static_cast<unsigned long long>(config.seed),
              static_cast<unsigned long long>(config.seed));
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  const PowerLossTotals t = RunPowerLossLoop(config);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("power-loss soak: %s; %.0f s\n", t.Summary().c_str(), seconds);
  if (!t.failure.empty()) {
    std::printf("power-loss soak: FAILED: %s\n", t.failure.c_str());
    return 1;
  }
  std::printf("power-loss soak: every cut verified\n");
  return 0;
}

}  // namespace tier::powerloss::test
