#include "report.h"

#include <cstdio>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include <tier/host/format.h>

namespace tier {
namespace {

std::string Fixed(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

}  // namespace

nlohmann::json ReportJson(const ReplayReport& r) {
  const PlannerTotals& t = r.totals;
  return {{"workload", r.workload},
          {"provider", r.provider},
          {"requests", r.requests},
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
          {"spills", t.spills},
          {"spill_failures", t.spill_failures},
          {"evictions", t.evictions},
          {"bytes_spilled_logical", t.spilled_logical_bytes},
          {"bytes_spilled_stored", t.spilled_stored_bytes},
          {"bytes_restored_logical", t.restored_logical_bytes},
          {"bytes_restored_stored", t.restored_stored_bytes},
          {"peak_cold_bytes_logical", t.peak_cold_logical_bytes},
          {"peak_cold_bytes_stored", t.peak_cold_stored_bytes},
          {"readopted_checkpoints", t.readopted},
          {"cold_restores_of_readopted", t.readopted_hits},
          {"verified_restores", t.verified_restores},
          {"restore_exact", r.restore_exact},
          {"provider_calls_outside_admission", r.provider_calls_outside_admission},
          {"virtual_seconds", r.virtual_seconds},
          {"wall_seconds", r.wall_seconds}};
}

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
                                  Fixed(x.ttft_p50_s, 2),
                                  Fixed(x.ttft_p99_s, 2),
                                  FormatBytes(x.totals.spilled_logical_bytes),
                                  FormatBytes(x.totals.restored_logical_bytes),
                                  FormatBytes(x.totals.peak_cold_logical_bytes),
                                  count(x.totals.readopted),
                                  x.restore_exact ? "true" : "FALSE"};
    return v;
  };
  const std::vector<std::string> names = {"requests",
                                          "device hits",
                                          "host restores",
                                          "cold restores",
                                          "root prefills",
                                          "prefill s (run)",
                                          "restore+transfer s",
                                          "prefill s saved",
                                          "TTFT p50 s",
                                          "TTFT p99 s",
                                          "spilled (logical)",
                                          "restored (logical)",
                                          "peak cold (logical)",
                                          "re-adopted at start",
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
  if (c != nullptr) {
    out << "\nThe " << r.provider << " tier saved "
        << Fixed(r.prefill_seconds_saved - c->prefill_seconds_saved, 1)
        << " s of prefill over the same workload without a cold tier ("
        << Fixed(r.prefill_seconds_saved, 1) << " s vs " << Fixed(c->prefill_seconds_saved, 1)
        << " s saved), with " << r.cold_restores << " cold restores.\n";
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

}  // namespace tier
