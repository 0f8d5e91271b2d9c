#include "checkpoint_bytes.h"

#include <xxhash.h>

#include <cstring>
#include <string>

namespace tier::sim {
namespace {

// splitmix64: a fast, well-distributed stream from one 64-bit seed.
class ByteStream {
 public:
  explicit ByteStream(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

uint64_t SegmentSeed(const tier_key& key, tier_segment_kind kind, uint32_t index) {
  unsigned char buffer[TIER_KEY_BYTES + 8];
  std::memcpy(buffer, key.bytes, TIER_KEY_BYTES);
  std::memcpy(buffer + TIER_KEY_BYTES, &kind, 4);
  std::memcpy(buffer + TIER_KEY_BYTES + 4, &index, 4);
  return XXH3_64bits(buffer, sizeof(buffer));
}

}  // namespace

void FillSegmentBytes(const tier_key& key, tier_segment_kind kind, uint32_t index,
                      std::span<std::byte> out) {
  ByteStream stream(SegmentSeed(key, kind, index));
  size_t i = 0;
  for (; i + 8 <= out.size(); i += 8) {
    const uint64_t word = stream.Next();
    std::memcpy(out.data() + i, &word, 8);
  }
  if (i < out.size()) {
    const uint64_t word = stream.Next();
    std::memcpy(out.data() + i, &word, out.size() - i);
  }
}

bool SegmentBytesMatch(const tier_key& key, tier_segment_kind kind, uint32_t index,
                       std::span<const std::byte> data) {
  ByteStream stream(SegmentSeed(key, kind, index));
  size_t i = 0;
  for (; i + 8 <= data.size(); i += 8) {
    const uint64_t word = stream.Next();
    if (std::memcmp(data.data() + i, &word, 8) != 0) return false;
  }
  if (i < data.size()) {
    const uint64_t word = stream.Next();
    if (std::memcmp(data.data() + i, &word, data.size() - i) != 0) return false;
  }
  return true;
}

}  // namespace tier::sim
