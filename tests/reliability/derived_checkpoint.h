// derived_checkpoint.h -- checkpoints whose key and every byte derive from one 64-bit seed, so a
// process that never saw the spill (the crash-loop parent, a stress thread) can tell from a key
// alone what the stored checkpoint must contain, and verify a restore byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "disk_provider.h"
#include "disk_test_util.h"

namespace tier::disk::test {

// Key of seed `seed`: bytes [0, 8) are the seed (little-endian), bytes [8, 32) a digest of it.
tier_key DerivedKey(uint64_t seed);
// The seed of a key made by DerivedKey; false for any other key (a foreign or damaged identity).
bool SeedOfKey(const tier_key& key, uint64_t* seed);

// The checkpoint of `seed`: 1 to 5 segments of random kinds and odd lengths up to
// `max_segment_bytes` (some empty, some compressible), sometimes a manifest. Deterministic.
Checkpoint DerivedCheckpoint(uint64_t seed, uint64_t max_segment_bytes = 1u << 20);

// Restores `seed`'s checkpoint from `p` into poisoned buffers (misaligned by `misalign` bytes) and
// compares. Returns "" when it came back byte-exact, else what went wrong.
std::string RestoreAndCompare(DiskProvider& p, uint64_t seed, uint64_t max_segment_bytes,
                              uint64_t misalign = 0);

// True when `infos` (a stored segment table, in stored order) is `seed`'s layout.
bool LayoutMatches(const Checkpoint& cp, const tier_segment_info* infos, uint32_t count);

}  // namespace tier::disk::test
