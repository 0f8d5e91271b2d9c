// rados_bench_runner.h -- the object store's own limit: `rados bench` writing, then reading back
// (seq), objects of the provider's object size with the provider's queue depth as its
// concurrency, on the provider's pool and client, about as many bytes as one checkpoint. The
// client throttle (objecter_inflight_op_bytes) is set as the provider sets its own, so both run
// with the same in-flight bytes allowed.
#pragma once

#include <cstdint>
#include <string>

#include <tier/status.h>

namespace tier::bench {

struct RadosBenchJob {
  std::string rados = "rados";  // executable (looked up in PATH)
  std::string conf;             // ceph.conf ("" = librados's default search)
  std::string client;           // cephx id, without "client."
  std::string keyring;          // "" = what the conf says
  std::string pool;
  std::string rados_namespace;  // its objects live here, apart from the provider's
  std::string run_name;         // the bench's metadata object (write, then seq, then cleanup)
  uint64_t object_bytes = 4u << 20;
  uint32_t concurrency = 16;
  uint64_t bytes = 0;              // write: about this many (whole objects, --max-objects)
  uint64_t inflight_op_bytes = 0;  // objecter_inflight_op_bytes (0: the client's default)
  bool write = false;              // write (--no-cleanup), else seq
};

struct RadosBenchResult {
  uint64_t bytes = 0;           // what rados bench moved (operations x object size)
  double bytes_per_second = 0;  // bytes over its total_time_run
  std::string command;
};

// "ceph version 16.2.15 ..." of `rados --version`, or UNSUPPORTED when it cannot be run.
Result<std::string> RadosVersion(const std::string& rados);

// Runs one bench (--format json) and parses it. IO_ERROR with its stderr when it fails.
Result<RadosBenchResult> RunRadosBench(const RadosBenchJob& job);

// `rados cleanup --run-name` for the job's objects; best effort.
Status CleanupRadosBench(const RadosBenchJob& job);

}  // namespace tier::bench
