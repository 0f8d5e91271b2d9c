// replay.h -- tier-host replay: runs a workload through the planner on a virtual clock.
//
// The engine's prefill and decode take the cost model's time on a virtual clock, so an hour of
// traffic replays in minutes; everything that moves checkpoint bytes (Device/Host copies, spills,
// cold restores) happens for real and restored bytes are verified. `max_concurrency` lanes serve
// requests FIFO; a request's checkpoint is sealed when it completes, and a prefix that earlier
// requests share (a system head) is published as its own checkpoint on the way.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "cold_tier.h"
#include <tier/host/cost_model.h>
#include "planner.h"
#include "workload.h"

namespace tier {

struct ReplayOptions {
  uint32_t max_concurrency = 2;
  uint32_t min_shared_blocks = 2;  // publish shared prefixes of at least this many blocks
  bool progress = true;            // a progress line on stderr about once a second
  std::string label;               // shown in the progress line ("disk", "null")
};

struct ReplayReport {
  std::string workload;
  std::string provider;
  uint64_t requests = 0;
  uint64_t device_hits = 0;
  uint64_t host_restores = 0;
  uint64_t cold_restores = 0;
  uint64_t root_prefills = 0;
  std::map<std::string, uint64_t> root_prefills_by_reason;  // every root prefill, by reason
  std::map<std::string, uint64_t> skip_to_root;             // cold checkpoints not restored
  uint64_t checkpoints_sealed = 0;
  uint64_t shared_prefixes_published = 0;
  double prefill_seconds = 0;           // prefill the engine actually ran
  double prefill_seconds_no_reuse = 0;  // prefill had nothing been reused
  double admission_seconds = 0;         // restores and transfers before prefill
  double prefill_seconds_saved = 0;     // no_reuse - (prefill + admission)
  double ttft_p50_s = 0;
  double ttft_p99_s = 0;
  double virtual_seconds = 0;
  double wall_seconds = 0;
  uint64_t provider_calls_outside_admission = 0;  // must be 0: no cold I/O while decoding
  PlannerTotals totals;
  bool restore_exact = true;  // every restored checkpoint matched what was spilled
};

// Runs `workload` to completion. `cold` may be null (no cold tier). Caller's thread.
ReplayReport RunReplay(const Workload& workload, Planner& planner, const CostModel& cost,
                       ServerMetrics* metrics, ColdTier* cold, const ReplayOptions& options);

}  // namespace tier
