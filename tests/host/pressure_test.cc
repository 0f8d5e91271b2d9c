// pressure_test.cc -- HostPressure: one value order across Device, Host and Cold; monotonic
// degradation; pins; failed spills; cost decisions; shared prefixes through Cold; exact identity;
// re-adoption; no provider I/O while requests decode.
#include <algorithm>

#include "host_fixture.h"
#include "replay.h"
#include "workload.h"

namespace tier::host::test {
namespace {

using HostPressure = HostTest;

TEST_F(HostPressure, DegradationIsMonotonicAndFollowsRecency) {
  Open("scripted", {}, Bytes(1) * 5 / 2, Bytes(1) * 5 / 2);
  std::vector<std::vector<uint64_t>> cps;
  for (uint64_t i = 0; i < 6; ++i) {
    cps.push_back(Blocks(100 * (i + 1), 1));
    ASSERT_TRUE(Seal(cps.back(), i + 1));
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
  EXPECT_EQ(host_->Stats().evictions, 0u);
  EXPECT_EQ(Counter(R"(tier_catalog_entries{tier="cold"})"), 2);
}

TEST_F(HostPressure, ValueOrderPrefersCheckpointsThatSaveMorePrefillPerByte) {
  const auto big = Blocks(1000, 8), small = Blocks(2000, 1), third = Blocks(3000, 1);
  // Room for big + small; the third forces one demotion. Same age: value per byte decides, and
  // attention is quadratic: a long prefix saves more prefill per byte.
  Open("scripted", {}, Bytes(8) + Bytes(1) + Bytes(1) / 2, Bytes(8) * 4);
  ASSERT_TRUE(Seal(big, 1));
  ASSERT_TRUE(Seal(small, 1));
  ASSERT_TRUE(Seal(third, 1));
  EXPECT_EQ(PlacementsOf(big), kD);
  EXPECT_EQ(PlacementsOf(small), kH);
  EXPECT_EQ(PlacementsOf(third), kD);
}

TEST_F(HostPressure, PinnedCheckpointIsNeverDropped) {
  Open("null", {}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);  // no cold tier: pressure can only drop
  const auto pinned = Blocks(10, 1);
  ASSERT_TRUE(Seal(pinned, 1));
  Admission admission = AdmitAndWait(pinned, 2);
  ASSERT_EQ(admission.state, AdmissionState::kReady);
  ASSERT_EQ(admission.outcome, Outcome::kDeviceHit);
  for (uint64_t i = 0; i < 5; ++i) Seal(Blocks(100 + 10 * i, 1), 10 + i);
  // The pinned checkpoint is the oldest and least valuable, yet it is still whole on Device.
  EXPECT_EQ(PlacementsOf(pinned), kD);
  EXPECT_GT(host_->Stats().evictions, 0u) << "the pressure was real";
  Release(admission);
  // Much later (its one reuse no longer outweighs its age): it degrades like any other.
  for (uint64_t i = 0; i < 3; ++i) Seal(Blocks(500 + 10 * i, 1), 1000 + i);
  EXPECT_EQ(PlacementsOf(pinned), 0) << "once released it degrades like any other";
}

TEST_F(HostPressure, FailedSpillKeepsTheHostCopyAndBacksOff) {
  Open("scripted", {{"spill_result", "io_error"}}, Bytes(1) * 3 / 2, Bytes(1) * 5 / 2);
  const auto a = Blocks(10, 1), b = Blocks(20, 1), c = Blocks(30, 1), d = Blocks(40, 1);
  ASSERT_TRUE(Seal(a, 1));
  ASSERT_TRUE(Seal(b, 2));  // a -> Host
  ASSERT_TRUE(Seal(c, 3));  // b -> Host
  ASSERT_TRUE(Seal(d, 4));  // c -> Host: Host must free a slot; a's spill fails
  EXPECT_EQ(host_->Stats().spill_failures, 1u)
      << "one failure, then spills back off instead of retrying into the same failure";
  EXPECT_EQ(Counter(R"(tier_spill_failures_total{action="kept_host"})"), 1);
  // Room was then made by value: the least valuable (a, whose spill failed) was dropped.
  EXPECT_EQ(Counter(R"(tier_spill_failures_total{action="dropped"})"), 1);
  EXPECT_EQ(PlacementsOf(a), 0);
  EXPECT_EQ(PlacementsOf(b), kH) << "kept in Host: nothing was lost to a failing tier";
  EXPECT_EQ(PlacementsOf(c), kH);
  EXPECT_EQ(host_->Stats().cold_entries, 0u) << "nothing partial became visible";
  Admission admission = AdmitAndWait(b, 5);
  EXPECT_EQ(admission.outcome, Outcome::kHostRestore);
  EXPECT_EQ(mismatched_, 0u) << "the kept copy is intact";
  Release(admission);
}

TEST_F(HostPressure, SkipsToRootWhenRestoringCostsAtLeastThePrefill) {
  Open("scripted", {{"restore_ns_per_byte", "1000000"}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  Admission admission = AdmitAndWait(a, 10);
  EXPECT_EQ(admission.state, AdmissionState::kRoot);
  EXPECT_EQ(admission.root_reason, RootReason::kCost);
  EXPECT_EQ(Counter(R"(tier_root_prefills_total{reason="cost"})"), 1);
  EXPECT_EQ(PlacementsOf(a), kC) << "skipping is not dropping";
}

TEST_F(HostPressure, ColdRestoreIsByteExactInOtherPagesAndLandsInHost) {
  Open("scripted", {}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  Admission admission = AdmitAndWait(a, 10);
  ASSERT_EQ(admission.state, AdmissionState::kReady);
  EXPECT_EQ(admission.outcome, Outcome::kColdRestore);
  EXPECT_EQ(admission.cached_tokens, 512u);
  EXPECT_EQ(admission.pages.size(), 8u);
  EXPECT_FALSE(admission.pages_shared) << "restored into pages the server handed over";
  EXPECT_EQ(verified_, 1u);
  EXPECT_EQ(mismatched_, 0u) << "gathered from the seal's pages, scattered into others, exact";
  EXPECT_EQ(PlacementsOf(a), kH | kC) << "Cold -> Host; the cold copy stays valid";
  Release(admission);
}

TEST_F(HostPressure, WrongBytesFoundByTheServerLeaveEveryTier) {
  Open("scripted", {{"flip_restored_byte", "1"}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  Admission admission = AdmitAndWait(a, 10);
  ASSERT_EQ(admission.state, AdmissionState::kReady);
  EXPECT_EQ(mismatched_, 1u) << "the server's own check caught the lying provider";
  EXPECT_EQ(Counter(R"(tier_restore_verifications_total{result="mismatch"})"), 1);
  EXPECT_EQ(PlacementsOf(a), 0) << "gone from the catalog at once: never served again";
  Release(admission);
  Admission again = AdmitAndWait(a, 11);
  EXPECT_EQ(again.state, AdmissionState::kRoot);
  EXPECT_EQ(again.root_reason, RootReason::kNoCheckpoint) << "not restored a second time";
}

TEST_F(HostPressure, DataLossDropsTheColdPlacement) {
  Open("scripted", {{"restore_result", "data_loss"}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  Admission admission = AdmitAndWait(a, 10);
  EXPECT_EQ(admission.state, AdmissionState::kRoot);
  EXPECT_EQ(admission.root_reason, RootReason::kCorrupt);
  EXPECT_FALSE(Info(a).has_value())
      << "a corrupt cold copy that was the last copy leaves the catalog";
}

TEST_F(HostPressure, SharedPrefixRoundTripsThroughColdAndSeedsSessions) {
  Open("scripted", {}, Bytes(6) * 3 / 2, Bytes(6) * 3 / 2);
  const auto system_head = Blocks(1, 4);
  ASSERT_TRUE(Seal(system_head, 1, /*shared_prefix=*/true));
  for (uint64_t i = 0; i < 4; ++i) Seal(Blocks(1000 * (i + 1), 6), 2 + i);
  ASSERT_EQ(PlacementsOf(system_head), kC) << "pushed all the way down";
  for (uint64_t session = 0; session < 3; ++session) {
    std::vector<uint64_t> request = system_head;
    request.push_back(50000 + session);  // each sibling's own continuation
    Admission admission = AdmitAndWait(request, 10 + session);
    ASSERT_EQ(admission.state, AdmissionState::kReady) << "session " << session;
    EXPECT_EQ(admission.cached_tokens, 4u * 512) << "seeded by the shared prefix";
    EXPECT_EQ(admission.outcome, session == 0 ? Outcome::kColdRestore : Outcome::kHostRestore);
    Release(admission);
  }
  EXPECT_EQ(mismatched_, 0u);
  EXPECT_TRUE(Info(system_head)->shared_prefix);
}

TEST_F(HostPressure, LongestExactPrefixWinsAndSiblingsNeverAnswer) {
  Open("scripted", {}, Bytes(4) * 8, Bytes(4) * 8);
  Seal({1, 2}, 1);
  Seal({1, 2, 3, 4}, 2);
  Seal({1, 2, 9}, 3);  // a sibling branch
  Admission a = AdmitAndWait({1, 2, 3, 4, 5}, 4);
  EXPECT_EQ(a.cached_tokens, 4u * 512);
  Release(a);
  Admission b = AdmitAndWait({1, 2, 3, 7}, 5);
  EXPECT_EQ(b.cached_tokens, 2u * 512) << "{1,2,3,4} and {1,2,9} are not prefixes of {1,2,3,7}";
  Release(b);
  Admission c = AdmitAndWait({7, 1, 2}, 6);
  EXPECT_EQ(c.state, AdmissionState::kRoot);
  EXPECT_EQ(c.root_reason, RootReason::kNoCheckpoint);
  EXPECT_EQ(mismatched_, 0u);
}

TEST_F(HostPressure, NoProviderIoWhileRequestsDecode) {
  Open("scripted", {}, Bytes(160) * 2, Bytes(160) * 3);
  sim::AgentsWorkloadOptions options;
  options.sessions = 6;
  options.min_history_tokens = 60000;
  options.max_history_tokens = 80000;
  sim::Workload workload = sim::GenerateAgentsWorkload(options);
  sim::ReplayOptions replay;
  replay.progress = false;
  CostModel cost(profile_);
  sim::ReplayReport report = sim::RunReplay(workload, *host_, *pool_, cost, &registry_, replay);
  EXPECT_GT(report.cold_restores, 0u) << "the workload exercised the cold tier";
  EXPECT_EQ(report.provider_calls_outside_admission, 0u)
      << "provider I/O outside admission, prefetch, pressure and start-up";
  EXPECT_TRUE(report.restore_exact);
  EXPECT_EQ(report.requests, workload.requests.size());
  EXPECT_EQ(report.device_hits + report.host_restores + report.cold_restores + report.root_prefills,
            report.requests);
}

}  // namespace
}  // namespace tier::host::test
