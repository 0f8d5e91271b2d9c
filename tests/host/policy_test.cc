// policy_test.cc -- HostPolicy: the victim order each policy defines, through the public API
// (LRU: recency only; GDSF: frequency x cost / size with inflation; value: its levers), and
// PolicyOrder: the formulas on hand-made entries.
#include <tier/host/identity.h>

#include "host_fixture.h"
#include "policy.h"

namespace tier::host::test {
namespace {

auto WithPolicy(Policy policy, ValueLevers levers = {}) {
  return [policy, levers](HostOptions& o) {
    o.policy = policy;
    o.value_levers = levers;
  };
}

std::vector<uint64_t> Extend(std::vector<uint64_t> blocks, uint64_t base, size_t n) {
  for (size_t i = 0; i < n; ++i) blocks.push_back(base + i);
  return blocks;
}

class HostPolicy : public HostTest {
 protected:
  // head (a shared system prefix, 4 blocks) seeds three sessions; then lone (4 blocks, more
  // recent than head's last use) is sealed. Room for everything but half a 4-block checkpoint:
  // one leaves Device when the next arrives. Returns whether head stayed and lone left.
  std::pair<bool, bool> SeedThreeThenSealALoneOne(ValueLevers levers) {
    Open("null", {}, Bytes(4) * 3 + Bytes(6) * 3 - Bytes(4) / 2, Bytes(100),
         WithPolicy(Policy::kValue, levers));
    const auto head = Blocks(1, 4);
    EXPECT_TRUE(Seal(head, 1, /*shared_prefix=*/true));
    for (uint64_t s = 0; s < 3; ++s) {
      const auto session = Extend(head, 1000 * (s + 1), 2);
      Admission seeded = AdmitAndWait(session, 3 + s);
      EXPECT_EQ(seeded.cached_tokens, 4u * 512);
      Release(seeded);
      EXPECT_TRUE(Seal(session, 3 + s));
    }
    const auto lone = Blocks(500, 4);
    EXPECT_TRUE(Seal(lone, 6));
    EXPECT_TRUE(Seal(Blocks(700, 4), 7));
    return {(PlacementsOf(head) & kD) != 0, (PlacementsOf(lone) & kD) == 0};
  }
};

TEST_F(HostPolicy, LruDemotesTheLeastRecentlyUsedWhateverItSaves) {
  const auto big = Blocks(1000, 8), small = Blocks(2000, 1), third = Blocks(3000, 1);
  // As ValueOrderPrefersCheckpointsThatSaveMorePrefillPerByte, but the big one is the oldest:
  // value keeps it (more prefill per byte), LRU lets it go.
  Open("null", {}, Bytes(8) + Bytes(1) + Bytes(1) / 2, Bytes(8) * 4, WithPolicy(Policy::kLru));
  ASSERT_TRUE(Seal(big, 1));
  ASSERT_TRUE(Seal(small, 2));
  ASSERT_TRUE(Seal(third, 3));
  EXPECT_EQ(PlacementsOf(big), kH);
  EXPECT_EQ(PlacementsOf(small), kD);
  EXPECT_EQ(PlacementsOf(third), kD);
}

TEST_F(HostPolicy, LruCountsAReuseAsRecent) {
  Open("null", {}, Bytes(1) * 5 / 2, Bytes(1) * 8, WithPolicy(Policy::kLru));
  const auto a = Blocks(10, 1), b = Blocks(20, 1), c = Blocks(30, 1);
  ASSERT_TRUE(Seal(a, 1));
  ASSERT_TRUE(Seal(b, 2));
  Admission used = AdmitAndWait(a, 3);
  ASSERT_EQ(used.outcome, Outcome::kDeviceHit);
  Release(used);
  ASSERT_TRUE(Seal(c, 4));
  EXPECT_EQ(PlacementsOf(a), kD) << "used at 3 s: more recent than b";
  EXPECT_EQ(PlacementsOf(b), kH) << "last used at 2 s: the least recent leaves first";
  EXPECT_EQ(PlacementsOf(c), kD);
}

TEST_F(HostPolicy, GdsfKeepsTheFrequentOverTheRecent) {
  // a: one block used twice (H = 3 x cost/size); b: one block, newer, never used (1 x); c: two
  // blocks (more prefill per byte than b). Room for a, b and half of c: one of them leaves.
  const auto a = Blocks(10, 1), b = Blocks(20, 1), c = Blocks(30, 2);
  Open("null", {}, Bytes(1) * 2 + Bytes(2) / 2, Bytes(1) * 8, WithPolicy(Policy::kGdsf));
  ASSERT_TRUE(Seal(a, 1));
  for (uint64_t t : {2, 3}) {
    Admission used = AdmitAndWait(a, t);
    ASSERT_EQ(used.state, AdmissionState::kReady);
    Release(used);
  }
  ASSERT_TRUE(Seal(b, 4));
  ASSERT_TRUE(Seal(c, 5));
  EXPECT_EQ(PlacementsOf(a), kD) << "LRU would demote a (last used at 3 s)";
  EXPECT_EQ(PlacementsOf(b), kH) << "the lowest frequency x cost / size";
  EXPECT_EQ(PlacementsOf(c), kD);
}

TEST_F(HostPolicy, GdsfInflationAgesAFrequentCheckpointOut) {
  // Device holds two one-block checkpoints. a is used twice; then a stream of new ones. Without
  // inflation (LFU) a would stay forever; with it, each departure raises L, and new checkpoints
  // enter at L + cost/size until they outrank a.
  Open("null", {}, Bytes(1) * 5 / 2, Bytes(1) * 3 / 2, WithPolicy(Policy::kGdsf));
  const auto a = Blocks(10, 1);
  ASSERT_TRUE(Seal(a, 1));
  for (uint64_t t : {2, 3}) {
    Admission used = AdmitAndWait(a, t);
    ASSERT_EQ(used.state, AdmissionState::kReady);
    Release(used);
  }
  uint64_t now = 4;
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(Seal(Blocks(1000 * (i + 1), 1), now++));
  EXPECT_TRUE(PlacementsOf(a) & kD) << "three newer checkpoints later (LRU: gone after two)";
  for (uint64_t i = 3; i < 10; ++i) ASSERT_TRUE(Seal(Blocks(1000 * (i + 1), 1), now++));
  EXPECT_FALSE(PlacementsOf(a) & kD) << "inflation aged it out";
}

TEST_F(HostPolicy, SupersededAncestorsLeaveBeforeALiveCheckpointOfEqualSize) {
  // One session: turn k seals T_k (2k blocks); turn k+1 resumes from it and seals T_{k+1}, which
  // supersedes T_k. u, unrelated and as large as T_5, is older and never used. Device holds
  // T_6 + u + x exactly: the superseded ancestors must make the room.
  Open("null", {}, Bytes(12) + Bytes(10) + Bytes(30) + Bytes(1) / 2, Bytes(100),
       WithPolicy(Policy::kValue));
  const auto u = Blocks(900, 10);
  ASSERT_TRUE(Seal(u, 1));
  std::vector<std::vector<uint64_t>> turns = {Blocks(100, 2)};
  ASSERT_TRUE(Seal(turns[0], 2));
  for (uint64_t k = 1; k < 6; ++k) {
    const auto next = Extend(turns.back(), 100 + 2 * k, 2);
    Admission resumed = AdmitAndWait(next, 2 + k);
    ASSERT_EQ(resumed.cached_tokens, turns.back().size() * 512) << "turn " << k + 1;
    Release(resumed);
    ASSERT_TRUE(Seal(next, 2 + k));
    turns.push_back(next);
  }
  EXPECT_EQ(host_->Stats().superseded_checkpoints, 5u);
  EXPECT_LT(host_->Stats().value_superseded_weight, 0.5)
      << "five superseded checkpoints, none reused: they keep a fraction of their value";
  ASSERT_TRUE(Seal(Blocks(5000, 30), 9));
  EXPECT_TRUE(PlacementsOf(turns[5]) & kD) << "the live descendant stays";
  EXPECT_TRUE(PlacementsOf(u) & kD) << "without the lever u (older, never used) would go first";
  for (size_t k = 0; k < 5; ++k) EXPECT_FALSE(PlacementsOf(turns[k]) & kD) << "T_" << k + 1;
}

TEST_F(HostPolicy, WithoutTheSupersededLeverTheOlderLiveCheckpointGoes) {
  ValueLevers levers;
  levers.superseded = false;
  Open("null", {}, Bytes(12) + Bytes(10) + Bytes(30) + Bytes(1) / 2, Bytes(100),
       WithPolicy(Policy::kValue, levers));
  const auto u = Blocks(900, 10);
  ASSERT_TRUE(Seal(u, 1));
  std::vector<uint64_t> turn = Blocks(100, 2);
  ASSERT_TRUE(Seal(turn, 2));
  for (uint64_t k = 1; k < 6; ++k) {
    const auto next = Extend(turn, 100 + 2 * k, 2);
    Release(AdmitAndWait(next, 2 + k));
    ASSERT_TRUE(Seal(next, 2 + k));
    turn = next;
  }
  ASSERT_TRUE(Seal(Blocks(5000, 30), 9));
  EXPECT_FALSE(PlacementsOf(u) & kD) << "the contrast to the test above: u left Device";
}

TEST_F(HostPolicy, SharedPrefixWithManySiblingsOutlivesALoneCheckpointOfEqualSize) {
  const auto [head_stayed, lone_left] = SeedThreeThenSealALoneOne({});
  EXPECT_TRUE(head_stayed) << "three siblings seeded: worth more than its bytes";
  EXPECT_TRUE(lone_left);
}

TEST_F(HostPolicy, WithoutTheSharedUseLeverTheLessRecentHeadGoes) {
  ValueLevers levers;
  levers.shared_use = false;
  const auto [head_stayed, lone_left] = SeedThreeThenSealALoneOne(levers);
  EXPECT_FALSE(head_stayed) << "the contrast to the test above: by recency alone head goes";
  EXPECT_FALSE(lone_left);
}

TEST_F(HostPolicy, ColdAdmissionDropsWhatWouldCostMoreToRestoreThanToPrefill) {
  // At 1 MB/s a one-block checkpoint (66 KB) restores in 66 ms and prefills in 1.8 ms: never
  // worth writing. It is dropped, not spilled, and nothing reaches the provider.
  Open("scripted", {}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2,
       [](HostOptions& o) { o.model_cold_read_bytes_per_second = 1e6; });
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(Seal(Blocks(100 * (i + 1), 1), i + 1));
  const HostStats s = host_->Stats();
  EXPECT_EQ(s.spills, 0u);
  EXPECT_EQ(s.cold_write_bytes, 0u);
  EXPECT_EQ(s.cold_admission_not_worth, 2u) << "the two pushed out of Host";
}

TEST_F(HostPolicy, WithoutColdAdmissionTheModelStillSkipsTheRestore) {
  ValueLevers levers;
  levers.cold_admission = false;
  Open("scripted", {}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2, [&](HostOptions& o) {
    o.model_cold_read_bytes_per_second = 1e6;
    o.value_levers = levers;
  });
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  EXPECT_GT(host_->Stats().cold_write_bytes, 0u) << "written though it never pays back";
  Admission admission = AdmitAndWait(a, 10);
  EXPECT_EQ(admission.state, AdmissionState::kRoot);
  EXPECT_EQ(admission.root_reason, RootReason::kCost) << "the model decides restore-or-root";
}

// ---- PolicyOrder on hand-made entries ----------------------------------------------------------

CheckpointEntry Entry(uint64_t prefill_ns, uint64_t bytes, uint64_t last_use_s) {
  CheckpointEntry e;
  e.prefill_saved_ns = prefill_ns;
  e.logical_bytes = bytes;
  e.last_use_ns = last_use_s * 1000000000ull;
  return e;
}

TEST(PolicyOrder, GdsfFrequencyStartsAtOneAndInflationRisesToWhatLeaves) {
  PolicyOrder gdsf(Policy::kGdsf);
  CheckpointEntry e = Entry(1000, 10, 1);
  gdsf.OnInsert(&e, 1);
  EXPECT_DOUBLE_EQ(e.gdsf_priority, 100.0) << "H = L + 1 x cost / size, L = 0";
  gdsf.OnUse(&e, 2);
  EXPECT_DOUBLE_EQ(e.gdsf_priority, 200.0) << "one reuse: frequency 2";
  gdsf.OnLeave(e);
  EXPECT_DOUBLE_EQ(gdsf.inflation(), 200.0);
  CheckpointEntry newer = Entry(1000, 10, 3);
  gdsf.OnInsert(&newer, 3);
  EXPECT_DOUBLE_EQ(newer.gdsf_priority, 300.0) << "enters at L + cost / size";
  EXPECT_DOUBLE_EQ(gdsf.Value(newer, 0), newer.gdsf_priority);
}

TEST(PolicyOrder, LruIsTheLastUseOnly) {
  PolicyOrder lru(Policy::kLru);
  CheckpointEntry cheap = Entry(1, 1000, 5), dear = Entry(1000000, 10, 4);
  EXPECT_GT(lru.Value(cheap, 10e9), lru.Value(dear, 10e9)) << "cost and size do not count";
}

TEST(PolicyOrder, SupersededWeightFollowsWhatSupersededCheckpointsDid) {
  PolicyOrder value(Policy::kValue);
  EXPECT_DOUBLE_EQ(value.SupersededWeight(), 1.0) << "no evidence: no penalty";
  // A session of 20 turns: every checkpoint reused once while live, then superseded.
  for (int k = 0; k < 20; ++k) {
    CheckpointEntry e = Entry(1000, 10, 1);
    value.OnInsert(&e, 1);
    value.OnUse(&e, 2);
    e.superseded = true;
    value.OnSuperseded(e);
  }
  const double never_back = value.SupersededWeight();
  EXPECT_LT(never_back, 0.1);
  // Branching conversations: superseded checkpoints are reused as often as live ones.
  PolicyOrder branching(Policy::kValue);
  for (int k = 0; k < 20; ++k) {
    CheckpointEntry e = Entry(1000, 10, 1);
    branching.OnInsert(&e, 1);
    branching.OnUse(&e, 2);
    e.superseded = true;
    branching.OnSuperseded(e);
    branching.OnUse(&e, 3);
  }
  EXPECT_DOUBLE_EQ(branching.SupersededWeight(), 1.0);
  CheckpointEntry sup = Entry(1000, 10, 1), live = Entry(1000, 10, 1);
  sup.superseded = true;
  EXPECT_NEAR(value.Value(sup, 1e9) / value.Value(live, 1e9), never_back, 1e-12);
}

TEST(PolicyOrder, AdaptiveAgeFollowsTheObservedReuseGaps) {
  PolicyOrder value(Policy::kValue, {}, 300);
  EXPECT_DOUBLE_EQ(value.half_life_s(), 300.0);
  for (int k = 0; k < 9; ++k) {
    CheckpointEntry e = Entry(1000, 10, 100);
    value.OnUse(&e, 1100ull * 1000000000ull);  // reused 1000 s after its last use
  }
  EXPECT_DOUBLE_EQ(value.half_life_s(), (300.0 + 9 * 1000.0) / 10);
  ValueLevers fixed;
  fixed.adaptive_age = false;
  PolicyOrder plain(Policy::kValue, fixed, 300);
  CheckpointEntry e = Entry(1000, 10, 100);
  plain.OnUse(&e, 1100ull * 1000000000ull);
  EXPECT_DOUBLE_EQ(plain.half_life_s(), 300.0);
}

TEST(PolicyOrder, NetOfRestoreValuesWhatAColdCopySavesAfterItsRead) {
  PolicyOrder value(Policy::kValue);
  const CheckpointEntry e = Entry(1000, 10, 1);
  EXPECT_DOUBLE_EQ(value.Value(e, 1e9, 400), value.Value(e, 1e9, 0) * 0.6);
  EXPECT_DOUBLE_EQ(value.Value(e, 1e9, 5000), 0.0) << "a restore dearer than the prefill";
}

TEST(PolicyOrder, ValueLeversParseAndNameThemselves) {
  auto all = ParseValueLevers("all");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(ValueLeversName(all.value()),
            "superseded,shared_use,net_of_restore,cold_admission,adaptive_age");
  auto minus = ParseValueLevers("all,-superseded");
  ASSERT_TRUE(minus.ok());
  EXPECT_FALSE(minus.value().superseded);
  EXPECT_TRUE(minus.value().shared_use);
  auto none = ParseValueLevers("none");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(ValueLeversName(none.value()), "none");
  auto bad = ParseValueLevers("all,frequency");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'frequency'"), std::string::npos);
}

}  // namespace
}  // namespace tier::host::test
