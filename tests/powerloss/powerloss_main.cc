// tier_powerloss_tests: the GoogleTest suites of tests/powerloss, plus two non-test modes of the
// same binary:
//   --powerloss-worker ARGS...   the power-loss loop's worker (started by the PowerLoss suite)
//   --soak [OPTIONS]             the long power-loss loop (see --soak --help)
#include <gtest/gtest.h>

#include <cstring>

#include "powerloss_loop.h"

namespace tier::powerloss::test {
int SoakMain(int argc, char** argv);  // powerloss_test.cc
}

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--powerloss-worker") == 0) {
    return tier::powerloss::test::PowerLossWorkerMain(argc - 2, argv + 2);
  }
  if (argc >= 2 && std::strcmp(argv[1], "--soak") == 0) {
    return tier::powerloss::test::SoakMain(argc - 2, argv + 2);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
