// replay.h -- tier-host replay: a workload through the library's asynchronous API, on a virtual
// clock, with a paged KV pool of the simulator's own.
//
// The engine's prefill and decode take the cost model's time on a virtual clock, so an hour of
// traffic replays in minutes. Everything that moves checkpoint bytes is real: the simulator's pool
// holds synthetic KV (a function of the prefix), Host::Seal gathers it, spills and restores go
// through the provider, restores scatter into other free pages, and every restored page and state
// buffer is checked against what the model would hold (restore_exact). A cold restore costs its
// measured wall time times the bytes scale, its logical bytes at a measured full-size rate
// (ReplayOptions::measured_cold_read_bytes_per_second set), or
// (HostOptions::model_cold_read_bytes_per_second set) its modelled time, deterministic.
// `max_concurrency` lanes serve requests FIFO; a request's checkpoint is sealed when it completes,
// and a prefix that earlier requests share (a system head) is published as its own checkpoint on
// the way.
#pragma once

#include <tier/host/cost_model.h>
#include <tier/host/host.h>
#include <tier/host/metrics_registry.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

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
  // Set (after `stop`) to stop waiting for what is still in flight: the report covers what
  // completed, and the Host may still be busy (the caller must not close it, only leave).
  const std::atomic<bool>* hurry = nullptr;
  // kVirtual: the cost model's time, restores charged as the class comment says, the replay
  // waits for what is in flight before virtual time moves on. kWall: lanes run on the wall clock
  // (virtual = wall x time_scale), the scheduler never waits: it polls, admits and steps its lanes
  // while restores fly, as a server does; the report gives its longest stall in a tier call.
  enum class Clock { kVirtual, kWall };
  Clock clock = Clock::kVirtual;
  double time_scale = 1;  // kWall: virtual seconds per wall second
  // Tenants (issue 23): > 0 gives request r the tenant "t<r.session % tenants>" (AdmitRequest,
  // SealRequest and Prefetch carry it), so sessions of different tenants never share a
  // checkpoint, shared prefixes included; 0 = no tenants. Traces without sessions are one tenant.
  uint32_t tenants = 0;
  // Measured restore cost at full size (tier-host's restore probe, bytes scale > 1): a cold
  // restore (and a prefetch's hidden time) is charged measured_cold_fixed_ns + its logical bytes
  // at this rate instead of its wall time x bytes scale. 0 = wall time x bytes scale. Ignored
  // with the Host's restore model.
  double measured_cold_read_bytes_per_second = 0;
  uint64_t measured_cold_fixed_ns = 0;
};

// Requests that resumed a parked conversation: their prompt extends a checkpoint an earlier
// request sealed. Grouped by where the state came from: "device", "host", "cold",
// "cold_prefetched" (a prefetch hint brought it from cold into Host before the turn came), or
// "root" when the parked checkpoint was gone (prefilled from the root or a shorter shared prefix).
struct ReturningFigures {
  uint64_t requests = 0;
  double ttft_p50_s = 0, ttft_p99_s = 0;    // arrival to first token
  double queue_p50_s = 0, queue_p99_s = 0;  // arrival to a lane
  double restore_p50_s = 0;                 // restore and transfer before prefill
  double prefill_p50_s = 0;                 // prefill of what the checkpoint did not cover
  double root_prefill_p50_s = 0, root_prefill_p99_s = 0;  // the prompt from the root, no reuse
  double parked_tokens_p50 = 0;  // tokens of the parked checkpoint it extends
  // Means, which add up: ttft_mean_s = queue_mean_s + restore_mean_s + prefill_mean_s.
  double ttft_mean_s = 0, queue_mean_s = 0, restore_mean_s = 0, prefill_mean_s = 0;
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
  double prefill_saved_share = 0;       // prefill_seconds_saved / prefill_seconds_no_reuse
  double ttft_p50_s = 0;
  double ttft_p99_s = 0;
  double queue_p50_s = 0;  // arrival to a lane (queueing only)
  double queue_p99_s = 0;
  // "device", "host", "cold", "cold_prefetched", "root" (absent when none of that kind).
  std::map<std::string, ReturningFigures> returning;
  // The same over every request that came back from the cold tier (restored or prefetched): the
  // headline a user asks for. requests == 0 when none did.
  ReturningFigures returning_from_cold;
  // Stability. offered_utilization: the lanes' share the requests ask for at the service times
  // this run gave them (restore + prefill + decode): open loop, over the arrival span; closed
  // loop (turns after think times), sum over sessions of service / (service + think). At or
  // above 1 the queue cannot drain. lane_utilization: busy lane time over lanes x the run.
  // queue_grew: requests arriving in the last quarter waited much longer than the first
  // quarter's (more than twice, plus a mean service time).
  double offered_utilization = 0;
  double lane_utilization = 0;
  double queue_first_quarter_s = 0, queue_last_quarter_s = 0;  // mean queueing
  bool queue_grew = false;
  bool unstable = false;
  std::string unstable_reason;            // "" when stable
  double trace_time_scale = 1;            // the stretch the workload was loaded with
  std::string trace_time_scale_how;       // "given", "auto: ..." (set by the caller)
  std::string restore_cost = "measured";  // "measured" or "model X GB/s"
  // Cold restores charged at admission (not prefetched): their count, logical bytes and the
  // seconds charged for the restore itself (no transfer).
  uint64_t cold_restores_charged = 0;
  uint64_t cold_restore_charged_logical_bytes = 0;
  double cold_restore_charged_seconds = 0;
  // The restore probe behind a measured cost at bytes scale > 1 (samples empty when none ran):
  // each sample's real restore time at full size next to what the replay would charge for it.
  struct ProbeSample {
    uint64_t bytes = 0;
    double restore_s = 0, charged_s = 0;
  };
  std::vector<ProbeSample> restore_probe;
  double restore_probe_bytes_per_second = 0;
  double restore_probe_fixed_s = 0;
  std::string policy;  // set by the caller
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
