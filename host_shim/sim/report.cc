#include "report.h"

#include <cstdio>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include <tier/host/format.h>

namespace tier::sim {
namespace {

std::string Fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

}  // namespace

namespace {

nlohmann::json FiguresJson(const ReturningFigures& f) {
  return {{"requests", f.requests},
          {"ttft_p50_s", f.ttft_p50_s},
          {"ttft_p99_s", f.ttft_p99_s},
          {"queue_p50_s", f.queue_p50_s},
          {"queue_p99_s", f.queue_p99_s},
          {"restore_p50_s", f.restore_p50_s},
          {"prefill_p50_s", f.prefill_p50_s},
          {"root_prefill_p50_s", f.root_prefill_p50_s},
          {"root_prefill_p99_s", f.root_prefill_p99_s},
          {"parked_tokens_p50", f.parked_tokens_p50},
          {"ttft_mean_s", f.ttft_mean_s},
          {"queue_mean_s", f.queue_mean_s},
          {"restore_mean_s", f.restore_mean_s},
          {"prefill_mean_s", f.prefill_mean_s}};
}

nlohmann::json ReturningJson(const ReplayReport& r) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [kind, f] : r.returning) out[kind] = FiguresJson(f);
  return out;
}

nlohmann::json RestoreProbeJson(const ReplayReport& r) {
  nlohmann::json samples = nlohmann::json::array();
  for (const ReplayReport::ProbeSample& p : r.restore_probe) {
    samples.push_back({{"bytes", p.bytes}, {"restore_s", p.restore_s}, {"charged_s", p.charged_s}});
  }
  return {{"samples", samples},
          {"bytes_per_second", r.restore_probe_bytes_per_second},
          {"fixed_s", r.restore_probe_fixed_s}};
}

nlohmann::json StabilityJson(const ReplayReport& r) {
  return {{"offered_utilization", r.offered_utilization},
          {"lane_utilization", r.lane_utilization},
          {"queue_first_quarter_s", r.queue_first_quarter_s},
          {"queue_last_quarter_s", r.queue_last_quarter_s},
          {"queue_grew", r.queue_grew},
          {"unstable", r.unstable},
          {"reason", r.unstable_reason},
          {"trace_time_scale", r.trace_time_scale},
          {"trace_time_scale_how", r.trace_time_scale_how}};
}

}  // namespace

double ColdBytesPerSavedSecond(const ReplayReport& r) {
  return r.prefill_seconds_saved > 0
             ? static_cast<double>(r.host.cold_write_logical_bytes) / r.prefill_seconds_saved
             : 0;
}

nlohmann::json ReportJson(const ReplayReport& r) {
  const HostStats& h = r.host;
  nlohmann::json doc = {
      {"workload", r.workload},
      {"provider", r.provider},
      {"requests", r.requests},
      {"completed", r.completed},
      {"interrupted", r.interrupted},
      {"device_hits", r.device_hits},
      {"host_restores", r.host_restores},
      {"cold_restores", r.cold_restores},
      {"root_prefills", r.root_prefills},
      {"root_prefills_by_reason", r.root_prefills_by_reason},
      {"skip_to_root", r.skip_to_root},
      {"checkpoints_sealed", r.checkpoints_sealed},
      {"shared_prefixes_published", r.shared_prefixes_published},
      {"prefill_seconds", r.prefill_seconds},
      {"prefill_seconds_no_reuse", r.prefill_seconds_no_reuse},
      {"admission_seconds", r.admission_seconds},
      {"prefill_seconds_saved", r.prefill_seconds_saved},
      {"ttft_p50_s", r.ttft_p50_s},
      {"ttft_p99_s", r.ttft_p99_s},
      {"pending_admissions", r.pending_admissions},
      {"max_pending_at_once", r.max_pending_at_once},
      {"spills", h.spills},
      {"spill_failures", h.spill_failures},
      {"evictions", h.evictions},
      {"bytes_spilled_logical", h.spilled_logical_bytes},
      {"bytes_spilled_stored", h.spilled_stored_bytes},
      {"bytes_restored_logical", h.restored_logical_bytes},
      {"bytes_restored_stored", h.restored_stored_bytes},
      {"cold_write_bytes_stored", h.cold_write_bytes},
      {"peak_cold_bytes_logical", h.peak_cold_logical_bytes},
      {"peak_cold_bytes_stored", h.peak_cold_stored_bytes},
      {"peak_device_bytes_logical", h.peak_device_logical_bytes},
      {"peak_host_bytes_logical", h.peak_host_logical_bytes},
      {"readopted_checkpoints", h.readopted},
      {"cold_restores_of_readopted", h.readopted_hits},
      {"cold_restores_of_other_servers", h.remote_hits},
      {"prefetch_hints", r.prefetch_hints},
      {"prefetches", h.prefetches},
      {"prefetches_used", h.prefetches_used},
      {"prefetches_wasted", h.prefetches_wasted},
      {"prefetch_hidden_seconds", r.prefetch_hidden_seconds},
      {"provider_timeouts", h.timeouts},
      {"verified_restores", r.verified_restores},
      {"mismatched_restores", r.mismatched_restores},
      {"restore_exact", r.restore_exact},
      {"provider_calls_outside_admission", r.provider_calls_outside_admission},
      {"clock", r.clock},
      {"tier_calls", r.tier_calls},
      {"blocked_tier_calls", r.blocked_tier_calls},
      {"preempted_tier_calls", r.preempted_tier_calls},
      {"scheduler_cpu_max_ms", r.scheduler_cpu_max_ms},
      {"scheduler_stall_max_unpreempted_ms", r.scheduler_stall_max_unpreempted_ms},
      {"scheduler_stall_max_ms", r.scheduler_stall_max_ms},
      {"scheduler_stall_p99_ms", r.scheduler_stall_p99_ms},
      {"lane_steps_during_restores", r.lane_steps_during_restores},
      {"virtual_seconds", r.virtual_seconds},
      {"wall_seconds", r.wall_seconds}};
  doc["policy"] = r.policy;
  doc["restore_cost"] = r.restore_cost;
  doc["cold_restores_charged"] = r.cold_restores_charged;
  doc["cold_restore_charged_bytes_logical"] = r.cold_restore_charged_logical_bytes;
  doc["cold_restore_charged_seconds"] = r.cold_restore_charged_seconds;
  if (!r.restore_probe.empty()) doc["restore_probe"] = RestoreProbeJson(r);
  doc["prefill_saved_share"] = r.prefill_saved_share;
  doc["queue_p50_s"] = r.queue_p50_s;
  doc["queue_p99_s"] = r.queue_p99_s;
  doc["returning"] = ReturningJson(r);
  doc["returning_from_cold"] = FiguresJson(r.returning_from_cold);
  doc["stability"] = StabilityJson(r);
  doc["unstable"] = r.unstable;
  doc["cold_write_bytes_logical"] = h.cold_write_logical_bytes;
  doc["cold_write_bytes_per_saved_prefill_second"] = ColdBytesPerSavedSecond(r);
  doc["cold_write_parent_kv_bytes_logical"] = h.cold_write_parent_kv_logical_bytes;
  doc["cold_admission_refused_superseded"] = h.cold_admission_superseded;
  doc["cold_admission_refused_not_worth_restore"] = h.cold_admission_not_worth;
  doc["superseded_checkpoints"] = h.superseded_checkpoints;
  doc["value_half_life_s"] = h.value_half_life_s;
  doc["value_superseded_weight"] = h.value_superseded_weight;
  return doc;
}

namespace {

void PrintReturning(std::ostream& out, const ReplayReport& r) {
  if (r.returning.empty()) return;
  out << "returning sessions (" << r.provider
      << "; a prompt that extends a checkpoint an earlier request parked; mean TTFT = queue + "
         "restore + prefill):\n";
  const std::pair<const char*, const char*> kinds[] = {{"device", "still on Device"},
                                                       {"host", "restored from Host"},
                                                       {"cold_prefetched", "prefetched from cold"},
                                                       {"cold", "restored from cold"},
                                                       {"root", "could not resume (root)"}};
  for (const auto& [kind, label] : kinds) {
    auto it = r.returning.find(kind);
    if (it == r.returning.end()) continue;
    const ReturningFigures& f = it->second;
    out << "  " << std::left << std::setw(24) << label << std::right << std::setw(5) << f.requests
        << " requests: TTFT p50 " << Fixed(f.ttft_p50_s, 2) << " s, p99 " << Fixed(f.ttft_p99_s, 2)
        << " s, instead of " << Fixed(f.root_prefill_p50_s, 1) << " s root prefill (p50; "
        << static_cast<uint64_t>(f.parked_tokens_p50) << " tokens parked); mean "
        << Fixed(f.ttft_mean_s, 2) << " s = queue " << Fixed(f.queue_mean_s, 2) << " + restore "
        << Fixed(f.restore_mean_s, 2) << " + prefill " << Fixed(f.prefill_mean_s, 2) << "\n";
  }
}

// The number a user asks for: a parked conversation came back from the cold tier; how long until
// its first token, against the root prefill it would have needed.
void PrintHeadline(std::ostream& out, const ReplayReport& r) {
  const ReturningFigures& f = r.returning_from_cold;
  if (f.requests == 0) return;
  auto prefetched = r.returning.find("cold_prefetched");
  const uint64_t early = prefetched == r.returning.end() ? 0 : prefetched->second.requests;
  out << "\nreturning sessions restored from cold (" << f.requests << " requests, " << early
      << " of them prefetched before they came; " << static_cast<uint64_t>(f.parked_tokens_p50)
      << " tokens parked at p50): TTFT p50 " << Fixed(f.ttft_p50_s, 2) << " s, p99 "
      << Fixed(f.ttft_p99_s, 2) << " s, instead of " << Fixed(f.root_prefill_p50_s, 1)
      << " s root prefill (p50); restore " << Fixed(f.restore_mean_s, 2) << " s and queueing "
      << Fixed(f.queue_mean_s, 2) << " s on average\n";
}

// The full-size restores the measured cost came from, next to what the replay charges for them.
void PrintRestoreProbe(std::ostream& out, const ReplayReport& r) {
  if (r.restore_probe.empty()) return;
  out << "restore probe (" << r.provider << ", full size): charging "
      << Fixed(r.restore_probe_bytes_per_second / 1e9, 2) << " GB/s + "
      << Fixed(r.restore_probe_fixed_s * 1e3, 2) << " ms per cold restore;";
  for (const ReplayReport::ProbeSample& p : r.restore_probe) {
    out << " " << Fixed(static_cast<double>(p.bytes) / (1 << 20), 0) << " MiB restored in "
        << Fixed(p.restore_s, 3) << " s, charged " << Fixed(p.charged_s, 3) << " s;";
  }
  out << " " << r.cold_restores_charged << " cold restores charged "
      << Fixed(r.cold_restore_charged_seconds, 2) << " s for "
      << Fixed(static_cast<double>(r.cold_restore_charged_logical_bytes) / 1e9, 2)
      << " GB (logical)\n";
}

void PrintStability(std::ostream& out, const ReplayReport& r) {
  out << "load (" << r.provider << "): offered utilization " << Fixed(r.offered_utilization, 2)
      << " of the lanes, lanes busy " << Fixed(100 * r.lane_utilization, 0) << "%, queueing p50 "
      << Fixed(r.queue_p50_s, 2) << " s, p99 " << Fixed(r.queue_p99_s, 2) << " s";
  if (r.trace_time_scale != 1 || !r.trace_time_scale_how.empty()) {
    out << ", trace time scale " << Fixed(r.trace_time_scale, 2);
    if (!r.trace_time_scale_how.empty()) out << " (" << r.trace_time_scale_how << ")";
  }
  out << (r.unstable ? "\nUNSTABLE (" + r.provider + "): " + r.unstable_reason +
                           "; the order of arrivals and seals is no longer the workload's, "
                           "compare runs at a stable scale (--trace-time-scale auto)\n"
                     : ": stable\n");
}

}  // namespace

void PrintReport(std::ostream& out, const ReplayReport& r, const ReplayReport* c) {
  struct Row {
    std::string name;
    std::string run;
    std::string other;
  };
  auto count = [](uint64_t v) { return std::to_string(v); };
  auto rows = [&](const ReplayReport& x) {
    std::vector<std::string> v = {count(x.requests),
                                  count(x.device_hits),
                                  count(x.host_restores),
                                  count(x.cold_restores),
                                  count(x.root_prefills),
                                  Fixed(x.prefill_seconds, 1),
                                  Fixed(x.admission_seconds, 1),
                                  Fixed(x.prefill_seconds_saved, 1),
                                  Fixed(100 * x.prefill_saved_share, 1) + "%",
                                  Fixed(x.ttft_p50_s, 2),
                                  Fixed(x.ttft_p99_s, 2),
                                  FormatBytes(x.host.spilled_logical_bytes),
                                  FormatBytes(x.host.restored_logical_bytes),
                                  FormatBytes(x.host.peak_cold_logical_bytes),
                                  count(x.host.readopted),
                                  x.restore_exact ? "true" : "FALSE"};
    return v;
  };
  const std::vector<std::string> names = {
      "requests",           "device hits",         "host restores",
      "cold restores",      "root prefills",       "prefill s (run)",
      "restore+transfer s", "prefill s saved",     "share of prefill saved",
      "TTFT p50 s",         "TTFT p99 s",          "spilled (logical)",
      "restored (logical)", "peak cold (logical)", "re-adopted at start",
      "restore exact"};
  const auto a = rows(r);
  const std::vector<std::string> b = c != nullptr ? rows(*c) : std::vector<std::string>();
  out << "\n"
      << std::left << std::setw(22) << ("workload " + r.workload) << std::right << std::setw(16)
      << r.provider;
  if (c != nullptr) out << std::setw(16) << c->provider;
  out << "\n";
  for (size_t i = 0; i < names.size(); ++i) {
    out << std::left << std::setw(22) << names[i] << std::right << std::setw(16) << a[i];
    if (c != nullptr) out << std::setw(16) << b[i];
    out << "\n";
  }
  if (!r.skip_to_root.empty()) {
    out << "skip-to-root (" << r.provider << "):";
    for (const auto& [reason, n] : r.skip_to_root) out << " " << reason << "=" << n;
    out << "\n";
  }
  if (r.host.prefetches > 0) {
    out << "prefetch (" << r.provider << "): " << r.host.prefetches
        << " cold restores started early, " << r.host.prefetches_used << " used, "
        << r.host.prefetches_wasted << " wasted, " << Fixed(r.prefetch_hidden_seconds, 1)
        << " s of restore time taken off requests\n";
  }
  PrintReturning(out, r);
  PrintRestoreProbe(out, r);
  PrintStability(out, r);
  if (c != nullptr) PrintStability(out, *c);
  out << "scheduler thread (" << r.provider << ", " << r.clock << " clock): " << r.tier_calls
      << " tier calls, longest " << Fixed(r.scheduler_stall_max_ms, 3) << " ms, p99 "
      << Fixed(r.scheduler_stall_p99_ms, 3) << " ms; most CPU in one call "
      << Fixed(r.scheduler_cpu_max_ms, 3) << " ms; " << r.blocked_tier_calls
      << " calls waited (gave up the CPU), " << r.preempted_tier_calls
      << " were preempted by other threads";
  if (r.clock == "wall") {
    out << ", " << r.lane_steps_during_restores << " lane steps while restores were pending";
  }
  out << "\n";
  if (r.interrupted) {
    out << "interrupted: " << r.completed << " of " << r.requests
        << " requests completed; the figures cover those only\n";
  }
  PrintHeadline(out, r);
  if (c != nullptr) {
    out << "\nThe " << r.provider << " tier saved "
        << Fixed(r.prefill_seconds_saved - c->prefill_seconds_saved, 1)
        << " s of prefill over the same workload without a cold tier ("
        << Fixed(r.prefill_seconds_saved, 1) << " s vs " << Fixed(c->prefill_seconds_saved, 1)
        << " s saved), with " << r.cold_restores << " cold restores and " << r.host.prefetches_used
        << " prefetched ones used.\n";
  }
}

Status WriteReportJson(const std::string& path, const ReplayReport& report,
                       const ReplayReport* compare) {
  nlohmann::json doc = ReportJson(report);
  if (compare != nullptr) {
    nlohmann::json both = doc;
    both["compare_null"] = ReportJson(*compare);
    doc = both;
  }
  return WriteReportText(path, doc.dump(2) + "\n");
}

}  // namespace tier::sim
