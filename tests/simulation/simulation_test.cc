// The seeded simulation of the Host (simulation.h) under ctest. Knobs (environment):
//   TIER_SIM_SEED=S       run only seed S (a failure's replay; prints what it did)
//   TIER_SIM_SEEDS=N      seeds to run (default 1000), from TIER_SIM_FIRST_SEED (default 1)
//   TIER_SIM_OPS=N        steps per seed (default 1000)
//   TIER_SIM_STRICT=1     fail on the known findings too (README.md)
//   TIER_SIM_TRACE=1      print every step and the Host's debug log
// A failure prints the seed, the step, the last steps and the Host's last log lines, and the
// command that replays it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz_target.h"
#include "simulation.h"
#include "test_support.h"

namespace tier::simulation::test {
namespace {

using ::tier::test::EnvOr;

class Simulation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { SetBridgePath(TIER_SIM_BRIDGE); }
};

TEST_F(Simulation, RandomRunsKeepEveryPromiseOfTheHost) {
  const bool replay = std::getenv("TIER_SIM_SEED") != nullptr;
  const uint64_t first = replay ? EnvOr("TIER_SIM_SEED", 1) : EnvOr("TIER_SIM_FIRST_SEED", 1);
  const uint64_t seeds = replay ? 1 : EnvOr("TIER_SIM_SEEDS", 1000);
  const uint64_t ops = EnvOr("TIER_SIM_OPS", 1000);
  SimCounts total;
  std::string known_first[kKnownCount];
  uint64_t known_seeds[kKnownCount] = {};
  int failures = 0;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t seed = first; seed < first + seeds && failures < 3; ++seed) {
    SeededChoices choices(seed);
    const auto seed_start = std::chrono::steady_clock::now();
    const SimOutcome out = RunSimulation(seed, ops, &choices);
    const double seed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - seed_start).count();
    if (seed_s > 2) {
      std::printf("seed %llu took %.1f s\n", static_cast<unsigned long long>(seed), seed_s);
    }
    total.Add(out.counts);
    for (int k = 0; k < kKnownCount; ++k) {
      if (out.known[k].empty()) continue;
      if (known_first[k].empty()) known_first[k] = out.known[k];
      ++known_seeds[k];
    }
    if (!out.ok) {
      ++failures;
      ADD_FAILURE() << out.failure;
    }
    if (replay)
      std::printf("seed %llu: %s\n", static_cast<unsigned long long>(seed),
                  out.counts.ToString().c_str());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("simulation: seeds %llu..%llu, %s; %.1f s\n", static_cast<unsigned long long>(first),
              static_cast<unsigned long long>(first + seeds - 1), total.ToString().c_str(),
              seconds);
  for (int k = 0; k < kKnownCount; ++k) {
    if (known_seeds[k] == 0) continue;
    std::printf(
        "known finding (README.md; TIER_SIM_STRICT=1 fails on it): %s, in %llu seeds, "
        "first: %s\n",
        KnownName(static_cast<Known>(k)), static_cast<unsigned long long>(known_seeds[k]),
        known_first[k].c_str());
  }
  EXPECT_GT(total.steps, 0u);
}

// Without provider faults nothing depends on the wall clock: a seed is the whole run (what the
// Host answered at every step, and a failure at the same step with the same message).
TEST_F(Simulation, ASeedReplaysTheSameRun) {
  const uint64_t ops = std::min<uint64_t>(EnvOr("TIER_SIM_OPS", 1000), 400);
  for (uint64_t seed : {7u, 8u}) {
    SeededChoices a(seed), b(seed);
    const SimOutcome first = RunSimulation(seed, ops, &a, /*faults=*/false);
    const SimOutcome second = RunSimulation(seed, ops, &b, /*faults=*/false);
    EXPECT_EQ(first.failure, second.failure);  // a failure too is the same, at the same step
    EXPECT_EQ(first.counts.trace, second.counts.trace) << "seed " << seed << " ran differently";
    EXPECT_EQ(first.counts.ToString(), second.counts.ToString());
  }
}

// The fuzz target's committed inputs (tests/fuzz/corpus/simulation, and anything a fuzzer found,
// tests/fuzz/regressions/simulation) run in every build through the same interpreter.
TEST_F(Simulation, FuzzInputsKeepEveryPromiseOfTheHost) {
  int inputs = 0;
  for (const char* dir : {"corpus/simulation", "regressions/simulation"}) {
    const std::filesystem::path path = std::filesystem::path(TIER_SIM_CORPUS) / dir;
    if (!std::filesystem::is_directory(path)) continue;
    for (const auto& entry : std::filesystem::directory_iterator(path)) {
      std::ifstream in(entry.path(), std::ios::binary);
      const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                       std::istreambuf_iterator<char>());
      const SimOutcome out = RunFromBytes(bytes.data(), bytes.size());
      EXPECT_TRUE(out.ok) << entry.path() << ": " << out.failure;
      ++inputs;
    }
  }
  EXPECT_GT(inputs, 0) << "no inputs under " << TIER_SIM_CORPUS << "/corpus/simulation";
}

}  // namespace
}  // namespace tier::simulation::test
