// The libFuzzer entry point of one target, chosen at compile time (TIER_FUZZ_TARGET).
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return tier::disk::fuzz::TIER_FUZZ_TARGET(data, size);
}
