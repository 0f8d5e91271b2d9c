// RadosIntegrity: stored bytes that changed under the provider are never served. A chunk object
// that is damaged, missing, short, swapped with another of the same checkpoint or replaced by a
// chunk of another checkpoint makes the restore DATA_LOSS, and the checkpoint is then removed; a
// damaged header is DATA_LOSS at stat.
#include <gtest/gtest.h>

#include <algorithm>

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

}  // namespace
}  // namespace tier::rados::test
