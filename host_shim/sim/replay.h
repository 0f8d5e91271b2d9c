// replay.h -- tier-host replay: a workload through the library's asynchronous API, on a virtual
// clock, with a paged KV pool of the simulator's own.
//
// The engine's prefill and decode take the cost model's time on a virtual clock, so an hour of
// traffic replays in minutes. Everything that moves checkpoint bytes is real: the simulator's pool
// holds synthetic KV (a function of the prefix), Host::Seal gathers it, spills and restores go
// through the provider, restores scatter into other free pages, and every restored page and state
// buffer is checked against what the model would hold (restore_exact). A cold restore costs its
// measured wall time times the bytes scale. `max_concurrency` lanes serve requests FIFO; a
// request's checkpoint is sealed when it completes, and a prefix that earlier requests share (a
// system head) is published as its own checkpoint on the way.
#pragma once

#include <tier/host/cost_model.h>
#include <tier/host/host.h>
#include <tier/host/metrics_registry.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

#include "kv_pool.h"
#include "workload.h"

namespace tier::sim {

struct ReplayOptions {
  uint32_t max_concurrency = 2;
  uint32_t min_shared_blocks = 2;  // publish shared prefixes of at least this many blocks
  bool progress = true;            // a progress line on stderr about once a second
  std::string label;               // shown in the progress line ("disk", "null")
  // Prefetch hints: a closed-loop turn's hint goes out this long before the turn is sent (the
  // agent framework saw its tool's result); 0 = no hints.
  double prefetch_lead_s = 3.0;
  // Set from another thread (a signal) to stop early: pending admissions are cancelled, requests
  // in service finish, the report says it was interrupted.
  const std::atomic<bool>* stop = nullptr;
  // kVirtual: the cost model's time, restores charged at measured time x bytes scale, the replay
  // waits for what is in flight before virtual time moves on. kWall: lanes run on the wall clock
  // (virtual = wall x time_scale), the scheduler never waits: it polls, admits and steps its lanes
  // while restores fly, as a server does; the report gives its longest stall in a tier call.
  enum class Clock { kVirtual, kWall };
  Clock clock = Clock::kVirtual;
  double time_scale = 1;  // kWall: virtual seconds per wall second
};

struct ReplayReport {
  std::string workload;
  std::string provider;
  uint64_t requests = 0;
  uint64_t completed = 0;
  uint64_t device_hits = 0;
  uint64_t host_restores = 0;
  uint64_t cold_restores = 0;
  uint64_t root_prefills = 0;
  std::map<std::string, uint64_t> root_prefills_by_reason;  // every root prefill, by reason
  std::map<std::string, uint64_t> skip_to_root;             // checkpoints found but not used
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
  uint64_t pending_admissions = 0;  // admissions that were not ready at once
  uint64_t max_pending_at_once = 0;
  uint64_t prefetch_hints = 0;
  double prefetch_hidden_seconds = 0;  // cold restore time (virtual) prefetches took off requests
  uint64_t verified_restores = 0;
  uint64_t mismatched_restores = 0;
  uint64_t provider_calls_outside_admission = 0;  // must be 0: no cold I/O while decoding
  // The scheduler thread's time inside tier calls (Admit, Poll, Seal, Release, Prefetch, Cancel,
  // ReportVerification), per call; and (kWall) lane steps taken while a restore was pending.
  std::string clock = "virtual";
  double scheduler_stall_max_ms = 0;
  double scheduler_stall_p99_ms = 0;
  uint64_t tier_calls = 0;
  uint64_t blocked_tier_calls = 0;    // calls in which the scheduler thread gave up the CPU
  uint64_t preempted_tier_calls = 0;  // calls in which other threads took the CPU from it
  double scheduler_cpu_max_ms = 0;    // the most CPU time one call took
  double scheduler_stall_max_unpreempted_ms = 0;  // the longest call that kept the CPU throughout
  uint64_t lane_steps_during_restores = 0;
  HostStats host;
  bool restore_exact = true;  // every restored page and state buffer held the expected bytes
  bool interrupted = false;   // stopped early (SIGINT): a partial report
};

// Runs `workload` to completion through `host` (opened over `pool`). Caller's thread: it is the
// scheduler thread of `host`.
ReplayReport RunReplay(const Workload& workload, Host& host, KvPool& pool, const CostModel& cost,
                       MetricsRegistry* metrics, const ReplayOptions& options);

// Registers the replay's own series (tier_ttft_seconds, tier_prefill_saved_seconds_total) at
// zero, so a scraper sees them before the replay moves them. RunReplay registers them too.
void RegisterReplayMetrics(MetricsRegistry* metrics);

// Pool pages the replay of `workload` needs next to `device_capacity_bytes` of parked
// checkpoints (logical), `lanes` requests in service and their shared prefixes.
uint32_t ReplayPoolPages(const Workload& workload, const ModelProfile& profile,
                         uint64_t bytes_scale, uint64_t device_capacity_bytes, uint32_t lanes);

}  // namespace tier::sim
