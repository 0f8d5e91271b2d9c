// DiskChecksum: a chunk's stored checksum is XXH3-64 whatever code computes it. The disk provider
// may hash through xxHash's run-time dispatcher (AVX2/AVX-512, see CMakeLists.txt); files written
// by one build must read on any other, so Checksum is held to xxHash's portable scalar code,
// compiled here on its own (inlined, vectors off: XXH_INLINE_ALL names its copy apart from the
// library's) as the oracle.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "codec.h"
#include "disk_test_util.h"

#define XXH_INLINE_ALL
#define XXH_VECTOR 0  // XXH_SCALAR: no SIMD, the reference loop
#include <xxhash.h>

namespace tier::disk::test {
namespace {

TEST(DiskChecksum, MatchesTheScalarReferenceAtEveryLengthClass) {
  // Lengths cover each XXH3 path: empty, short (<=16, <=128, <=240), one stripe block, many
  // blocks, and a tail that is not a whole stripe; odd offsets make the input unaligned.
  const std::vector<uint8_t> bytes = RandomBytes((4u << 20) + 64, 17);
  for (uint64_t length : {0ull, 1ull, 16ull, 17ull, 128ull, 240ull, 241ull, 1024ull, 4095ull,
                          65536ull, (1ull << 20) + 7, 4ull << 20}) {
    for (uint64_t offset : {0ull, 3ull}) {
      for (uint64_t seed : {0ull, 1ull, 0x9e3779b97f4a7c15ull}) {
        const std::span<const uint8_t> in(bytes.data() + offset, length);
        EXPECT_EQ(Checksum(in, seed), XXH3_64bits_withSeed(in.data(), length, seed))
            << "length " << length << " offset " << offset << " seed " << seed;
      }
    }
  }
}

TEST(DiskChecksum, EmptyInputIsXxh3sPublishedValue) {
  // xxHash's published XXH3_64bits("") with seed 0 (xxhsum -H3 of an empty file).
  EXPECT_EQ(Checksum({}, 0), 0x2D06800538D394C2ull);
}

}  // namespace
}  // namespace tier::disk::test
