// admission_test.cc -- HostAdmission: admission never blocks the scheduler thread. A slow
// provider leaves other lanes running; several restores fly at once; a pending admission can be
// cancelled; a provider that never completes costs a timeout, not a hang; pressure during a
// restore frees nothing it uses; prefetches are used or wasted; stale plans.
#include <chrono>
#include <set>

#include <tier/host/identity.h>

#include "host_fixture.h"

namespace tier::host::test {
namespace {

using HostAdmission = HostTest;
using Clock = std::chrono::steady_clock;

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

TEST_F(HostAdmission, SlowRestoreIsPendingWhileAnotherLaneIsServed) {
  Open("scripted", {{"restore_delay_ms", "300"}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto cold = Blocks(10, 1);
  SealAndPushToCold(cold);
  const auto hot = Blocks(120, 1);  // the newest: on Device
  ASSERT_EQ(PlacementsOf(hot), kD);
  Admission pending = Admit(cold, 10);
  ASSERT_EQ(pending.state, AdmissionState::kPending) << "a cold restore never answers inline";
  // Meanwhile the scheduler serves another lane: a device hit is ready at once, and polling
  // returns without the restore being done.
  Admission other = Admit(hot, 10);
  EXPECT_EQ(other.state, AdmissionState::kReady);
  EXPECT_EQ(other.outcome, Outcome::kDeviceHit);
  int polls_while_pending = 0;
  while (ended_.count(pending.id) == 0 && polls_while_pending < 1000000) {
    PollOnce();  // never blocks
    ++polls_while_pending;
  }
  EXPECT_GT(polls_while_pending, 1) << "the scheduler kept running while the restore flew";
  std::optional<Admission> done = WaitFor(pending.id);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->state, AdmissionState::kReady);
  EXPECT_EQ(done->outcome, Outcome::kColdRestore);
  Release(other);
  Release(*done);
}

TEST_F(HostAdmission, SeveralRestoresAreInFlightAtOnce) {
  Open("scripted", {{"restore_delay_ms", "300"}}, Bytes(1) * 3 / 2, Bytes(1) * 6,
       [](HostOptions& o) { o.max_inflight_restores = 3; });
  std::vector<std::vector<uint64_t>> cold;
  for (uint64_t i = 0; i < 3; ++i) cold.push_back(Blocks(10 + 10 * i, 1));
  for (const auto& b : cold) ASSERT_TRUE(Seal(b, 1));
  // Push all three to Cold: Host holds six, so fill it with newer ones.
  for (uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(Seal(Blocks(1000 + 10 * i, 1), 2 + i));
  for (const auto& b : cold) ASSERT_EQ(PlacementsOf(b), kC);
  std::vector<Admission> pending;
  for (const auto& b : cold) pending.push_back(Admit(b, 20));
  for (const Admission& a : pending) ASSERT_EQ(a.state, AdmissionState::kPending);
  // Let the plans answer; then all three restores are with the provider together.
  const auto start = Clock::now();
  uint64_t most = 0;
  while (MillisecondsSince(start) < 250) {
    PollOnce();
    most = std::max<uint64_t>(most, host_->Stats().inflight_provider_ops);
    host_->WaitForWork(1000000);
  }
  EXPECT_GE(most, 3u) << "the restores did not wait for one another";
  for (const Admission& a : pending) {
    std::optional<Admission> done = WaitFor(a.id);
    ASSERT_TRUE(done.has_value());
    EXPECT_EQ(done->outcome, Outcome::kColdRestore);
    Release(*done);
  }
  EXPECT_EQ(mismatched_, 0u);
}

TEST_F(HostAdmission, CancelWhilePendingEndsItAndReleasesWhatItPinned) {
  Open("scripted", {{"restore_delay_ms", "200"}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  const uint32_t free_before = pool_->free_pages();
  Admission pending = Admit(a, 10);
  ASSERT_EQ(pending.state, AdmissionState::kPending);
  EXPECT_TRUE(host_->Cancel(pending.id));
  EXPECT_FALSE(host_->Cancel(pending.id)) << "once is enough";
  std::optional<Admission> ended = WaitFor(pending.id);
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->state, AdmissionState::kCancelled);
  Settle();  // the late restore lands in Host: not wasted, and it pins nothing afterwards
  EXPECT_EQ(Info(a)->pins, 0u);
  EXPECT_EQ(pool_->free_pages(), free_before) << "no page of the server was kept";
  EXPECT_TRUE(host_->Evict(PrefixKey("host-test", a)));
  Settle();
  EXPECT_FALSE(Info(a).has_value());
}

TEST_F(HostAdmission, ProviderThatNeverCompletesCostsATimeoutNotAHang) {
  Open("scripted", {{"restore_never", "1"}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2,
       [](HostOptions& o) {
         o.provider_timeout_ns = 200ull * 1000 * 1000;
         o.close_timeout_ns = 300ull * 1000 * 1000;
       });
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  const auto start = Clock::now();
  Admission pending = Admit(a, 10);
  ASSERT_EQ(pending.state, AdmissionState::kPending);
  std::optional<Admission> done = WaitFor(pending.id, 5000);
  ASSERT_TRUE(done.has_value()) << "the deadline ended it";
  EXPECT_EQ(done->state, AdmissionState::kRoot);
  EXPECT_EQ(done->root_reason, RootReason::kTimeout);
  EXPECT_EQ(Counter(R"(tier_root_prefills_total{reason="timeout"})"), 1);
  EXPECT_LT(MillisecondsSince(start), 5000);
  EXPECT_GE(host_->Stats().timeouts, 1u);
  EXPECT_EQ(host_->Stats().inflight_provider_ops, 1u)
      << "the restore's buffers stay borrowed until the provider ends it";
  // Another request still gets served meanwhile.
  Admission hot = AdmitAndWait(Blocks(120, 1), 11);
  EXPECT_EQ(hot.state, AdmissionState::kReady);
  Release(hot);
  // Closing does not wait forever: the instance is abandoned after close_timeout_ns.
  const auto close_start = Clock::now();
  host_.reset();
  EXPECT_LT(MillisecondsSince(close_start), 5000);
}

TEST_F(HostAdmission, PressureDuringARestoreFreesNothingItUses) {
  Open("scripted", {{"restore_delay_ms", "300"}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  Admission pending = Admit(a, 10);
  ASSERT_EQ(pending.state, AdmissionState::kPending);
  // Heavy pressure while the restore flies: every tier must make room again and again.
  for (uint64_t i = 0; i < 6; ++i) Seal(Blocks(2000 + 10 * i, 1), 20 + i);
  EXPECT_TRUE(Info(a).has_value()) << "the checkpoint being restored is pinned";
  std::optional<Admission> done = WaitFor(pending.id);
  ASSERT_TRUE(done.has_value());
  ASSERT_EQ(done->state, AdmissionState::kReady);
  EXPECT_EQ(done->outcome, Outcome::kColdRestore);
  EXPECT_TRUE(Check(a, *done)) << "exact although everything around it moved";
  Release(*done);
}

TEST_F(HostAdmission, PrefetchBringsAReturningSessionIntoHostAndIsCountedUsed) {
  Open("scripted", {}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  const uint64_t id = host_->Prefetch(a, 10 * 1000000000ull);
  ASSERT_NE(id, 0u);
  Settle();
  EXPECT_EQ(PlacementsOf(a), kH | kC) << "in Host before the request arrives";
  Admission admission = AdmitAndWait(a, 12);
  ASSERT_EQ(admission.state, AdmissionState::kReady);
  EXPECT_EQ(admission.outcome, Outcome::kHostRestore) << "no cold restore on the request's path";
  EXPECT_TRUE(admission.prefetched);
  EXPECT_EQ(Counter(R"(tier_prefetches_total{result="used"})"), 1);
  EXPECT_EQ(mismatched_, 0u);
  Release(admission);
  EXPECT_EQ(host_->Prefetch(Blocks(120, 1), 13 * 1000000000ull), 0u)
      << "already on Device: nothing to fetch";
}

TEST_F(HostAdmission, PrefetchThatIsNeverUsedIsCountedWasted) {
  Open("scripted", {}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1), b = Blocks(20, 1);
  ASSERT_TRUE(Seal(a, 1));
  ASSERT_TRUE(Seal(b, 1));
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(Seal(Blocks(100 + 10 * i, 1), 2 + i));
  ASSERT_EQ(PlacementsOf(a), kC);
  ASSERT_EQ(PlacementsOf(b), kC);
  ASSERT_NE(host_->Prefetch(a, 10 * 1000000000ull), 0u);
  Settle();
  ASSERT_EQ(PlacementsOf(a), kH | kC);
  // The session does not come back; new work pushes its Host copy out again.
  ASSERT_NE(host_->Prefetch(b, 11 * 1000000000ull), 0u);
  Settle();
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(Seal(Blocks(500 + 10 * i, 1), 20 + i));
  EXPECT_EQ(PlacementsOf(a) & kH, 0);
  EXPECT_GE(Counter(R"(tier_prefetches_total{result="wasted"})"), 1);
  EXPECT_EQ(Counter(R"(tier_prefetches_total{result="issued"})"), 2);
}

TEST_F(HostAdmission, CheckpointLeavingDuringThePlanGoesToTheRoot) {
  Open("scripted", {{"plan_delay_ms", "200"}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  Admission pending = Admit(a, 10);
  ASSERT_EQ(pending.state, AdmissionState::kPending);
  // The catalog changes under the plan: the session is closed.
  EXPECT_TRUE(host_->Evict(PrefixKey("host-test", a)));
  std::optional<Admission> done = WaitFor(pending.id);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->state, AdmissionState::kRoot);
  EXPECT_EQ(done->root_reason, RootReason::kStalePlan);
  EXPECT_EQ(Counter(R"(tier_root_prefills_total{reason="stale_plan"})"), 1);
  Settle();
  EXPECT_FALSE(Info(a).has_value()) << "evicted once the admission let go";
  // Published again, it serves like any other.
  ASSERT_TRUE(Seal(a, 11));
  Admission again = AdmitAndWait(a, 12);
  EXPECT_EQ(again.outcome, Outcome::kDeviceHit);
  Release(again);
}

TEST_F(HostAdmission, TwoRequestsForOneColdCheckpointRestoreItOnce) {
  Open("scripted", {{"restore_delay_ms", "200"}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2,
       [](HostOptions& o) { o.max_inflight_restores = 1; });
  const auto a = Blocks(10, 1);
  SealAndPushToCold(a);
  Admission first = Admit(a, 10);
  Admission second = Admit(a, 10);
  ASSERT_EQ(first.state, AdmissionState::kPending);
  ASSERT_EQ(second.state, AdmissionState::kPending);
  std::optional<Admission> one = WaitFor(first.id);
  std::optional<Admission> two = WaitFor(second.id);
  ASSERT_TRUE(one && two);
  // Which of the two reaches the provider first is the call threads' business; one restores from
  // cold, the other uses what it brought.
  std::multiset<Outcome> outcomes{one->outcome, two->outcome};
  EXPECT_EQ(outcomes, (std::multiset<Outcome>{Outcome::kColdRestore, Outcome::kHostRestore}));
  EXPECT_EQ(host_->Stats().restored_logical_bytes, Info(a)->logical_bytes) << "restored once";
  Release(*one);
  Release(*two);
}

}  // namespace
}  // namespace tier::host::test

namespace tier::host::test {
namespace {

using HostAdmission = HostTest;

TEST_F(HostAdmission, RestoreWaitsPendingForHostMemoryAndGoesOnWhenPressureFreesIt) {
  // Pinned Host memory for one checkpoint only; Host's budget below one: copies go down at once.
  Open("scripted", {}, Bytes(1) * 3 / 2, Bytes(1) / 2,
       [](HostOptions& o) { o.host_memory_bytes = 100000; });
  const auto a = Blocks(10, 1), b = Blocks(20, 1), c = Blocks(30, 1);
  ASSERT_TRUE(Seal(a, 1));
  ASSERT_TRUE(Seal(b, 2));
  ASSERT_TRUE(Seal(c, 3));
  ASSERT_EQ(PlacementsOf(a), kC);
  ASSERT_EQ(PlacementsOf(b), kC);
  Admission first = AdmitAndWait(a, 10);  // its copy now fills the pinned memory
  ASSERT_EQ(first.state, AdmissionState::kReady);
  Admission second = Admit(b, 11);
  ASSERT_EQ(second.state, AdmissionState::kPending);
  for (int i = 0; i < 50; ++i) {
    PollOnce();
    host_->WaitForWork(1000000);
  }
  EXPECT_EQ(ended_.count(second.id), 0u) << "waits for memory as pending, does not fail";
  Release(first);  // a's Host copy may go now (its cold copy stays): b's restore gets the room
  std::optional<Admission> done = WaitFor(second.id);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->state, AdmissionState::kReady);
  EXPECT_EQ(done->outcome, Outcome::kColdRestore);
  EXPECT_TRUE(Check(b, *done));
  Release(*done);
}

}  // namespace
}  // namespace tier::host::test
