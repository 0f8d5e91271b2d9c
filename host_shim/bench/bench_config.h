// bench_config.h -- what one tier-bench run measures, as given on the command line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <tier/host/provider_instance.h>
#include "data_kinds.h"

namespace tier::bench {

struct BenchConfig {
  std::string plugin;                                // --tier-plugin: path or short name ("disk")
  std::string dir;                                   // --dir: an existing directory on the disk
  std::string profile = "qwen3.8-27b-int8-rtx5090";  // --profile: name or JSON path
  uint64_t tokens = 100000;                          // --tokens
  uint64_t size_mib = 0;                             // --size-mib: resize the checkpoint (0: off)
  std::vector<DataKind> kinds = AllDataKinds();      // --kinds random,bf16,fp32
  uint32_t repeats = 3;                              // --repeats: interleaved rounds
  ProviderOptions provider_options;                  // --tier-opt key=value (dir, capacity: ours)
  std::string fio = "fio";                           // --fio: the fio executable
  bool run_fio = true;                               // --no-fio
  std::string rados = "rados";                       // --rados: the rados executable
  bool run_rados_bench = true;                       // --no-rados-bench
  bool run_naive = true;                             // --no-naive
  bool run_memory = true;                            // --no-memory
  bool with_zstd = false;           // --with-zstd: compressible kinds also with compression=zstd
  uint64_t misalign = 0;            // --misalign: buffers offset from 4 KiB
  std::string json_path;            // --json FILE
  std::string encryption_key_file;  // --encryption-key-file: "ours" seals and opens (AES-256-GCM)
  bool keep_files = false;          // --keep
  std::string command_line;         // how it was invoked (for the report)

  // The queue depth the provider uses (its queue_depth option, else the disk provider's 16).
  uint32_t queue_depth() const;
  // Staging bytes the provider bounds itself to (staging_mib, else the disk provider's 64 MiB;
  // for an object store, queue_depth objects in flight).
  uint64_t staging_bytes() const;
  // An object-store provider (rados: --tier-opt pool=... given): no directory, no fio or naive
  // peer; `rados bench` is the limit instead.
  bool object_store() const { return !option("pool", "").empty(); }
  // The store's object size (object_mib, else the rados provider's 4 MiB).
  uint64_t object_bytes() const;
  // The value of --tier-opt `key`, or `fallback`.
  std::string option(const std::string& key, const std::string& fallback) const;
};

}  // namespace tier::bench
