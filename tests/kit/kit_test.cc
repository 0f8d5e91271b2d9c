// ProviderKit: the header-only helpers of plugins/kit (little-endian codec, plan_restore
// decision, chunk window) do what their headers say.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "tier/provider/chunk_window.h"
#include "tier/provider/little_endian.h"
#include "tier/provider/restore_plan.h"

namespace {

using namespace tier::provider;

TEST(ProviderKit, LittleEndianAtUnalignedAddressesWhateverTheHostOrder) {
  uint8_t buffer[1 + 8 + 4 + 2] = {};
  Put64(buffer + 1, 0x0102030405060708ull);
  Put32(buffer + 9, 0xa1b2c3d4u);
  Put16(buffer + 13, 0xbeefu);
  const uint8_t want[] = {0, 8, 7, 6, 5, 4, 3, 2, 1, 0xd4, 0xc3, 0xb2, 0xa1, 0xef, 0xbe};
  EXPECT_EQ(std::memcmp(buffer, want, sizeof(want)), 0);
  EXPECT_EQ(Get64(buffer + 1), 0x0102030405060708ull);
  EXPECT_EQ(Get32(buffer + 9), 0xa1b2c3d4u);
  EXPECT_EQ(Get16(buffer + 13), 0xbeefu);
  Put64(buffer, ~0ull);
  EXPECT_EQ(Get64(buffer), ~0ull);
}

TEST(ProviderKit, PlanRestoresOnlyWhatIsCheaperThanThePrefillAndNotBusy) {
  RestorePlan plan = PlanStored(4096, 100, 101, /*busy=*/false);
  EXPECT_EQ(plan.decision, TIER_DECISION_RESTORE);
  EXPECT_EQ(plan.reason, TIER_REASON_CHEAPER);
  EXPECT_EQ(plan.stored_bytes, 4096u);
  EXPECT_EQ(plan.estimated_restore_ns, 100u);
  plan = PlanStored(4096, 100, 100, false);  // as costly as the prefill: skip
  EXPECT_EQ(plan.decision, TIER_DECISION_SKIP_TO_ROOT);
  EXPECT_EQ(plan.reason, TIER_REASON_COST);
  plan = PlanStored(4096, 1, 1000, /*busy=*/true);
  EXPECT_EQ(plan.decision, TIER_DECISION_SKIP_TO_ROOT);
  EXPECT_EQ(plan.reason, TIER_REASON_BUSY);
  plan = PlanSkip(TIER_REASON_CORRUPT);
  EXPECT_EQ(plan.decision, TIER_DECISION_SKIP_TO_ROOT);
  EXPECT_EQ(plan.reason, TIER_REASON_CORRUPT);
  EXPECT_EQ(plan.stored_bytes, 0u);
}

TEST(ProviderKit, WritePlanStaysInsideTheCallersStructSize) {
  tier_plan plan;
  std::memset(&plan, 0xab, sizeof(plan));
  plan.struct_size = offsetof(tier_plan, reason) + sizeof(plan.reason);  // an older, shorter one
  WritePlan(PlanStored(4096, 100, 1000, false), &plan);
  EXPECT_EQ(plan.decision, TIER_DECISION_RESTORE);
  EXPECT_EQ(plan.reason, TIER_REASON_CHEAPER);
  uint64_t untouched;
  std::memset(&untouched, 0xab, sizeof(untouched));
  EXPECT_EQ(plan.stored_bytes, untouched) << "written past the caller's struct_size";
  plan.struct_size = sizeof(plan);
  WritePlan(PlanStored(4096, 100, 1000, false), &plan);
  EXPECT_EQ(plan.stored_bytes, 4096u);
  EXPECT_EQ(plan.estimated_restore_ns, 100u);
  EXPECT_EQ(plan.reserved, 0u);
}

TEST(ProviderKit, ChunkWindowKeepsTheFirstErrorAndDrains) {
  ChunkWindow window;
  window.Begin(3);
  EXPECT_FALSE(window.WaitIdleFor(1000));  // three in flight
  window.Fail(tier::Status::IoError("first"));
  window.Fail(tier::Status::DataLoss("second"));
  EXPECT_TRUE(window.failed.load());
  std::thread finisher([&] {
    window.End();
    window.End();
    window.End();
  });
  window.WaitIdle();
  finisher.join();
  EXPECT_TRUE(window.WaitIdleFor(0));
  EXPECT_EQ(window.error().code(), TIER_IO_ERROR);
  EXPECT_EQ(window.error().message(), "first");
}

}  // namespace
