// simulation.h -- a seeded simulation of the public tier::Host API (tests/simulation/README.md):
// an engine model (engine_model.h) drives random sequences of Seal, Admit, Poll, Release, Cancel,
// Prefetch, Evict, ReportVerification and Close/reopen against a reference model of who owns
// every page and what every key holds, with faults injected through the scripted provider
// (sim_provider.h), a gated CPU engine and allocators that fail or run short, and checks the
// Host's promises after every step. A run is a function of its Choices: a seed replays it.
#pragma once

#include <cstdint>
#include <string>

#include "choices.h"

namespace tier::simulation {

// What a run did, summed over runs for the report.
struct SimCounts {
  uint64_t steps = 0, seals = 0, admits = 0, device_hits = 0, host_restores = 0, cold_restores = 0,
           roots = 0, cancels = 0, prefetches = 0, evicts = 0, restarts = 0, readopted_checked = 0,
           deliveries = 0, pages_released = 0, forced_copies = 0, stalls = 0;
  uint64_t trace = 0;  // a digest of every step and what the Host answered (not summed)
  void Add(const SimCounts& o);
  std::string ToString() const;
};

// Findings the simulation made on the Host that are reported, not failed, unless
// TIER_SIM_STRICT=1 (tests/simulation/README.md lists them, with a seed that shows each).
enum class Known {
  kServedAfterReportedWrong,  // a pending admission of a checkpoint reported wrong turns ready
  kHostOverBudgetAtRest,      // at quiescence the Host tier stays over host_capacity_bytes
  kWaitsWithNothingInFlight,  // pending admissions wait (until the provider timeout) for nothing
};
constexpr int kKnownCount = 3;
const char* KnownName(Known k);

struct SimOutcome {
  bool ok = true;
  std::string failure;  // "step N (op): what broke", then the last steps and log lines
  SimCounts counts;
  std::string known[kKnownCount];  // the first "seed S step N: ..." of each known finding
};

// Runs up to `steps` steps (fewer when `choices` runs out) and the final drain. Without `faults`
// the provider never refuses, fails or stalls and Host memory is the default bound: then no
// wall-clock deadline, spill back-off or the Host's own freeing thread decides anything, and the
// run is a function of the seed alone. With faults a replay follows the same steps as long as
// those fall the same way (they mostly do: the steps take microseconds, the back-off 1 s).
SimOutcome RunSimulation(uint64_t seed, uint64_t steps, Choices* choices, bool faults = true);

// The path of libtier_sim_bridge.so; set before the first run (the test gets it from CMake).
void SetBridgePath(const std::string& path);

}  // namespace tier::simulation
