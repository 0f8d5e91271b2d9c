// DiskOptions and DiskFormat: the pure parts (option parsing; header encode/parse).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "format.h"
#include "options.h"

namespace tier::disk::test {
namespace {

Result<DiskOptions> Parse(std::vector<std::pair<std::string, std::string>> kv) {
  std::vector<tier_option> view;
  for (auto& [k, v] : kv) view.push_back({k.c_str(), v.c_str()});
  return ParseOptions(view);
}

TEST(DiskOptions, DefaultsAndRequiredKeys) {
  auto r = Parse({{"dir", "/x"}, {"capacity_gib", "1"}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().capacity_bytes, 1ull << 30);
  EXPECT_EQ(r.value().compression, CompressionMode::kAuto);
  EXPECT_EQ(r.value().zstd_level, 1);
  EXPECT_EQ(r.value().direct_io, DirectIoMode::kAuto);
  EXPECT_EQ(r.value().queue_depth, 16u);
  EXPECT_EQ(r.value().io_threads, 4u);
  EXPECT_EQ(r.value().codec_threads, 2u);
  EXPECT_EQ(r.value().durability, Durability::kFdatasync);
  EXPECT_EQ(r.value().staging_bytes, 64ull << 20);
  EXPECT_FALSE(r.value().allow_foreign_fs);
  EXPECT_EQ(r.value().chunk_bytes, 1u << 20);

  auto no_dir = Parse({{"capacity_gib", "1"}});
  EXPECT_EQ(no_dir.status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(no_dir.status().message().find("'dir'"), std::string::npos);
  auto empty_dir = Parse({{"dir", ""}, {"capacity_gib", "1"}});
  EXPECT_EQ(empty_dir.status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(empty_dir.status().message().find("cold tier is off"), std::string::npos);
  auto no_cap = Parse({{"dir", "/x"}});
  EXPECT_NE(no_cap.status().message().find("capacity_bytes"), std::string::npos);
  auto both = Parse({{"dir", "/x"}, {"capacity_gib", "1"}, {"capacity_bytes", "5"}});
  EXPECT_EQ(both.status().code(), TIER_INVALID_ARGUMENT);
}

TEST(DiskOptions, FractionalGibAndAllKeys) {
  auto r = Parse({{"dir", "/x"},
                  {"capacity_gib", "0.5"},
                  {"compression", "zstd"},
                  {"zstd_level", "3"},
                  {"direct_io", "off"},
                  {"queue_depth", "32"},
                  {"io_threads", "2"},
                  {"codec_threads", "3"},
                  {"durability", "none"},
                  {"staging_mib", "16"},
                  {"allow_foreign_fs", "1"},
                  {"chunk_kib", "256"}});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().capacity_bytes, 1ull << 29);
  EXPECT_EQ(r.value().compression, CompressionMode::kZstd);
  EXPECT_EQ(r.value().zstd_level, 3);
  EXPECT_EQ(r.value().direct_io, DirectIoMode::kOff);
  EXPECT_EQ(r.value().queue_depth, 32u);
  EXPECT_EQ(r.value().codec_threads, 3u);
  EXPECT_EQ(r.value().durability, Durability::kNone);
  EXPECT_EQ(r.value().staging_bytes, 16ull << 20);
  EXPECT_TRUE(r.value().allow_foreign_fs);
  EXPECT_EQ(r.value().chunk_bytes, 256u << 10);
}

TEST(DiskOptions, MalformedValuesNameTheOption) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"queue_depth", "abc"},  {"queue_depth", "0"},   {"queue_depth", "2000"},
      {"queue_depth", "16x"},  {"io_threads", "-1"},   {"codec_threads", ""},
      {"zstd_level", "20"},    {"compression", "lz4"}, {"direct_io", "yes"},
      {"durability", "fsync"}, {"staging_mib", "0"},   {"allow_foreign_fs", "true"},
      {"chunk_kib", "102"},    {"chunk_kib", "32"},    {"capacity_bytes", "-5"},
      {"capacity_gib", "1e3"}, {"capacity_gib", "0"},  {"staging_mib", "1"},
  };
  for (const auto& [key, value] : bad) {
    std::vector<std::pair<std::string, std::string>> kv = {{"dir", "/x"}};
    if (key.rfind("capacity", 0) != 0) kv.push_back({"capacity_gib", "1"});
    kv.push_back({key, value});
    auto r = Parse(kv);
    EXPECT_EQ(r.status().code(), TIER_INVALID_ARGUMENT) << key << "=" << value;
    EXPECT_NE(r.status().message().find("'" + key + "'"), std::string::npos)
        << key << "=" << value << ": " << r.status().message();
  }
  auto q = Parse({{"dir", "/x"}, {"capacity_gib", "1"}, {"queue_depth", "abc"}});
  EXPECT_EQ(q.status().message(),
            "disk: option 'queue_depth': expected an integer in [1, 1024], got 'abc'");
  auto unknown = Parse({{"dir", "/x"}, {"capacity_gib", "1"}, {"cache_mode", "x"}});
  EXPECT_EQ(unknown.status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(unknown.status().message().find("'cache_mode'"), std::string::npos);
  auto dup = Parse({{"dir", "/x"}, {"capacity_gib", "1"}, {"dir", "/y"}});
  EXPECT_EQ(dup.status().code(), TIER_INVALID_ARGUMENT);
}

Header SampleHeader() {
  Header h;
  h.chunk_bytes = 64 << 10;
  for (size_t i = 0; i < h.key.size(); ++i) h.key[i] = static_cast<uint8_t>(i * 3 + 1);
  h.namespace_id = "qwen3.8-27b/int8-g64";
  h.manifest = {1, 2, 3, 4, 5};
  h.segments.push_back({TIER_SEGMENT_MANIFEST, 0, 5, 0, kCodecInline, 0, 0, 0});
  h.segments.push_back({TIER_SEGMENT_MAIN_KV, 0, (64 << 10) + 100, 0, kCodecZstd, 2, 0, 0});
  h.segments.push_back({TIER_SEGMENT_STATE_IMAGE, 1, 4096, 0, kCodecRaw, 1, 2, 0});
  h.chunks.resize(3);
  h.data_offset =
      AlignUp(HeaderContentBytes(h.namespace_id.size(), h.segments.size(), 3, 5), kBlockBytes);
  uint64_t at = h.data_offset;
  h.chunks[0] = {at, 1000, kCodecZstd, 11};
  at += 4096;
  h.chunks[1] = {at, 100, kCodecRaw, 12};
  at += 4096;
  h.chunks[2] = {at, 4096, kCodecRaw, 13};
  at += 4096;
  h.file_bytes = at;
  h.segments[1].stored_bytes = 8192;
  h.segments[2].stored_bytes = 4096;
  h.logical_bytes = 5 + (64 << 10) + 100 + 4096;
  return h;
}

std::vector<uint8_t> Encode(const Header& h) {
  std::vector<uint8_t> out(h.data_offset);
  EncodeHeader(h, out);
  return out;
}

TEST(DiskFormat, RoundTrip) {
  const Header h = SampleHeader();
  const std::vector<uint8_t> bytes = Encode(h);
  Header parsed;
  ParseError error;
  ASSERT_TRUE(ParseHeader(bytes, &parsed, &error)) << error.message;
  EXPECT_EQ(parsed.key, h.key);
  EXPECT_EQ(parsed.namespace_id, h.namespace_id);
  EXPECT_EQ(parsed.manifest, h.manifest);
  ASSERT_EQ(parsed.segments.size(), 3u);
  EXPECT_EQ(parsed.segments[1].logical_bytes, (64u << 10) + 100);
  ASSERT_EQ(parsed.chunks.size(), 3u);
  EXPECT_EQ(parsed.chunks[2].checksum, 13u);
  EXPECT_EQ(parsed.file_bytes, h.file_bytes);
}

TEST(DiskFormat, EveryFlippedBitAndEveryTruncationIsRefused) {
  const std::vector<uint8_t> bytes = Encode(SampleHeader());
  uint64_t content = 0;
  ParseError error;
  ASSERT_TRUE(PeekHeaderBytes(bytes, &content, &error));
  for (uint64_t i = 0; i < content; ++i) {
    for (int bit = 0; bit < 8; bit += 3) {
      std::vector<uint8_t> copy = bytes;
      copy[i] ^= static_cast<uint8_t>(1u << bit);
      Header out;
      EXPECT_FALSE(ParseHeader(copy, &out, &error)) << "flip at byte " << i << " bit " << bit;
    }
  }
  for (uint64_t len = 0; len < content; len += 7) {
    Header out;
    EXPECT_FALSE(ParseHeader(std::span(bytes).first(len), &out, &error)) << "length " << len;
  }
}

TEST(DiskFormat, RandomGarbageNeverParsesAndNeverCrashes) {
  std::mt19937_64 rng(42);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> junk(rng() % 8192);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    if (junk.size() >= 12) {
      std::memcpy(junk.data(), kMagic, 8);
      junk[8] = 1, junk[9] = junk[10] = junk[11] = 0;
    }
    Header out;
    ParseError error;
    EXPECT_FALSE(ParseHeader(junk, &out, &error));
  }
}

TEST(DiskFormat, NewerVersionIsUnsupportedNotCorrupt) {
  std::vector<uint8_t> bytes = Encode(SampleHeader());
  bytes[8] = kFormatVersion + 1;
  Header out;
  ParseError error;
  EXPECT_FALSE(ParseHeader(bytes, &out, &error));
  EXPECT_EQ(error.kind, ParseErrorKind::kUnsupported);
}

TEST(DiskFormat, ChunkSeedBindsKeySegmentAndChunkIndex) {
  KeyBytes key{};
  for (size_t i = 0; i < key.size(); ++i) key[i] = static_cast<uint8_t>(i);
  KeyBytes other = key;
  other[31] ^= 1;
  const uint64_t seed = ChunkSeed(2, key, TIER_SEGMENT_MAIN_KV, 3, 7);
  EXPECT_NE(seed, ChunkSeed(2, other, TIER_SEGMENT_MAIN_KV, 3, 7)) << "another checkpoint";
  EXPECT_NE(seed, ChunkSeed(2, key, TIER_SEGMENT_STATE_IMAGE, 3, 7)) << "another segment kind";
  EXPECT_NE(seed, ChunkSeed(2, key, TIER_SEGMENT_MAIN_KV, 4, 7)) << "another segment index";
  EXPECT_NE(seed, ChunkSeed(2, key, TIER_SEGMENT_MAIN_KV, 3, 8)) << "another chunk";
  EXPECT_EQ(seed, ChunkSeed(2, key, TIER_SEGMENT_MAIN_KV, 3, 7)) << "a pure function";
  EXPECT_EQ(ChunkSeed(1, key, TIER_SEGMENT_MAIN_KV, 3, 7), 0u) << "format 1: unseeded";
}

TEST(DiskFormat, FormatOneStillParsesAndReencodesAsItself) {
  Header h = SampleHeader();
  EXPECT_EQ(h.format_version, kFormatVersion);
  h.format_version = 1;
  const std::vector<uint8_t> bytes = Encode(h);
  EXPECT_EQ(bytes[8], 1);
  Header parsed;
  ParseError error;
  ASSERT_TRUE(ParseHeader(bytes, &parsed, &error)) << error.message;
  EXPECT_EQ(parsed.format_version, 1u);
  EXPECT_EQ(Encode(parsed), bytes);
  std::vector<uint8_t> zero = bytes;
  zero[8] = 0;
  EXPECT_FALSE(ParseHeader(zero, &parsed, &error));
  EXPECT_EQ(error.kind, ParseErrorKind::kCorrupt) << "format 0 never existed";
}

}  // namespace
}  // namespace tier::disk::test
