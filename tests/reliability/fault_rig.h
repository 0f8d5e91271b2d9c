// fault_rig.h -- a disk provider over fault-injecting seams (FaultyFileOps for every synchronous
// file call, FaultyBackend around the chosen I/O backend) and the checks every injected failure
// must pass: one completion with the right status, nothing visible, nothing left behind, the
// budget released, the failure counted, and the tier still working afterwards.
#pragma once

#include <memory>
#include <string>

#include "derived_checkpoint.h"
#include "disk_test_util.h"
#include "test_seams.h"

namespace tier::disk::test {

struct FaultRig {
  // `threads`: the pread/pwrite path (every data I/O goes through FileOps), else io_uring.
  explicit FaultRig(bool threads, Options extra = {});

  tier_stats Stats();
  // Checks the state after a failed spill; returns "" when clean, else what is wrong.
  std::string CheckNothingVisible();
  // Spills and restores a fresh checkpoint: "" when the tier still works.
  std::string CheckStillWorks(uint64_t seed);

  TempDir tmp;
  std::string dir;
  FakeHost host;
  std::shared_ptr<FaultyFileOps> fs = std::make_shared<FaultyFileOps>();
  std::shared_ptr<FaultyBackend> io;
  std::unique_ptr<DiskProvider> p;
};

// The status a failing system call must turn into.
inline tier_status StatusForErrno(int err) {
  return err == ENOSPC || err == EDQUOT ? TIER_NO_SPACE : TIER_IO_ERROR;
}

}  // namespace tier::disk::test
