// tier_reliability_tests: the GoogleTest suites of tests/reliability, plus two non-test modes of
// the same binary:
//   --crash-worker ARGS...   the crash-loop worker (started by the CrashRecovery suite)
//   --crash-loop [OPTIONS]   the long crash loop (see --crash-loop --help)
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "crash_loop.h"

namespace tier::disk::test {
int CrashLoopMain(int argc, char** argv);  // crash_recovery_test.cc
}

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--crash-worker") == 0) {
    return tier::disk::test::CrashWorkerMain(argc - 2, argv + 2);
  }
  if (argc >= 2 && std::strcmp(argv[1], "--crash-loop") == 0) {
    return tier::disk::test::CrashLoopMain(argc - 2, argv + 2);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
