// The libFuzzer entry point of tier_fuzz_simulation (tests/run-fuzz.sh --target simulation).
#include <cstddef>
#include <cstdint>

#include "fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tier::simulation::FuzzHostSimulation(data, size, TIER_SIM_BRIDGE);
}
