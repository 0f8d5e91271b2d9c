// memory_probe.h -- the provider's peak resident memory during a restore, isolated from the
// bench's own buffers: a fresh child process (tier-bench itself, re-executed) maps and faults in
// the destination buffers first, resets its peak-RSS mark (/proc/self/clear_refs = 5) and reads
// VmRSS as the baseline; then it loads the plugin, opens an instance on the same directory,
// restores the checkpoint and reads VmHWM. The provider's peak is VmHWM - baseline: its code,
// libraries, threads, staging pool, zstd contexts and headers; the caller's buffers, already
// resident, add nothing. The child then checks the bytes.
#pragma once

#include <cstdint>
#include <string>

#include <tier/host/provider_instance.h>
#include <tier/status.h>
#include "data_kinds.h"

namespace tier::bench {

struct MemoryProbeRequest {
  std::string plugin;
  std::string namespace_id;
  ProviderOptions options;   // exactly what the parent opened the instance with
  std::string profile_path;  // the shape: profile at `tokens`, resized to size_bytes if non-zero
  uint64_t tokens = 0;
  uint64_t size_bytes = 0;
  DataKind kind = DataKind::kRandom;
  uint64_t seed = 0;
  std::string key_text;   // the checkpoint's key is KeyFromText(key_text)
  uint64_t misalign = 0;  // destination buffers offset from 4 KiB (0: aligned)
};

struct MemoryProbeResult {
  uint64_t checkpoint_bytes = 0;
  uint64_t misalign = 0;
  uint64_t baseline_rss_bytes = 0;   // buffers mapped and faulted in, before the plugin loads
  uint64_t peak_rss_bytes = 0;       // VmHWM after the restore
  uint64_t provider_peak_bytes = 0;  // peak - baseline
  uint64_t restore_ns = 0;
  bool byte_exact = false;
  bool hwm_reset = false;  // clear_refs worked (else the baseline is VmHWM at that point)
};

// Parent side: runs `self_exe --internal-memory-probe JSON` and parses its answer.
Result<MemoryProbeResult> RunMemoryProbe(const std::string& self_exe,
                                         const MemoryProbeRequest& request);

// Child side: the whole probe; prints one JSON object on stdout. Returns the exit status.
int MemoryProbeChildMain(const std::string& request_json);

}  // namespace tier::bench
