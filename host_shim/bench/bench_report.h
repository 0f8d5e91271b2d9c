// bench_report.h -- what a tier-bench run means: rates (GB/s of logical bytes, median over
// rounds), latencies (p50/p99 over rounds), the ratios against fio and the naive peer (median of
// the per-round ratios: each round's contestants ran back to back on the same disk), auto vs raw
// compression, memory against its bound, and the verdict on each target. Printed as a table and
// written as JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "bench_result.h"

namespace tier::bench {

// The targets.
inline constexpr double kMinRestoreVsFio = 0.9;
inline constexpr double kMinSpillVsFio = 0.9;
inline constexpr double kMinRestoreVsRadosBench = 0.9;   // rados bench seq
inline constexpr double kMinSpillVsRadosBench = 0.9;     // rados bench write
inline constexpr double kMaxAutoRestoreSlowdown = 1.05;  // auto restore time / raw restore time
inline constexpr uint64_t kMemoryAllowanceBytes = 64ull << 20;  // over the staging bound

struct CompressionSummary {
  DataKind kind = DataKind::kBf16;
  std::optional<double> restore_time_auto_vs_raw;  // median of per-round time ratios
  std::optional<double> spill_time_auto_vs_raw;
  uint64_t stored_auto = 0, stored_raw = 0;  // the last round's spill
  double capacity_gain = 0;                  // stored raw / stored auto (last round)
  std::vector<double> auto_stored_ratio;     // stored / logical of auto's spill, per round
  std::vector<double> auto_restore_ratio;    // auto's restore time / raw's, per round
  // The worst auto/raw restore time ratio among the rounds where auto compressed (the target's
  // test: in the other rounds auto took the same path as off, and the ratio is only noise).
  std::optional<double> worst_compressed_round;
  // compression=zstd (--with-zstd), else unset / 0:
  std::optional<double> restore_time_zstd_vs_raw, spill_time_zstd_vs_raw;
  double zstd_capacity_gain = 0;
};

struct Summary {
  std::optional<double> restore_vs_fio, spill_vs_fio, restore_vs_naive, spill_vs_naive;
  std::optional<double> restore_vs_rados_bench, spill_vs_rados_bench;
  std::vector<CompressionSummary> compression;
  uint64_t provider_peak_bytes = 0;  // the largest probe
  uint64_t restores_checked = 0, restores_exact = 0;
};

Summary Summarize(const BenchResult& result);

// The human-readable table and verdicts.
void PrintReport(const BenchResult& result, const Summary& summary, std::ostream& out);

// The JSON document (--json): raw per-round figures, the derived figures and the ratio fields
// restore_vs_fio, spill_vs_fio, restore_vs_naive, spill_vs_naive, restore_vs_rados_bench and
// spill_vs_rados_bench at the top level (null when the peer was not measured).
nlohmann::json ReportJson(const BenchResult& result, const Summary& summary);

}  // namespace tier::bench
