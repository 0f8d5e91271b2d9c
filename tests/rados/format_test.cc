// RadosFormat and RadosOptions: the object layout and the option parser, pure functions (no
// cluster needed).
#include <gtest/gtest.h>

#include <cstring>

#include "codec.h"
#include "format.h"
#include "options.h"

namespace tier::rados::test {
namespace {

Header SampleHeader() {
  Header h;
  h.spill_id = 0x1122334455667788ull;
  for (size_t i = 0; i < h.key.size(); ++i) h.key[i] = static_cast<uint8_t>(i * 7);
  h.prefix = "fleet-a";
  h.namespace_id = "qwen3.8-27b/int8";
  h.created_unix_ns = 1700000000123456789ull;
  h.object_bytes = 1u << 20;
  SegmentRecord kv{TIER_SEGMENT_MAIN_KV, 0, (3u << 20) + 5, kStorageChunks, 0, 4, 0};
  SegmentRecord manifest{TIER_SEGMENT_MANIFEST, 0, 3, kStorageInline, 0, 0, 0};
  h.segments = {kv, manifest};
  for (uint32_t c = 0; c < 4; ++c) {
    const uint32_t len = c < 3 ? (1u << 20) : 5;
    h.chunks.push_back({len, len, kCodecRaw, 1000u + c});
  }
  h.inline_bytes = {'a', 'b', 'c'};
  h.logical_bytes = kv.logical_bytes + 3;
  h.stored_bytes = 42;
  return h;
}

TEST(RadosFormat, HeaderRoundTripsAndEveryFlippedByteIsRefused) {
  const Header h = SampleHeader();
  const std::vector<uint8_t> bytes = EncodeHeader(h);
  Header parsed;
  std::string why;
  ASSERT_TRUE(ParseHeader(bytes, &parsed, &why)) << why;
  EXPECT_EQ(parsed.spill_id, h.spill_id);
  EXPECT_EQ(parsed.key, h.key);
  EXPECT_EQ(parsed.prefix, h.prefix);
  EXPECT_EQ(parsed.namespace_id, h.namespace_id);
  EXPECT_EQ(parsed.chunks.size(), 4u);
  EXPECT_EQ(parsed.chunks[3].checksum, 1003u);
  EXPECT_EQ(parsed.inline_bytes, h.inline_bytes);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<uint8_t> damaged = bytes;
    damaged[i] ^= 0x10;
    EXPECT_FALSE(ParseHeader(damaged, &parsed, &why)) << "byte " << i << " flipped was accepted";
  }
  std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 1);
  EXPECT_FALSE(ParseHeader(cut, &parsed, &why));
}

TEST(RadosFormat, ChunkChecksumBindsTheChunkToItsPlace) {
  ChunkBinding b;
  b.key.fill(3);
  b.spill_id = 9;
  b.kind = TIER_SEGMENT_MAIN_KV;
  b.index = 2;
  b.chunk_index = 1;
  b.seq = 5;
  b.offset = 1u << 20;
  b.logical_bytes = 4;
  b.stored_bytes = 4;
  const uint8_t data[4] = {1, 2, 3, 4};
  const uint64_t sum = ChunkChecksum(b, data);
  auto differs = [&](auto mutate) {
    ChunkBinding other = b;
    mutate(other);
    return ChunkChecksum(other, data) != sum;
  };
  EXPECT_TRUE(differs([](ChunkBinding& o) { o.spill_id = 10; }));
  EXPECT_TRUE(differs([](ChunkBinding& o) { o.index = 3; }));
  EXPECT_TRUE(differs([](ChunkBinding& o) { o.chunk_index = 0; }));
  EXPECT_TRUE(differs([](ChunkBinding& o) { o.seq = 4; }));
  EXPECT_TRUE(differs([](ChunkBinding& o) { o.key[31] ^= 1; }));
  const uint8_t other_data[4] = {1, 2, 3, 5};
  EXPECT_NE(ChunkChecksum(b, other_data), sum);
  uint8_t encoded[kChunkHeaderBytes];
  b.checksum = sum;
  EncodeChunkHeader(b, encoded);
  ChunkBinding parsed;
  ASSERT_TRUE(ParseChunkHeader(encoded, &parsed));
  EXPECT_TRUE(SameBinding(parsed, b));
}

TEST(RadosFormat, ObjectNamesParseBackAndNamespacesAreDistinct) {
  KeyBytes key;
  key.fill(0xAB);
  const ObjectName chunk = ParseObjectName(ChunkName(key, 0x0102030405060708ull, 17));
  EXPECT_EQ(chunk.kind, ObjectName::Kind::kChunk);
  EXPECT_EQ(chunk.key, key);
  EXPECT_EQ(chunk.spill_id, 0x0102030405060708ull);
  EXPECT_EQ(chunk.seq, 17u);
  EXPECT_EQ(ParseObjectName(HeaderName(key)).kind, ObjectName::Kind::kHeader);
  EXPECT_EQ(ParseObjectName(LeaseName(key, 5)).kind, ObjectName::Kind::kLease);
  EXPECT_EQ(ParseObjectName("benchmark_data_host_1234_object7").kind, ObjectName::Kind::kOther);
  EXPECT_EQ(ParseObjectName(ChunkName(key, 1, 2) + "x").kind, ObjectName::Kind::kOther);
  EXPECT_NE(NamespaceTag("a/b", "c"), NamespaceTag("a", "b/c"));
  EXPECT_NE(NamespaceTag("", "model-a"), NamespaceTag("", "model-b"));
  EXPECT_EQ(NamespaceTag("", "model-a"), NamespaceTag("", "model-a"));
}

std::vector<tier_option> Raw(const std::vector<std::pair<std::string, std::string>>& kv) {
  static std::vector<std::pair<std::string, std::string>> keep;
  keep = kv;
  std::vector<tier_option> out;
  for (const auto& [k, v] : keep) out.push_back({k.c_str(), v.c_str()});
  return out;
}

TEST(RadosOptions, BadOptionsNameTheOption) {
  const std::pair<std::string, std::string> base[] = {{"pool", "tier"}, {"capacity_gib", "1"}};
  struct Case {
    std::string key, value, mentions;
  } cases[] = {
      {"object_mib", "0", "object_mib"},
      {"object_mib", "129", "object_mib"},
      {"queue_depth", "x", "queue_depth"},
      {"compression", "lz4", "compression"},
      {"op_timeout_s", "-1", "op_timeout_s"},
      {"zstd_level", "30", "zstd_level"},
      {"client", "", "client"},
      {"lease_grace_s", "3", "lease_grace_s"},
      {"colour", "blue", "unknown option 'colour'"},
      {"capacity_bytes", "5", "capacity_gib"},
  };
  for (const Case& c : cases) {
    std::vector<std::pair<std::string, std::string>> kv(std::begin(base), std::end(base));
    kv.emplace_back(c.key, c.value);
    const auto result = ParseOptions(Raw(kv));
    ASSERT_FALSE(result.ok()) << c.key << "=" << c.value;
    EXPECT_EQ(result.status().code(), TIER_INVALID_ARGUMENT);
    EXPECT_NE(result.status().message().find(c.mentions), std::string::npos)
        << result.status().message();
  }
  EXPECT_NE(ParseOptions(Raw({{"capacity_gib", "1"}})).status().message().find("'pool'"),
            std::string::npos);
  EXPECT_NE(ParseOptions(Raw({{"pool", "tier"}})).status().message().find("capacity"),
            std::string::npos);
  const auto good = ParseOptions(Raw({{"pool", "tier"},
                                      {"capacity_gib", "0.5"},
                                      {"client", "client.tier"},
                                      {"object_mib", "16"},
                                      {"compression", "zstd"}}));
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(good->client, "tier");
  EXPECT_EQ(good->client_name(), "client.tier");
  EXPECT_EQ(good->object_bytes, 16u << 20);
  EXPECT_EQ(good->capacity_bytes, 512ull << 20);
}

}  // namespace
}  // namespace tier::rados::test
