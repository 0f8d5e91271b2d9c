#include "metrics.h"

namespace tier::disk {

const char* QuarantineReasonName(QuarantineReason reason) {
  switch (reason) {
    case QuarantineReason::kCorrupt:
      return "corrupt";
    case QuarantineReason::kStuckName:
      return "stuck_name";
    case QuarantineReason::kNotOwned:
      return "not_owned";
  }
  return "?";
}

DiskMetrics::DiskMetrics(const tier_host_services* host)
    : ColdMetrics(host, "disk",
                  {TIER_IO_PATH_IO_URING_DIRECT, TIER_IO_PATH_IO_URING_BUFFERED,
                   TIER_IO_PATH_THREADS_DIRECT, TIER_IO_PATH_THREADS_BUFFERED, TIER_IO_PATH_NONE}) {
  std::vector<const char*> reasons;
  for (int r = 0; r < kQuarantineReasons; ++r) {
    reasons.push_back(QuarantineReasonName(static_cast<QuarantineReason>(r)));
  }
  quarantined_ =
      CounterSeries(TIER_METRIC_COLD_QUARANTINED,
                    "Cold-tier files moved into quarantine/: corrupt, a stuck name, not owned",
                    "reason", reasons);
  std::vector<const char*> decisions;
  for (int d = 0; d < kCodecDecisions; ++d) {
    decisions.push_back(CodecDecisionName(static_cast<CodecDecision>(d)));
  }
  codec_decisions_ =
      CounterSeries(kCodecDecisionsMetric,
                    "Cold-tier segments spilled, by why they got their codec (compressed or raw)",
                    "decision", decisions);
  dirs_unavailable_ =
      CounterSeries(kDirsUnavailableMetric,
                    "Cold-tier directories missing at open (created empty), unusable (skipped) "
                    "or failing (set aside from placement after I/O errors in a row)",
                    "why", {"missing", "unusable", "failing"});
}

void DiskMetrics::DirUnavailable(DirProblem problem) {
  Add(dirs_unavailable_[static_cast<size_t>(problem)], 1);
}

void DiskMetrics::CodecDecided(CodecDecision decision) {
  Add(codec_decisions_[static_cast<size_t>(decision)], 1);
}

void DiskMetrics::Quarantined(QuarantineReason reason) {
  Add(quarantined_[static_cast<size_t>(reason)], 1);
}

}  // namespace tier::disk
