#include "tier/shuffle/byte_shuffle.h"

#include <gtest/gtest.h>

#include <vector>

#include "test_support.h"

namespace tier::device::test {
namespace {

// The definition, written out: dst[b * n + i] = src[i * E + b], tail copied.
std::vector<std::byte> ReferenceShuffle(const std::vector<std::byte>& src, std::uint32_t e) {
  std::vector<std::byte> dst(src.size());
  const std::size_t n = src.size() / e;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::uint32_t b = 0; b < e; ++b) dst[b * n + i] = src[i * e + b];
  }
  for (std::size_t k = n * e; k < src.size(); ++k) dst[k] = src[k];
  return dst;
}

const std::vector<std::size_t> kSizes = {0,  1,  2,  3,  4,  5,   15,   16,   17,    31,
                                         32, 33, 63, 64, 65, 127, 1000, 4099, 65536, 100003};

TEST(ByteShuffle, MatchesTheDefinitionAndRoundTrips) {
  for (std::uint32_t e : {2u, 4u}) {
    for (std::size_t size : kSizes) {
      SCOPED_TRACE("element_bytes " + std::to_string(e) + ", " + std::to_string(size) + " bytes");
      const std::vector<std::byte> src = RandomBytes(size, size * 7 + e);
      std::vector<std::byte> shuffled(size);
      ASSERT_TRUE(shuffle::ByteShuffle(src, shuffled, e).ok());
      ASSERT_EQ(shuffled, ReferenceShuffle(src, e));
      std::vector<std::byte> back(size);
      ASSERT_TRUE(shuffle::ByteUnshuffle(shuffled, back, e).ok());
      ASSERT_EQ(back, src);
    }
  }
}

TEST(ByteShuffle, GroupsTheHighBytesOfBf16) {
  // BF16 values 1.0 (0x3F80) and -2.0 (0xC000), little endian.
  const std::vector<std::byte> src = {std::byte{0x80}, std::byte{0x3F}, std::byte{0x00},
                                      std::byte{0xC0}};
  std::vector<std::byte> dst(4);
  ASSERT_TRUE(shuffle::ByteShuffle(src, dst, 2).ok());
  EXPECT_EQ(dst, (std::vector<std::byte>{std::byte{0x80}, std::byte{0x00}, std::byte{0x3F},
                                         std::byte{0xC0}}));
}

TEST(ByteShuffle, RefusesBadArguments) {
  std::vector<std::byte> a(64), b(64), c(63);
  EXPECT_EQ(shuffle::ByteShuffle(a, b, 3).code(), TIER_INVALID_ARGUMENT);
  EXPECT_EQ(shuffle::ByteShuffle(a, b, 1).code(), TIER_INVALID_ARGUMENT);
  EXPECT_EQ(shuffle::ByteShuffle(a, c, 2).code(), TIER_INVALID_ARGUMENT);
  EXPECT_EQ(shuffle::ByteUnshuffle(a, std::span<std::byte>(a.data() + 8, 56), 2).code(),
            TIER_INVALID_ARGUMENT);
  const ::tier::Status overlap = shuffle::ByteShuffle(std::span<const std::byte>(a.data(), 32),
                                                      std::span<std::byte>(a.data() + 16, 32), 2);
  EXPECT_EQ(overlap.code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(overlap.message().find("overlap"), std::string::npos);
}

// The engines' device-memory shuffle gives the CPU function's bytes (CUDA: when present).
class EngineShuffle : public ::testing::TestWithParam<EngineKind> {};

TEST_P(EngineShuffle, MatchesCpuShuffle) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, GetParam());
  for (std::uint32_t e : {2u, 4u}) {
    for (std::size_t size : kSizes) {
      if (size == 0) continue;
      SCOPED_TRACE("element_bytes " + std::to_string(e) + ", " + std::to_string(size) + " bytes");
      const std::vector<std::byte> src = RandomBytes(size, size + e);
      Result<DeviceBuffer> d_src = engine->AllocateDevice(size);
      Result<DeviceBuffer> d_dst = engine->AllocateDevice(size);
      Result<DeviceBuffer> d_back = engine->AllocateDevice(size);
      ASSERT_TRUE(d_src.ok() && d_dst.ok() && d_back.ok());
      std::vector<std::byte> shuffled(size), back(size);
      // Queued without waiting (the handles stay alive until the end of the iteration).
      Result<Transfer> up = engine->CopyToDevice(d_src->data(), src.data(), size);
      ASSERT_TRUE(up.ok());
      Result<Transfer> forward = engine->ByteShuffle(d_dst->data(), d_src->data(), size, e, false);
      ASSERT_TRUE(forward.ok());
      Result<Transfer> inverse = engine->ByteShuffle(d_back->data(), d_dst->data(), size, e, true);
      ASSERT_TRUE(inverse.ok());
      Result<Transfer> down = engine->CopyToHost(shuffled.data(), d_dst->data(), size);
      ASSERT_TRUE(down.ok());
      Result<Transfer> last = engine->CopyToHost(back.data(), d_back->data(), size);
      ASSERT_TRUE(last.ok());
      ASSERT_TRUE(last->Wait().ok());  // stream order: everything before it is done too
      std::vector<std::byte> want(size);
      ASSERT_TRUE(shuffle::ByteShuffle(src, want, e).ok());
      ASSERT_EQ(shuffled, want);
      ASSERT_EQ(back, src);
    }
  }
  Result<DeviceBuffer> buf = engine->AllocateDevice(64);
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(engine->ByteShuffle(buf->data(), buf->data() + 8, 32, 2, false).status().code(),
            TIER_INVALID_ARGUMENT);
  EXPECT_EQ(engine->ByteShuffle(buf->data(), buf->data() + 32, 32, 8, false).status().code(),
            TIER_INVALID_ARGUMENT);
}

INSTANTIATE_TEST_SUITE_P(Cpu, EngineShuffle,
                         ::testing::Values(EngineKind::kCpuInline, EngineKind::kCpuWorker),
                         [](const auto& info) { return EngineKindName(info.param); });
INSTANTIATE_TEST_SUITE_P(Gpu, EngineShuffle, ::testing::Values(EngineKind::kCuda),
                         [](const auto& info) { return EngineKindName(info.param); });

}  // namespace
}  // namespace tier::device::test
