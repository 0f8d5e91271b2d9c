// planner_test.cc -- Planner: degradation order, pins, failed spills, cost decisions, shared
// prefixes through Cold, stale plans, corrupt restores, re-adoption, no provider I/O in decode.
#include <algorithm>

#include "planner_fixture.h"
#include "replay.h"
#include "workload.h"

namespace tier::test {
namespace {

constexpr uint8_t kD = kDevice, kH = kHost, kC = kCold;

TEST_F(PlannerTest, DegradationIsMonotonicAndFollowsRecency) {
  Build("scripted", {}, Bytes(1) * 5 / 2, Bytes(1) * 5 / 2);
  std::vector<std::vector<uint64_t>> cps;
  for (uint64_t i = 0; i < 6; ++i) {
    cps.push_back(Blocks(100 * (i + 1), 1));
    ASSERT_NE(Seal(cps.back(), i + 1), nullptr);
  }
  // Newest two on Device, the next two in Host, the oldest two in Cold: one order for all tiers.
  EXPECT_EQ(PlacementsOf(cps[5]), kD);
  EXPECT_EQ(PlacementsOf(cps[4]), kD);
  EXPECT_EQ(PlacementsOf(cps[3]), kH);
  EXPECT_EQ(PlacementsOf(cps[2]), kH);
  EXPECT_EQ(PlacementsOf(cps[1]), kC);
  EXPECT_EQ(PlacementsOf(cps[0]), kC);
  // Every move was one step down: Device -> Host -> Cold, never back up, nothing dropped.
  EXPECT_EQ(Counter(R"(tier_transitions_total{from="none",to="device"})"), 6);
  EXPECT_EQ(Counter(R"(tier_transitions_total{from="device",to="host"})"), 4);
  EXPECT_EQ(Counter(R"(tier_transitions_total{from="host",to="cold"})"), 2);
  EXPECT_EQ(Counter(R"(tier_transitions_total{from="cold",to="host"})"), 0)
      << "never back up (every pair exists from the start, at zero)";
  EXPECT_EQ(planner_->totals().evictions, 0u);
  EXPECT_EQ(Counter(R"(tier_catalog_entries{tier="cold"})"), 2);
}

TEST_F(PlannerTest, ValueOrderPrefersCheckpointsThatSaveMorePrefillPerByte) {
  const auto big = Blocks(1000, 8), small = Blocks(2000, 1), third = Blocks(3000, 1);
  // Room for big + small; the third forces one demotion. Same age: value per byte decides.
  Build("scripted", {}, Bytes(8) + Bytes(1) + Bytes(1) / 2, Bytes(8) * 4);
  ASSERT_NE(Seal(big, 1), nullptr);
  ASSERT_NE(Seal(small, 1), nullptr);
  ASSERT_GT(planner_->Value(*Find(big), 1000000000ull),
            planner_->Value(*Find(small), 1000000000ull))
      << "attention is quadratic: a long prefix saves more prefill per byte";
  ASSERT_NE(Seal(third, 1), nullptr);
  EXPECT_EQ(PlacementsOf(big), kD);
  EXPECT_EQ(PlacementsOf(small), kH);
  EXPECT_EQ(PlacementsOf(third), kD);
}

TEST_F(PlannerTest, PinnedCheckpointIsNeverDropped) {
  // No cold tier: pressure can only drop.
  Build("null", {}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto pinned = Blocks(10, 1);
  ASSERT_NE(Seal(pinned, 1), nullptr);
  AdmissionResult admission = planner_->Admit(pinned, 2000000000ull);
  ASSERT_EQ(admission.outcome, Outcome::kDeviceHit);
  ASSERT_NE(admission.entry, nullptr);
  for (uint64_t i = 0; i < 5; ++i) Seal(Blocks(100 + 10 * i, 1), 10 + i);
  // The pinned checkpoint is the oldest and least valuable, yet it is still whole on Device.
  EXPECT_EQ(PlacementsOf(pinned), kD);
  EXPECT_GT(planner_->totals().evictions, 0u) << "the pressure was real";
  planner_->Release(admission.entry);
  for (uint64_t i = 0; i < 3; ++i) Seal(Blocks(500 + 10 * i, 1), 100 + i);
  EXPECT_EQ(PlacementsOf(pinned), 0) << "once released it degrades like any other";
}

TEST_F(PlannerTest, FailedSpillKeepsTheHostCopy) {
  Build("scripted", {{"spill_result", "io_error"}}, Bytes(1) * 3 / 2, Bytes(1) * 5 / 2);
  const auto a = Blocks(10, 1), b = Blocks(20, 1), c = Blocks(30, 1), d = Blocks(40, 1);
  Seal(a, 1);
  Seal(b, 2);  // a -> Host
  Seal(c, 3);  // b -> Host
  Seal(d, 4);  // c -> Host: Host must free a slot; a's spill fails
  EXPECT_EQ(planner_->totals().spill_failures, 2u) << "a and b both tried";
  EXPECT_EQ(Counter(R"(tier_spill_failures_total{action="kept_host"})"), 2);
  // One had to go for c to fit: the least valuable (a), counted as dropped after a failed spill.
  EXPECT_EQ(Counter(R"(tier_spill_failures_total{action="dropped"})"), 1);
  EXPECT_EQ(PlacementsOf(a), 0);
  EXPECT_EQ(PlacementsOf(b), kH) << "its spill failed: the Host copy is kept, not lost";
  EXPECT_EQ(PlacementsOf(c), kH);
  EXPECT_EQ(planner_->catalog().entries_in(kCold), 0u) << "nothing partial became visible";
  // The kept copy is intact: it restores to Device byte-exact.
  AdmissionResult admission = planner_->Admit(b, 5000000000ull);
  EXPECT_EQ(admission.outcome, Outcome::kHostRestore);
  EXPECT_EQ(planner_->totals().mismatched_restores, 0u);
  planner_->Release(admission.entry);
}

TEST_F(PlannerTest, SkipsToRootWhenRestoringCostsAtLeastThePrefill) {
  Build("scripted", {{"restore_ns_per_byte", "1000000"}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  AdmissionResult admission = planner_->Admit(a, 10000000000ull);
  EXPECT_EQ(admission.outcome, Outcome::kRootPrefill);
  EXPECT_EQ(admission.root_reason, RootReason::kCost);
  EXPECT_EQ(admission.entry, nullptr);
  EXPECT_EQ(Counter(R"(tier_root_prefills_total{reason="cost"})"), 1);
  EXPECT_EQ(PlacementsOf(a), kC) << "skipping is not dropping";
}

TEST_F(PlannerTest, ColdRestoreIsVerifiedAndClimbsToDevice) {
  Build("scripted", {}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  AdmissionResult admission = planner_->Admit(a, 10000000000ull);
  ASSERT_EQ(admission.outcome, Outcome::kColdRestore);
  EXPECT_EQ(admission.cached_tokens, 512u);
  EXPECT_GT(admission.admission_ns, 0u);
  EXPECT_EQ(PlacementsOf(a), kD | kH | kC) << "Cold -> Host -> Device; the cold copy stays valid";
  EXPECT_GE(planner_->totals().verified_restores, 2u)
      << "verified after Cold->Host and Host->Device";
  EXPECT_EQ(planner_->totals().mismatched_restores, 0u);
  planner_->Release(admission.entry);
}

TEST_F(PlannerTest, WrongBytesFromTheProviderAreNeverServed) {
  Build("scripted", {{"flip_restored_byte", "1"}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  AdmissionResult admission = planner_->Admit(a, 10000000000ull);
  EXPECT_EQ(admission.outcome, Outcome::kRootPrefill);
  EXPECT_EQ(admission.root_reason, RootReason::kCorrupt);
  EXPECT_EQ(planner_->totals().mismatched_restores, 1u);
  EXPECT_EQ(Counter(R"(tier_restore_verifications_total{result="mismatch"})"), 1);
}

TEST_F(PlannerTest, DataLossDropsTheColdPlacement) {
  Build("scripted", {{"restore_result", "data_loss"}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  AdmissionResult admission = planner_->Admit(a, 10000000000ull);
  EXPECT_EQ(admission.outcome, Outcome::kRootPrefill);
  EXPECT_EQ(admission.root_reason, RootReason::kCorrupt);
  EXPECT_EQ(Find(a), nullptr) << "a corrupt cold copy that was the last copy leaves the catalog";
}

TEST_F(PlannerTest, StalePlanFallsBackToTheRoot) {
  Build("scripted", {}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  int hook_runs = 0;
  planner_->after_plan_hook = [&](CheckpointEntry* entry) {
    ++hook_runs;
    // The catalog changes under the plan: the checkpoint is evicted and published again.
    const tier_key key = entry->key;
    ASSERT_TRUE(planner_->Evict(key));
    ASSERT_NE(Seal(a, 6), nullptr);
  };
  AdmissionResult admission = planner_->Admit(a, 10000000000ull);
  EXPECT_EQ(hook_runs, 1);
  EXPECT_EQ(admission.outcome, Outcome::kRootPrefill);
  EXPECT_EQ(admission.root_reason, RootReason::kStalePlan);
  EXPECT_EQ(Counter(R"(tier_root_prefills_total{reason="stale_plan"})"), 1);
  planner_->after_plan_hook = nullptr;
  // The catalog is consistent afterwards: the re-published checkpoint is a Device hit.
  AdmissionResult again = planner_->Admit(a, 11000000000ull);
  EXPECT_EQ(again.outcome, Outcome::kDeviceHit);
  planner_->Release(again.entry);
}

TEST_F(PlannerTest, SharedPrefixRoundTripsThroughColdAndSeedsSessions) {
  Build("scripted", {}, Bytes(6) * 3 / 2, Bytes(6) * 3 / 2);
  const auto system_head = Blocks(1, 4);
  ASSERT_NE(planner_->Seal(system_head, 4 * 512, true, 1000000000ull), nullptr);
  for (uint64_t i = 0; i < 4; ++i) Seal(Blocks(1000 * (i + 1), 6), 2 + i);
  ASSERT_EQ(PlacementsOf(system_head), kC) << "pushed all the way down";
  for (uint64_t session = 0; session < 3; ++session) {
    std::vector<uint64_t> request = system_head;
    request.push_back(50000 + session);  // each sibling's own continuation
    AdmissionResult admission = planner_->Admit(request, (10 + session) * 1000000000ull);
    ASSERT_NE(admission.entry, nullptr) << "session " << session;
    EXPECT_EQ(admission.cached_tokens, 4u * 512) << "seeded by the shared prefix";
    EXPECT_EQ(admission.outcome, session == 0 ? Outcome::kColdRestore : Outcome::kDeviceHit);
    planner_->Release(admission.entry);
  }
  EXPECT_EQ(planner_->totals().mismatched_restores, 0u);
  EXPECT_TRUE(Find(system_head)->shared_prefix);
}

TEST_F(PlannerTest, LongestExactPrefixWinsAndSiblingsNeverAnswer) {
  Build("scripted", {}, Bytes(4) * 8, Bytes(4) * 8);
  Seal({1, 2}, 1);
  Seal({1, 2, 3, 4}, 2);
  Seal({1, 2, 9}, 3);  // a sibling branch
  AdmissionResult a = planner_->Admit(std::vector<uint64_t>{1, 2, 3, 4, 5}, 4000000000ull);
  EXPECT_EQ(a.cached_tokens, 4u * 512);
  planner_->Release(a.entry);
  AdmissionResult b = planner_->Admit(std::vector<uint64_t>{1, 2, 3, 7}, 5000000000ull);
  EXPECT_EQ(b.cached_tokens, 2u * 512) << "{1,2,3,4} and {1,2,9} are not prefixes of {1,2,3,7}";
  planner_->Release(b.entry);
  AdmissionResult c = planner_->Admit(std::vector<uint64_t>{7, 1, 2}, 6000000000ull);
  EXPECT_EQ(c.outcome, Outcome::kRootPrefill);
  EXPECT_EQ(c.root_reason, RootReason::kNoCheckpoint);
}

TEST_F(PlannerTest, RestartReadoptsColdCheckpoints) {
  Build("scripted", {}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  // A new planner (a restarted server) over the same provider instance.
  PlannerConfig config = planner_->config();
  planner_ = std::make_unique<Planner>(config, cost_, device_.get(), cold_.get(), &metrics_);
  ASSERT_TRUE(planner_->Start().ok());
  EXPECT_EQ(planner_->totals().readopted, 2u);
  EXPECT_EQ(PlacementsOf(a), kC);
  AdmissionResult admission = planner_->Admit(a, 10000000000ull);
  EXPECT_EQ(admission.outcome, Outcome::kColdRestore);
  EXPECT_EQ(planner_->totals().readopted_hits, 1u);
  planner_->Release(admission.entry);
}

TEST_F(PlannerTest, NoProviderIoWhileRequestsDecode) {
  Build("scripted", {}, Bytes(160) * 2, Bytes(160) * 3);
  AgentsWorkloadOptions options;
  options.sessions = 6;
  options.min_history_tokens = 60000;
  options.max_history_tokens = 80000;
  Workload workload = GenerateAgentsWorkload(options);
  ReplayOptions replay;
  replay.progress = false;
  ReplayReport report = RunReplay(workload, *planner_, cost_, &metrics_, cold_.get(), replay);
  EXPECT_GT(report.cold_restores, 0u) << "the workload exercised the cold tier";
  EXPECT_GT(cold_->calls_in(IoPhase::kAdmission), 0u);
  EXPECT_GT(cold_->calls_in(IoPhase::kPressure), 0u);
  EXPECT_EQ(cold_->calls_in(IoPhase::kIdle), 0u) << "provider I/O outside admission and pressure";
  EXPECT_EQ(report.provider_calls_outside_admission, 0u);
  EXPECT_TRUE(report.restore_exact);
  EXPECT_EQ(report.requests, workload.requests.size());
  EXPECT_EQ(report.device_hits + report.host_restores + report.cold_restores + report.root_prefills,
            report.requests);
}

}  // namespace
}  // namespace tier::test
