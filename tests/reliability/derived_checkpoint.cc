#include "derived_checkpoint.h"

#include <cstring>
#include <random>

namespace tier::disk::test {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

tier_key DerivedKey(uint64_t seed) {
  tier_key key{};
  uint64_t words[4] = {seed, Mix(seed ^ 1), Mix(seed ^ 2), Mix(seed ^ 3)};
  for (int w = 0; w < 4; ++w) {
    for (int b = 0; b < 8; ++b) key.bytes[8 * w + b] = static_cast<uint8_t>(words[w] >> (8 * b));
  }
  return key;
}

bool SeedOfKey(const tier_key& key, uint64_t* seed) {
  uint64_t s = 0;
  for (int b = 7; b >= 0; --b) s = (s << 8) | key.bytes[b];
  const tier_key expected = DerivedKey(s);
  if (std::memcmp(expected.bytes, key.bytes, TIER_KEY_BYTES) != 0) return false;
  *seed = s;
  return true;
}

Checkpoint DerivedCheckpoint(uint64_t seed, uint64_t max_segment_bytes) {
  std::mt19937_64 rng(Mix(seed));
  Checkpoint cp;
  const int segments = 1 + static_cast<int>(rng() % 5);
  const uint32_t data_kinds[] = {TIER_SEGMENT_MAIN_KV, TIER_SEGMENT_SPEC_KV,
                                 TIER_SEGMENT_STATE_IMAGE, TIER_SEGMENT_HIDDEN_STATE,
                                 TIER_SEGMENT_OTHER};
  for (int i = 0; i < segments; ++i) {
    const uint32_t kind = data_kinds[rng() % 5];
    const uint64_t shape = rng() % 8;
    uint64_t bytes = shape == 0 ? 0 : (shape == 1 ? 1 + rng() % 64 : rng() % max_segment_bytes);
    if (shape == 2) bytes = bytes / 4096 * 4096;  // block-aligned length: the zero-copy path
    const uint64_t content_seed = Mix(seed * 31 + static_cast<uint64_t>(i));
    std::vector<uint8_t> data =
        (rng() % 2) ? RandomBytes(bytes, content_seed) : Fp32StateLike(bytes, content_seed);
    cp.Add(kind, static_cast<uint32_t>(i), std::move(data));  // index i keeps (kind, index) unique
  }
  if (rng() % 3 != 0) cp.Add(TIER_SEGMENT_MANIFEST, 0, RandomBytes(rng() % 4000, Mix(seed + 7)));
  return cp;
}

std::string RestoreAndCompare(DiskProvider& p, uint64_t seed, uint64_t max_segment_bytes,
                              uint64_t misalign) {
  const Checkpoint cp = DerivedCheckpoint(seed, max_segment_bytes);
  RestoreTarget target = MakeTarget(cp, misalign);
  const Done done = RestoreSync(p, DerivedKey(seed), target);
  if (done.status != TIER_OK) {
    return "seed " + std::to_string(seed) + ": restore " + tier_status_name(done.status) + ": " +
           done.message;
  }
  if (!target.Equals(cp)) return "seed " + std::to_string(seed) + ": restored WRONG BYTES";
  if (done.logical_bytes != cp.logical_bytes()) {
    return "seed " + std::to_string(seed) + ": completion reports " +
           std::to_string(done.logical_bytes) + " logical bytes, expected " +
           std::to_string(cp.logical_bytes());
  }
  return "";
}

bool LayoutMatches(const Checkpoint& cp, const tier_segment_info* infos, uint32_t count) {
  if (count != cp.infos.size()) return false;
  for (uint32_t i = 0; i < count; ++i) {
    const tier_segment_info& want = cp.infos[i];
    if (infos[i].kind != want.kind || infos[i].index != want.index ||
        infos[i].length_bytes != want.length_bytes) {
      return false;
    }
  }
  return true;
}

}  // namespace tier::disk::test
