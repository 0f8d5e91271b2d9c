// tier_powerloss_tests: the GoogleTest suites of tests/powerloss, plus three non-test modes of the
// same binary:
//   --powerloss-worker ARGS...   the power-loss loop's worker (started by the PowerLoss suite)
//   --soak [OPTIONS]             the long power-loss loop (see --soak --help)
//   --faultfs-writer PATH        creates PATH, writes "1111" then "2222" (FaultFs.ArmedCut...: a
//                                process of its own, started with exec: a fork() of the threaded,
//                                instrumented test process could deadlock in the child)
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "powerloss_loop.h"

namespace tier::powerloss::test {
int SoakMain(int argc, char** argv);  // powerloss_test.cc
}

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "--powerloss-worker") == 0) {
    return tier::powerloss::test::PowerLossWorkerMain(argc - 2, argv + 2);
  }
  if (argc == 3 && std::strcmp(argv[1], "--faultfs-writer") == 0) {
    const int fd = ::open(argv[2], O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return 1;
    if (::write(fd, "1111", 4) != 4) return 2;
    (void)::write(fd, "2222", 4);  // the test's filesystem stops here: never returns
    return 0;
  }
  if (argc >= 2 && std::strcmp(argv[1], "--soak") == 0) {
    return tier::powerloss::test::SoakMain(argc - 2, argv + 2);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
