// RadosIntegrity: stored bytes that changed under the provider are never served. A chunk object
// that is damaged, missing, short, swapped with another of the same checkpoint or replaced by a
// chunk of another checkpoint makes the restore DATA_LOSS, and the checkpoint is then removed; a
// damaged header is DATA_LOSS at stat; inline segments swapped or grafted and the header resealed
// are never served, and with auth_key_file nothing resealed without the secret is.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <functional>

#include "auth.h"
#include "checkpoint_bytes.h"
#include "format.h"
#include "rados_test_env.h"

namespace tier::rados::test {
namespace {

class RadosIntegrity : public ::testing::Test {
 protected:
  void SetUp() override {
    RADOS_REQUIRE_CLUSTER(cluster_);
    auto admin = Admin::Connect(cluster_);
    ASSERT_TRUE(admin.ok()) << admin.status().ToString();
    admin_ = admin.take();
    ns_ = UniqueNamespace("integrity");
    rados_ns_ = RadosNamespaceOf(ns_);
    auto p = Provider::Open(ns_, Options(cluster_));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    provider_ = p.take();
  }

  // Spills `label` (about 4 MiB in 1 MiB chunk objects) and returns its chunk object names.
  std::vector<std::string> SpillAndListChunks(Checkpoint& cp) {
    EXPECT_EQ(provider_->Spill(cp.key, cp.Segments()).status, TIER_OK);
    std::vector<std::string> chunks;
    const std::string prefix = "c." + Hex(ToKeyBytes(cp.key)) + ".";
    for (const std::string& name : admin_->List(rados_ns_)) {
      if (name.rfind(prefix, 0) == 0) chunks.push_back(name);
    }
    std::sort(chunks.begin(), chunks.end(), [](const std::string& a, const std::string& b) {
      return ParseObjectName(a).seq < ParseObjectName(b).seq;
    });
    return chunks;
  }

  static KeyBytes ToKeyBytes(const tier_key& key) {
    KeyBytes k;
    std::copy(key.bytes, key.bytes + TIER_KEY_BYTES, k.begin());
    return k;
  }

  // The restore is DATA_LOSS, and afterwards the checkpoint and its objects are gone.
  void ExpectDataLossAndRemoval(Checkpoint& cp) {
    const Done d = provider_->Restore(cp.key, cp.EmptySegments());
    EXPECT_EQ(d.status, TIER_DATA_LOSS) << tier_status_name(d.status) << ": " << d.message;
    EXPECT_EQ(provider_->Stat(cp.key).status().code(), TIER_NOT_FOUND)
        << "a damaged checkpoint is removed";
    const std::string hex = Hex(ToKeyBytes(cp.key));
    EXPECT_TRUE(Eventually(10, [&] {
      for (const std::string& name : admin_->List(rados_ns_)) {
        if (name.find(hex) != std::string::npos) return false;
      }
      return true;
    })) << "the damaged checkpoint's objects were not removed";
    const std::string metrics = provider_->metrics().ExpositionText();
    EXPECT_NE(metrics.find("tier_cold_data_loss_total{provider=\"rados\",where=\"restore\"} 1"),
              std::string::npos)
        << "the loss is counted once";
  }

  ClusterInfo cluster_;
  std::unique_ptr<Admin> admin_;
  std::unique_ptr<Provider> provider_;
  std::string ns_, rados_ns_;
};

TEST_F(RadosIntegrity, FlippedByteInAChunkIsDataLoss) {
  Checkpoint cp = MakeCheckpoint("flipped", 4000000);
  const auto chunks = SpillAndListChunks(cp);
  ASSERT_GE(chunks.size(), 3u);
  auto bytes = admin_->Read(rados_ns_, chunks[1]);
  ASSERT_TRUE(bytes.ok());
  std::string damaged = *bytes;
  damaged[damaged.size() / 2] ^= 0x01;
  ASSERT_TRUE(admin_->WriteFull(rados_ns_, chunks[1], damaged).ok());
  ExpectDataLossAndRemoval(cp);
}

TEST_F(RadosIntegrity, MissingChunkIsDataLoss) {
  Checkpoint cp = MakeCheckpoint("missing", 4000000);
  const auto chunks = SpillAndListChunks(cp);
  ASSERT_GE(chunks.size(), 3u);
  ASSERT_TRUE(admin_->Remove(rados_ns_, chunks.back()).ok());
  ExpectDataLossAndRemoval(cp);
}

TEST_F(RadosIntegrity, ShortChunkIsDataLoss) {
  Checkpoint cp = MakeCheckpoint("short", 4000000);
  const auto chunks = SpillAndListChunks(cp);
  ASSERT_GE(chunks.size(), 3u);
  ASSERT_TRUE(admin_->Truncate(rados_ns_, chunks[0], 4096).ok());
  ExpectDataLossAndRemoval(cp);
}

TEST_F(RadosIntegrity, SwappedChunksAreDataLoss) {
  // Segments of 3 MB: their first two chunks are full 1 MiB chunks of one segment.
  Checkpoint cp = MakeCheckpoint("swapped", 12000000);
  const auto chunks = SpillAndListChunks(cp);
  ASSERT_GE(chunks.size(), 3u);
  // Two full chunks of one segment: their bytes are valid, only their places differ.
  auto first = admin_->Read(rados_ns_, chunks[0]);
  auto second = admin_->Read(rados_ns_, chunks[1]);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_EQ(first->size(), second->size());
  ASSERT_TRUE(admin_->WriteFull(rados_ns_, chunks[0], *second).ok());
  ASSERT_TRUE(admin_->WriteFull(rados_ns_, chunks[1], *first).ok());
  ExpectDataLossAndRemoval(cp);
}

TEST_F(RadosIntegrity, ChunkOfAnotherCheckpointIsDataLoss) {
  Checkpoint victim = MakeCheckpoint("victim", 4000000);
  Checkpoint donor = MakeCheckpoint("donor", 4000000);
  const auto victim_chunks = SpillAndListChunks(victim);
  const auto donor_chunks = SpillAndListChunks(donor);
  ASSERT_GE(victim_chunks.size(), 3u);
  ASSERT_EQ(victim_chunks.size(), donor_chunks.size());
  auto bytes = admin_->Read(rados_ns_, donor_chunks[2]);
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(admin_->WriteFull(rados_ns_, victim_chunks[2], *bytes).ok());
  ExpectDataLossAndRemoval(victim);
  ASSERT_EQ(provider_->Restore(donor.key, donor.EmptySegments()).status, TIER_OK);
  EXPECT_TRUE(donor.Matches()) << "the donor is untouched";
}

TEST_F(RadosIntegrity, DamagedHeaderIsDataLossAtStat) {
  Checkpoint cp = MakeCheckpoint("bad-header", 2000000);
  ASSERT_EQ(provider_->Spill(cp.key, cp.Segments()).status, TIER_OK);
  const std::string header = HeaderName(ToKeyBytes(cp.key));
  auto bytes = admin_->Read(rados_ns_, header);
  ASSERT_TRUE(bytes.ok());
  std::string damaged = *bytes;
  damaged[damaged.size() - 1] ^= 0x40;
  ASSERT_TRUE(admin_->WriteFull(rados_ns_, header, damaged).ok());
  EXPECT_EQ(provider_->Stat(cp.key).status().code(), TIER_DATA_LOSS);
  auto plan = provider_->Plan(cp.key, 3600ull * 1'000'000'000ull);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->decision, TIER_DECISION_SKIP_TO_ROOT);
  EXPECT_EQ(plan->reason, TIER_REASON_CORRUPT);
  EXPECT_TRUE(provider_->Remove(cp.key).ok()) << "a damaged header can still be removed";
  EXPECT_EQ(provider_->Stat(cp.key).status().code(), TIER_NOT_FOUND);
}

// A checkpoint with two inline segments of one length (a StateImage part and the hidden state, as
// a profile has them), next to chunked KV and the manifest.
Checkpoint TwinInlineCheckpoint(const std::string& label) {
  Checkpoint c = MakeCheckpoint(label, 2000000);
  c.layout.clear();
  c.buffers.clear();
  c.layout = {{TIER_SEGMENT_MAIN_KV, 0, 1500000},
              {TIER_SEGMENT_STATE_IMAGE, 0, 10240},
              {TIER_SEGMENT_HIDDEN_STATE, 0, 10240},
              {TIER_SEGMENT_MANIFEST, 0, 300}};
  for (const auto& s : c.layout) {
    c.buffers.emplace_back(s.length_bytes);
    sim::FillSegmentBytes(c.content, s.kind, s.index, c.buffers.back());
  }
  return c;
}

// Rewrites h.<key> the way an attacker with pool write access would: the header's tables are
// read (`reader` only parses them: the attacker knows the layout), `edit` changes them, and
// `forger` re-encodes and reseals the result.
void Reseal(Admin& admin, const std::string& rados_ns, const tier_key& key, const Sealer& reader,
            const Sealer& forger, const std::function<void(Header&)>& edit) {
  KeyBytes k;
  std::copy(key.bytes, key.bytes + TIER_KEY_BYTES, k.begin());
  auto bytes = admin.Read(rados_ns, HeaderName(k));
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  Header h;
  std::string why;
  const std::span<const uint8_t> content(reinterpret_cast<const uint8_t*>(bytes->data()),
                                         bytes->size());
  ASSERT_TRUE(ParseHeader(content, reader, &h, &why)) << why;
  edit(h);
  const std::vector<uint8_t> forged = EncodeHeader(h, forger);
  ASSERT_TRUE(
      admin
          .WriteFull(rados_ns, HeaderName(k),
                     std::string(reinterpret_cast<const char*>(forged.data()), forged.size()))
          .ok());
}

// Swaps the bytes of the header's first two inline segments of equal length.
void SwapTwinInline(Header& h) {
  SegmentRecord* a = nullptr;
  SegmentRecord* b = nullptr;
  for (SegmentRecord& s : h.segments) {
    if (s.storage != kStorageInline || s.kind == TIER_SEGMENT_MANIFEST) continue;
    (a == nullptr ? a : b) = &s;
  }
  ASSERT_TRUE(a != nullptr && b != nullptr && a->logical_bytes == b->logical_bytes);
  std::swap_ranges(h.inline_bytes.begin() + a->inline_offset,
                   h.inline_bytes.begin() + a->inline_offset + a->logical_bytes,
                   h.inline_bytes.begin() + b->inline_offset);
  std::swap(a->tag, b->tag);
}

// What a tampered header may give another server of the fleet (one that reads it from the pool,
// not from the cache of its own spill): a refusal or a restore that fails, never OK bytes.
void ExpectNeverServed(const std::string& ns, const ProviderOptions& options, Checkpoint& cp) {
  auto peer = Provider::Open(ns, options);
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  Provider& provider = **peer;
  const Done d = provider.Restore(cp.key, cp.EmptySegments());
  EXPECT_NE(d.status, TIER_OK) << "a tampered header was served (" << d.message << "); bytes "
                               << (cp.Matches() ? "happen to match" : "are wrong");
  EXPECT_TRUE(d.status == TIER_DATA_LOSS || d.status == TIER_NOT_FOUND)
      << tier_status_name(d.status) << ": " << d.message;
  EXPECT_NE(provider.Stat(cp.key).status().code(), TIER_OK);
}

// Issue 26, 1: the two inline segments of one header swapped, the header resealed (XXH3, what
// anyone can recompute): the inline tags bind each segment to its place, so it is refused.
TEST_F(RadosIntegrity, InlineSegmentsSwappedAndResealedAreNeverServed) {
  Checkpoint cp = TwinInlineCheckpoint("inline-swap");
  ASSERT_EQ(provider_->Spill(cp.key, cp.Segments()).status, TIER_OK);
  Reseal(*admin_, rados_ns_, cp.key, Sealer(), Sealer(), SwapTwinInline);
  ExpectNeverServed(ns_, Options(cluster_), cp);
}

// Issue 26, 1: another checkpoint's hidden state (same length) copied in, the header resealed.
TEST_F(RadosIntegrity, InlineSegmentGraftedFromAnotherCheckpointAndResealedIsNeverServed) {
  Checkpoint victim = TwinInlineCheckpoint("inline-victim");
  Checkpoint donor = TwinInlineCheckpoint("inline-donor");
  ASSERT_EQ(provider_->Spill(victim.key, victim.Segments()).status, TIER_OK);
  ASSERT_EQ(provider_->Spill(donor.key, donor.Segments()).status, TIER_OK);
  KeyBytes dk;
  std::copy(donor.key.bytes, donor.key.bytes + TIER_KEY_BYTES, dk.begin());
  auto donor_bytes = admin_->Read(rados_ns_, HeaderName(dk));
  ASSERT_TRUE(donor_bytes.ok());
  Header donor_header;
  std::string why;
  ASSERT_TRUE(
      ParseHeader({reinterpret_cast<const uint8_t*>(donor_bytes->data()), donor_bytes->size()},
                  Sealer(), &donor_header, &why))
      << why;
  Reseal(*admin_, rados_ns_, victim.key, Sealer(), Sealer(), [&](Header& h) {
    for (size_t i = 0; i < h.segments.size(); ++i) {
      SegmentRecord& s = h.segments[i];
      if (s.kind != TIER_SEGMENT_HIDDEN_STATE) continue;
      const SegmentRecord& d = donor_header.segments[i];
      std::copy(donor_header.inline_bytes.begin() + d.inline_offset,
                donor_header.inline_bytes.begin() + d.inline_offset + d.logical_bytes,
                h.inline_bytes.begin() + s.inline_offset);
      s.tag = d.tag;
    }
  });
  ExpectNeverServed(ns_, Options(cluster_), victim);
  ASSERT_EQ(provider_->Restore(donor.key, donor.EmptySegments()).status, TIER_OK);
  EXPECT_TRUE(donor.Matches()) << "the donor is untouched";
}

// Issue 26, 1: with auth_key_file, an attacker who recomputes every tag and the seal -- without
// the secret, with none or with a guess -- gets neither a swap nor a rewritten manifest served.
TEST_F(RadosIntegrity, KeyedCheckpointsResealedWithoutTheSecretAreNeverServed) {
  ::tier::test::ScopedTempDir dir;
  const std::string key_file = dir.path() + "/fleet.key";
  std::ofstream(key_file) << "a fleet secret the pool never sees\n";
  ASSERT_EQ(::chmod(key_file.c_str(), 0600), 0);
  const std::string ns = UniqueNamespace("integrity-keyed");
  const ProviderOptions options = Options(cluster_, {{"auth_key_file", key_file}});
  auto keyed = Provider::Open(ns, options);
  ASSERT_TRUE(keyed.ok()) << keyed.status().ToString();
  auto secret = Sealer::FromKeyFile(key_file);
  ASSERT_TRUE(secret.ok());
  const std::string keyed_ns = NamespaceTag("", ns, secret->key_id());
  const uint8_t guess[] = "a guess at the fleet's secret...";
  const Sealer guessed = Sealer::FromSecret({guess, 32});
  int round = 0;
  for (const Sealer* forger : {static_cast<const Sealer*>(nullptr), &guessed}) {
    const Sealer none;
    const Sealer& f = forger == nullptr ? none : *forger;
    Checkpoint cp = TwinInlineCheckpoint("keyed-" + std::to_string(round++));
    ASSERT_EQ((*keyed)->Spill(cp.key, cp.Segments()).status, TIER_OK);
    Reseal(*admin_, keyed_ns, cp.key, *secret, f, [&](Header& h) {
      SwapTwinInline(h);
      for (SegmentRecord& s : h.segments) {
        if (s.storage != kStorageInline) continue;
        s.tag = PieceTag(f, InlineBinding(h, s),
                         {h.inline_bytes.data() + s.inline_offset, s.logical_bytes});
      }
    });
    ExpectNeverServed(ns, options, cp);
  }
  // The keyed fleet's objects live in a namespace of their own: a server without the key (or
  // with another) never reads them.
  EXPECT_FALSE(admin_->List(keyed_ns).empty());
  EXPECT_TRUE(admin_->List(NamespaceTag("", ns)).empty());
}

}  // namespace
}  // namespace tier::rados::test
