#include "fuzz_target.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "choices.h"

namespace tier::simulation {

SimOutcome RunFromBytes(const uint8_t* data, size_t size) {
  uint64_t seed = size;
  for (size_t i = 0; i < size && i < 8; ++i) seed = Mix64(seed ^ data[i]);
  ByteChoices choices(data, size);
  return RunSimulation(seed, 4000, &choices);
}

int FuzzHostSimulation(const uint8_t* data, size_t size, const std::string& bridge) {
  static const bool ready = (SetBridgePath(bridge), true);
  (void)ready;
  const SimOutcome out = RunFromBytes(data, size);
  if (!out.ok) {
    std::fprintf(stderr, "property violated: %s\n", out.failure.c_str());
    std::abort();
  }
  return 0;
}

}  // namespace tier::simulation
