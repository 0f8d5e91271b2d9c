// fio_runner.h -- the physical limit: fio's sequential write and read of one file in the bench
// directory with O_DIRECT, io_uring, 1 MiB blocks and the provider's queue depth.
#pragma once

#include <cstdint>
#include <string>

#include <tier/status.h>

namespace tier::bench {

struct FioJob {
  std::string fio = "fio";  // executable (looked up in PATH)
  std::string file;         // the data file (written by kWrite, read by kRead)
  uint64_t bytes = 0;       // rounded up to whole MiB
  uint32_t queue_depth = 16;
  bool write = false;
};

struct FioResult {
  uint64_t bytes = 0;           // what fio moved
  double bytes_per_second = 0;  // fio's own bandwidth figure (bw_bytes)
  uint64_t wall_ns = 0;         // the fio process, start to exit (setup included)
  std::string command;          // the exact command line
};

// "fio-3.33", or UNSUPPORTED "fio not installed" when `fio` cannot be run.
Result<std::string> FioVersion(const std::string& fio);

// Runs one job: --rw=write|read --bs=1M --direct=1 --ioengine=io_uring --iodepth=QD
// --size=BYTES (write: --end_fsync=1, fio preallocates the file as it does by default) and parses
// its JSON. IO_ERROR with fio's stderr when it fails.
Result<FioResult> RunFio(const FioJob& job);

}  // namespace tier::bench
