// RadosFormat and RadosOptions: the object layout and the option parser, pure functions (no
// cluster needed).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "auth.h"
#include "codec.h"
#include "format.h"
#include "options.h"
#include "test_support.h"

namespace tier::rados::test {
namespace {

const uint8_t kSecret[] = "a fleet secret of 32 bytes......";

Sealer Keyed() {
  return Sealer::FromSecret({kSecret, 32});
}

Tag TagOf(uint8_t fill) {
  Tag t;
  t.fill(fill);
  return t;
}

// Two chunked segments and three inline ones, two of which have the same length (a StateImage
// part and the hidden state, say): the inline tags are computed for `sealer`.
Header SampleHeader(const Sealer& sealer) {
  Header h;
  h.spill_id = 0x1122334455667788ull;
  for (size_t i = 0; i < h.key.size(); ++i) h.key[i] = static_cast<uint8_t>(i * 7);
  h.prefix = "fleet-a";
  h.namespace_id = "qwen3.8-27b/int8";
  h.created_unix_ns = 1700000000123456789ull;
  h.object_bytes = 1u << 20;
  SegmentRecord kv{TIER_SEGMENT_MAIN_KV, 0, (3u << 20) + 5, kStorageChunks, 0, 4, 0, {}};
  SegmentRecord state{TIER_SEGMENT_STATE_IMAGE, 0, 4, kStorageInline, 0, 0, 0, {}};
  SegmentRecord hidden{TIER_SEGMENT_HIDDEN_STATE, 0, 4, kStorageInline, 0, 0, 4, {}};
  SegmentRecord manifest{TIER_SEGMENT_MANIFEST, 0, 3, kStorageInline, 0, 0, 8, {}};
  h.segments = {kv, state, hidden, manifest};
  for (uint32_t c = 0; c < 4; ++c) {
    const uint32_t len = c < 3 ? (1u << 20) : 5;
    h.chunks.push_back({len, len, kCodecRaw, TagOf(static_cast<uint8_t>(c + 1))});
  }
  h.inline_bytes = {'s', 't', 'a', 't', 'h', 'i', 'd', 'n', 'a', 'b', 'c'};
  for (SegmentRecord& s : h.segments) {
    if (s.storage != kStorageInline) continue;
    s.tag = PieceTag(sealer, InlineBinding(h, s),
                     {h.inline_bytes.data() + s.inline_offset, s.logical_bytes});
  }
  h.logical_bytes = kv.logical_bytes + 11;
  h.stored_bytes = 42;
  return h;
}

TEST(RadosFormat, HeaderRoundTripsAndEveryFlippedByteIsRefused) {
  for (const Sealer& sealer : {Sealer(), Keyed()}) {
    SCOPED_TRACE(sealer.keyed() ? "keyed" : "unkeyed");
    const Header h = SampleHeader(sealer);
    const std::vector<uint8_t> bytes = EncodeHeader(h, sealer);
    Header parsed;
    std::string why;
    ASSERT_TRUE(ParseHeader(bytes, sealer, &parsed, &why)) << why;
    EXPECT_EQ(parsed.spill_id, h.spill_id);
    EXPECT_EQ(parsed.key, h.key);
    EXPECT_EQ(parsed.prefix, h.prefix);
    EXPECT_EQ(parsed.namespace_id, h.namespace_id);
    EXPECT_EQ(parsed.chunks.size(), 4u);
    EXPECT_EQ(parsed.chunks[3].tag, TagOf(4));
    EXPECT_EQ(parsed.inline_bytes, h.inline_bytes);
    for (size_t i = 0; i < bytes.size(); ++i) {
      std::vector<uint8_t> damaged = bytes;
      damaged[i] ^= 0x10;
      EXPECT_FALSE(ParseHeader(damaged, sealer, &parsed, &why)) << "byte " << i << " flipped";
    }
    std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 1);
    EXPECT_FALSE(ParseHeader(cut, sealer, &parsed, &why));
  }
}

// Issue 26: an attacker who swaps two equal-length inline segments, or copies in another
// checkpoint's, and then reseals the header, must not get the header accepted.
TEST(RadosFormat, InlineSegmentsSwappedOrGraftedAndResealedAreRefused) {
  const Sealer unkeyed;
  Header h = SampleHeader(unkeyed);
  std::string why;
  Header parsed;
  // Swap: the StateImage part and the hidden state trade their bytes (and their tags).
  Header swapped = h;
  std::swap_ranges(swapped.inline_bytes.begin(), swapped.inline_bytes.begin() + 4,
                   swapped.inline_bytes.begin() + 4);
  std::swap(swapped.segments[1].tag, swapped.segments[2].tag);
  EXPECT_FALSE(ParseHeader(EncodeHeader(swapped, unkeyed), unkeyed, &parsed, &why));
  EXPECT_NE(why.find("inline segment"), std::string::npos) << why;
  // Graft: the hidden state (bytes and tag) of another checkpoint, another key and spill.
  Header other = h;
  other.key[0] ^= 1;
  other.spill_id += 1;
  other.inline_bytes = {'S', 'T', 'A', 'T', 'H', 'I', 'D', 'N', 'a', 'b', 'c'};
  other = [&] {
    Header o = other;
    for (SegmentRecord& s : o.segments) {
      if (s.storage == kStorageInline) {
        s.tag = PieceTag(unkeyed, InlineBinding(o, s),
                         {o.inline_bytes.data() + s.inline_offset, s.logical_bytes});
      }
    }
    return o;
  }();
  Header grafted = h;
  std::copy(other.inline_bytes.begin() + 4, other.inline_bytes.begin() + 8,
            grafted.inline_bytes.begin() + 4);
  grafted.segments[2].tag = other.segments[2].tag;
  EXPECT_FALSE(ParseHeader(EncodeHeader(grafted, unkeyed), unkeyed, &parsed, &why));
  EXPECT_NE(why.find("fails its tag"), std::string::npos) << why;
  // Keyed: whatever an attacker recomputes without the secret (every tag, then the seal, with
  // another secret or none) is refused.
  const Sealer keyed = Keyed();
  const uint8_t guess[] = "another secret of 32 bytes......";
  const Sealer attacker = Sealer::FromSecret({guess, 32});
  for (const Sealer* forger : {&unkeyed, &attacker}) {
    Header forged = SampleHeader(*forger);
    std::swap_ranges(forged.inline_bytes.begin(), forged.inline_bytes.begin() + 4,
                     forged.inline_bytes.begin() + 4);
    forged = [&] {
      Header o = forged;
      for (SegmentRecord& s : o.segments) {
        if (s.storage == kStorageInline) {
          s.tag = PieceTag(*forger, InlineBinding(o, s),
                           {o.inline_bytes.data() + s.inline_offset, s.logical_bytes});
        }
      }
      return o;
    }();
    ASSERT_TRUE(ParseHeader(EncodeHeader(forged, *forger), *forger, &parsed, &why)) << why;
    EXPECT_FALSE(ParseHeader(EncodeHeader(forged, *forger), keyed, &parsed, &why));
  }
}

TEST(RadosFormat, PieceTagBindsThePieceToItsPlaceAndItsKey) {
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
  const uint8_t other_secret[] = "another secret of 32 bytes......";
  for (const Sealer& sealer : {Sealer(), Keyed()}) {
    SCOPED_TRACE(sealer.keyed() ? "keyed" : "unkeyed");
    const Tag tag = PieceTag(sealer, b, data);
    auto differs = [&](auto mutate) {
      ChunkBinding other = b;
      mutate(other);
      return PieceTag(sealer, other, data) != tag;
    };
    EXPECT_TRUE(differs([](ChunkBinding& o) { o.spill_id = 10; }));
    EXPECT_TRUE(differs([](ChunkBinding& o) { o.index = 3; }));
    EXPECT_TRUE(differs([](ChunkBinding& o) { o.chunk_index = 0; }));
    EXPECT_TRUE(differs([](ChunkBinding& o) { o.seq = 4; }));
    EXPECT_TRUE(differs([](ChunkBinding& o) { o.key[31] ^= 1; }));
    EXPECT_TRUE(differs([](ChunkBinding& o) { o.seq = kInlineSeq; }));
    const uint8_t other_data[4] = {1, 2, 3, 5};
    EXPECT_NE(PieceTag(sealer, b, other_data), tag);
    EXPECT_NE(PieceTag(Sealer::FromSecret({other_secret, 32}), b, data), tag);
    uint8_t encoded[kChunkHeaderBytes];
    b.tag = tag;
    EncodeChunkHeader(b, encoded);
    ChunkBinding parsed;
    ASSERT_TRUE(ParseChunkHeader(encoded, &parsed));
    EXPECT_TRUE(SameBinding(parsed, b));
  }
}

TEST(RadosFormat, AuthKeyFileIsTheOwnersOnlyAndNamesItsNamespace) {
  ::tier::test::ScopedTempDir dir;
  const std::string path = dir.path() + "/key";
  auto write = [&](const std::string& text, mode_t mode) {
    std::ofstream(path, std::ios::trunc) << text;
    ::chmod(path.c_str(), mode);
  };
  write("0123456789abcdef0123456789abcdef\n", 0600);
  auto with_newline = Sealer::FromKeyFile(path);
  ASSERT_TRUE(with_newline.ok()) << with_newline.status().ToString();
  write("0123456789abcdef0123456789abcdef", 0600);
  auto without = Sealer::FromKeyFile(path);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(with_newline->key_id(), without->key_id()) << "a trailing newline is not the key";
  EXPECT_EQ(without->key_id().size(), 32u);
  write("0123456789abcdef0123456789abcdeF", 0600);
  EXPECT_NE(Sealer::FromKeyFile(path)->key_id(), without->key_id());
  write("0123456789abcdef0123456789abcdef", 0640);
  auto shared = Sealer::FromKeyFile(path);
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(shared.status().message().find("chmod 600"), std::string::npos);
  write("short", 0600);
  EXPECT_FALSE(Sealer::FromKeyFile(path).ok());
  ASSERT_EQ(::symlink(path.c_str(), (dir.path() + "/link").c_str()), 0);
  EXPECT_FALSE(Sealer::FromKeyFile(dir.path() + "/link").ok()) << "never through a link";
  EXPECT_FALSE(Sealer::FromKeyFile(dir.path() + "/absent").ok());
  // Instances that cannot read each other's seals never share a RADOS namespace.
  EXPECT_NE(NamespaceTag("", "m", without->key_id()), NamespaceTag("", "m", ""));
  EXPECT_NE(NamespaceTag("", "m", without->key_id()), NamespaceTag("", "m", Keyed().key_id()));
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
      {"fleet_budget_bytes", "0", "fleet_budget_bytes"},
      {"fleet_budget_gib", "-1", "fleet_budget_gib"},
      {"fleet_lease_s", "2", "fleet_lease_s"},
      {"colour", "blue", "unknown option 'colour'"},
      {"capacity_bytes", "5", "capacity_gib"},
      {"auth_key_file", "", "auth_key_file"},
      {"admin_socket", "", "admin_socket"},
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
