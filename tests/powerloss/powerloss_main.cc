// tier_powerloss_tests: the GoogleTest suites of tests/powerloss, plus two non-test modes of the
// same binary:
//   --powerloss-worker ARGS...   the power-loss loop's worker (started by the PowerLoss suite)
//   --soak [OPTIONS]             the long power-loss loop (see --soak --help)
#include <gtest/gtest.h>

#include <cstring>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
