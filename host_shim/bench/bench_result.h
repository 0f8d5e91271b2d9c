// bench_result.h -- everything one tier-bench run measured: per data kind and contestant, one
// timing per round (spill and restore), stored bytes, byte-exactness; the page-cache evidence;
// the provider's peak memory. The report (bench_report.h) derives rates, ratios and verdicts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint_shape.h"
#include "data_kinds.h"
#include "memory_probe.h"
#include "page_cache.h"

namespace tier::bench {

// Stable ids, used as JSON keys.
inline constexpr const char* kFio = "fio";
inline constexpr const char* kRadosBench = "rados_bench";  // the object store's limit
inline constexpr const char* kNaive = "naive";
inline constexpr const char* kOurs = "ours";           // the provider as configured
inline constexpr const char* kOursRaw = "ours_raw";    // the same with compression=off
inline constexpr const char* kOursZstd = "ours_zstd";  // the same with compression=zstd

struct ContestantRun {
  std::string id;     // kFio, kNaive, kOurs, kOursRaw, kOursZstd
  std::string label;  // "fio (limit)", "naive peer", "ours (compression=auto)", ...
  bool available = true;
  std::string note;  // why not available ("fio not installed"), or how it was measured
  // One entry per round, in round order.
  std::vector<uint64_t> spill_ns;
  std::vector<uint64_t> restore_ns;
  std::vector<uint64_t> spill_buffered_ns;  // naive: fwrite+fclose only (page cache)
  uint64_t logical_bytes = 0;               // moved per operation
  uint64_t stored_bytes = 0;                // on disk after the last spill (provider's report)
  std::vector<uint64_t> stored_per_round;   // the provider's: each round's spill
  uint64_t restores_checked = 0;
  uint64_t restores_exact = 0;
};

struct KindRun {
  DataKind kind = DataKind::kRandom;
  uint64_t seed = 0;
  std::vector<ContestantRun> contestants;

  const ContestantRun* Find(const std::string& id) const;
};

struct MemoryRun {
  bool ran = false;
  std::string note;                       // why not, or the method
  std::vector<MemoryProbeResult> probes;  // aligned, then misaligned buffers
  uint64_t staging_bytes = 0;
  uint64_t bound_bytes = 0;  // staging + 64 MiB (the target)
};

struct BenchResult {
  std::string command_line;
  std::string plugin;
  std::string provider_name;
  std::string io_path;
  std::string dir;
  std::string filesystem;
  std::string fio_version;  // "" when not installed
  std::string fio_note;
  std::string fio_write_command;
  std::string fio_read_command;
  bool object_store = false;  // rados: rados bench instead of fio and the naive peer
  std::string rados_version;  // "" when not installed or not run
  std::string rados_note;
  std::string rados_write_command;
  std::string rados_read_command;
  CheckpointShape shape;
  uint32_t queue_depth = 0;
  uint32_t repeats = 0;
  uint64_t misalign = 0;
  std::vector<std::string> provider_options;  // key=value as opened (ours)
  std::vector<KindRun> kinds;
  CacheState worst_cache;  // the most resident pages seen after an eviction
  std::string cache_method;
  MemoryRun memory;
  uint64_t elapsed_ns = 0;
  unsigned cpus = 0;
};

}  // namespace tier::bench
