// fuzz_target.h -- the simulation fed by a fuzzer: the input's bytes are the run's decisions
// (ByteChoices), so libFuzzer steers the same operation interpreter the seeded suite runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "simulation.h"

namespace tier::simulation {

// Runs the simulation the input describes (until its bytes run out, at most 4,000 steps).
SimOutcome RunFromBytes(const uint8_t* data, size_t size);

// The libFuzzer target: aborts, printing the failure, when a run breaks a promise of the Host.
// `bridge` is libtier_sim_bridge.so's path.
int FuzzHostSimulation(const uint8_t* data, size_t size, const std::string& bridge);

}  // namespace tier::simulation
