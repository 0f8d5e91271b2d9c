// DiskCodec: the chunk codecs (zstd, zstd over 2- and 4-byte planes) round-trip byte-exact at any
// length, `auto`'s per-segment choice picks what the data calls for and honours the restore-speed
// guard, and the format accepts the shuffle codecs only where a chunk's codec is its segment's.
#include <gtest/gtest.h>
#include <zstd.h>
#include <cmath>

#include <cstring>
#include <vector>

#include "codec.h"
#include "compression_policy.h"
#include "disk_test_util.h"
#include "format.h"

namespace tier::disk::test {
namespace {

using test::Bf16Like;
using test::Fp32StateLike;
using test::RandomBytes;

TEST(DiskCodec, EveryZstdCodecRoundTripsAnyLength) {
  for (uint32_t codec : {kCodecZstd, kCodecZstdShuffle2, kCodecZstdShuffle4}) {
    for (uint64_t bytes : {uint64_t{1}, uint64_t{3}, uint64_t{4097}, uint64_t{(1 << 20) + 3}}) {
      const std::vector<uint8_t> src = Bf16Like(bytes, 9);
      std::vector<uint8_t> frame(ZSTD_compressBound(bytes) + 64);
      const uint64_t n = CompressChunkAs(codec, src, frame, 1);
      ASSERT_GT(n, 0u) << codec << "/" << bytes;
      std::vector<uint8_t> back(bytes, 0xa5);
      ASSERT_TRUE(DecompressChunkAs(codec, std::span(frame).first(n), back))
          << codec << "/" << bytes;
      EXPECT_EQ(back, src) << codec << "/" << bytes;
      // A frame decoded as another length is refused, never written past dst.
      std::vector<uint8_t> shorter(bytes + 1);
      EXPECT_FALSE(DecompressChunkAs(codec, std::span(frame).first(n), shorter));
    }
  }
}

TEST(DiskCodec, DoesNotFitReturnsZero) {
  const std::vector<uint8_t> src = RandomBytes(1 << 20, 3);
  std::vector<uint8_t> small(1 << 19);
  for (uint32_t codec : {kCodecZstd, kCodecZstdShuffle2, kCodecZstdShuffle4}) {
    EXPECT_EQ(CompressChunkAs(codec, src, small, 1), 0u) << codec;
  }
}

TEST(DiskCodec, ChoiceFollowsTheData) {
  const std::vector<uint8_t> random = RandomBytes(8 << 20, 1);
  EXPECT_EQ(ChooseCodec(random, 1, true, 0).codec, kCodecRaw);
  const std::vector<uint8_t> bf16 = Bf16Like(8 << 20, 2);
  const CodecChoice b = ChooseCodec(bf16, 1, true, 0);
  EXPECT_EQ(b.codec, kCodecZstdShuffle2) << b.reason << " ratio " << b.sample_ratio;
  const std::vector<uint8_t> tiny(100, 0);
  EXPECT_EQ(ChooseCodec(tiny, 1, false, 0).codec, kCodecRaw);  // cannot save a 4 KiB block
  // `zstd` (no gain required) always compresses what can be.
  EXPECT_TRUE(IsZstdCodec(ChooseCodec(random, 1, false, 0).codec));
}

TEST(DiskCodec, RestoreSpeedGuardKeepsRaw) {
  const std::vector<uint8_t> bf16 = Bf16Like(8 << 20, 2);
  const CodecChoice fast = ChooseCodec(bf16, 1, true, 1e6);  // any core decompresses 1 MB/s
  EXPECT_TRUE(IsZstdCodec(fast.codec));
  EXPECT_GT(fast.decompress_bytes_per_second, 1e6);
  const CodecChoice slow = ChooseCodec(bf16, 1, true, 1e15);  // no core decompresses 1 PB/s
  EXPECT_EQ(slow.codec, kCodecRaw);
  EXPECT_STRNE(slow.reason, "");
}

TEST(DiskCodec, RestoreSpeedGuardRecordsItsDecision) {
  const std::vector<uint8_t> bf16 = Bf16Like(8 << 20, 2);
  EXPECT_EQ(ChooseCodec(bf16, 1, true, 1e6).decision, CodecDecision::kCompressed);
  EXPECT_EQ(ChooseCodec(bf16, 1, true, 1e15).decision, CodecDecision::kDecompressSlow);
  EXPECT_EQ(ChooseCodec(RandomBytes(1 << 20, 3), 1, true, 1e6).decision,
            CodecDecision::kSavesUnder10Pct);
  EXPECT_EQ(ChooseCodec(RandomBytes(100, 3), 1, true, 1e6).decision, CodecDecision::kUnder4KiB);
}

// Rule 2 as a formula: the faster the device's raw restores, the faster decompression must be;
// more codec cores lower the bar; where raw restores are already bound by checksumming on the
// codec cores, nothing compressed can keep up.
TEST(DiskCodec, MinDecompressRateFollowsTheDeviceAndTheCores) {
  const CodecCapacity one{1.0, 10e9};
  const CodecCapacity two{2.0, 10e9};
  const double slow_disk = MinDecompressBytesPerSecond(0.5e9, one);
  const double fast_disk = MinDecompressBytesPerSecond(2e9, one);
  EXPECT_GT(slow_disk, 0.5e9 * kDecompressHeadroom);  // the checksum still has to run
  EXPECT_GT(fast_disk, slow_disk);
  EXPECT_LT(MinDecompressBytesPerSecond(2e9, two), fast_disk);
  EXPECT_TRUE(std::isinf(MinDecompressBytesPerSecond(20e9, one)));  // 1/R < 1/c: CPU-bound raw
}

TEST(DiskCodec, CodecCapacityIsMeasuredWithinItsBounds) {
  const CodecCapacity c = MeasureCodecCapacity(1, 2);
  EXPECT_GE(c.parallel_cores, 0.25);
  EXPECT_LE(c.parallel_cores, 2.0);
  EXPECT_GT(c.checksum_bytes_per_second, 1e8);
}

Header ShuffledHeader(uint32_t segment_codec, uint32_t chunk_codec) {
  Header h;
  h.chunk_bytes = 64 << 10;
  h.namespace_id = "ns";
  h.segments.push_back({TIER_SEGMENT_MAIN_KV, 0, 4096, 0, segment_codec, 1, 0, 0});
  h.chunks.resize(1);
  h.data_offset = AlignUp(HeaderContentBytes(h.namespace_id.size(), 1, 1, 0), kBlockBytes);
  h.chunks[0] = {h.data_offset, 1000, chunk_codec, 7};
  h.file_bytes = h.data_offset + 4096;
  h.segments[0].stored_bytes = 4096;
  h.logical_bytes = 4096;
  return h;
}

bool Parses(const Header& h) {
  std::vector<uint8_t> bytes(h.data_offset);
  EncodeHeader(h, bytes);
  Header out;
  ParseError error;
  return ParseHeader(bytes, &out, &error);
}

TEST(DiskCodec, FormatTakesShuffleCodecsOnlyInTheirSegment) {
  EXPECT_TRUE(Parses(ShuffledHeader(kCodecZstdShuffle2, kCodecZstdShuffle2)));
  EXPECT_TRUE(Parses(ShuffledHeader(kCodecZstdShuffle4, kCodecZstdShuffle4)));
  EXPECT_FALSE(Parses(ShuffledHeader(kCodecZstd, kCodecZstdShuffle2)));
  EXPECT_FALSE(Parses(ShuffledHeader(kCodecZstdShuffle4, kCodecZstdShuffle2)));
  EXPECT_FALSE(Parses(ShuffledHeader(kCodecRaw, kCodecZstdShuffle4)));
  EXPECT_FALSE(Parses(ShuffledHeader(5, 5)));  // unknown codec
}

}  // namespace
}  // namespace tier::disk::test
