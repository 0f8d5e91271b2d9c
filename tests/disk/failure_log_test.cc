// DiskFailureLog: repeated identical failures (same operation, same status) make one line, then
// at most one summary per interval, and a success or close says how many were folded.
#include <gtest/gtest.h>

#include "failure_log.h"

namespace tier::disk::test {
namespace {

constexpr uint64_t kSecondNs = 1'000'000'000;

TEST(DiskFailureLog, FirstFailureIsLoggedRepeatsAreFoldedIntoOneSummaryPerInterval) {
  FailureLog log(10 * kSecondNs);
  EXPECT_EQ(log.Failed("spill", TIER_NO_SPACE, "disk: spill: full", 100), "disk: spill: full");
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(log.Failed("spill", TIER_NO_SPACE, "disk: spill: full " + std::to_string(i),
                         100 + i * kSecondNs / 10),
              "")
        << "folded: failure " << i;
  }
  const std::string summary =
      log.Failed("spill", TIER_NO_SPACE, "disk: spill: latest", 100 + 10 * kSecondNs);
  EXPECT_NE(summary.find("51 more spill failures with no_space"), std::string::npos) << summary;
  EXPECT_NE(summary.find("latest: disk: spill: latest"), std::string::npos) << summary;
  EXPECT_EQ(log.Failed("spill", TIER_NO_SPACE, "again", 100 + 11 * kSecondNs), "");
}

TEST(DiskFailureLog, OtherStatusesAndOperationsAreTheirOwnKind) {
  FailureLog log(10 * kSecondNs);
  EXPECT_EQ(log.Failed("spill", TIER_NO_SPACE, "a", 1), "a");
  EXPECT_EQ(log.Failed("spill", TIER_IO_ERROR, "b", 2), "b");
  EXPECT_EQ(log.Failed("restore", TIER_IO_ERROR, "c", 3), "c");
  EXPECT_EQ(log.Failed("spill", TIER_IO_ERROR, "d", 4), "");
}

TEST(DiskFailureLog, SuccessSummarizesWhatWasFoldedAndStartsOver) {
  FailureLog log(10 * kSecondNs);
  EXPECT_EQ(log.Failed("spill", TIER_NO_SPACE, "full", 1), "full");
  EXPECT_EQ(log.Failed("spill", TIER_NO_SPACE, "full", 2), "");
  EXPECT_EQ(log.Failed("spill", TIER_NO_SPACE, "full", 3), "");
  EXPECT_TRUE(log.Succeeded("restore", 4).empty()) << "another operation";
  const std::vector<std::string> lines = log.Succeeded("spill", 5);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("2 more spill failures with no_space"), std::string::npos) << lines[0];
  EXPECT_TRUE(log.Succeeded("spill", 6).empty()) << "nothing folded since";
  EXPECT_EQ(log.Failed("spill", TIER_NO_SPACE, "full again", 7), "full again");
}

TEST(DiskFailureLog, FlushSummarizesEveryKindStillFolded) {
  FailureLog log(10 * kSecondNs);
  EXPECT_EQ(log.Failed("spill", TIER_NO_SPACE, "x", 1), "x");
  EXPECT_EQ(log.Failed("restore", TIER_IO_ERROR, "y", 1), "y");
  EXPECT_EQ(log.Failed("restore", TIER_IO_ERROR, "y", 2), "");
  const std::vector<std::string> lines = log.Flush(3);
  ASSERT_EQ(lines.size(), 1u) << "the spill kind folded nothing";
  EXPECT_NE(lines[0].find("1 more restore failure with io_error"), std::string::npos) << lines[0];
  EXPECT_TRUE(log.Flush(4).empty());
}

}  // namespace
}  // namespace tier::disk::test
