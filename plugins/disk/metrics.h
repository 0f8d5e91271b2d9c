// metrics.h -- the disk provider's metric series: the shared cold-tier families
// (tier::provider::ColdMetrics) plus its quarantine counter. Thread-safe; a no-op when the host
// gave no metrics.
#pragma once

#include <tier/provider/cold_metrics.h>

#include <vector>

#include "compression_policy.h"

namespace tier::disk {

using provider::DataLossWhere;

inline constexpr const char* kCodecDecisionsMetric = TIER_METRIC_COLD_CODEC_DECISIONS;
// counter {provider, why=missing|unusable}: directories of the dirs= list that were missing at
// open (created empty: whatever they held is a miss) or could not be used (skipped, their
// checkpoints misses until a restart finds them usable).
inline constexpr const char* kDirsUnavailableMetric = "tier_cold_dirs_unavailable_total";
enum class DirProblem { kMissing = 0, kUnusable = 1, kFailing = 2 };

// Why a file was moved into quarantine/ (or removed where it could not be moved): it failed
// verification; something that is not the checkpoint stood under a checkpoint's name and blocked
// its spill; the file was not written by this server as its owner with mode 0600.
enum class QuarantineReason { kCorrupt = 0, kStuckName = 1, kNotOwned = 2 };
inline constexpr int kQuarantineReasons = 3;
const char* QuarantineReasonName(QuarantineReason reason);  // corrupt, stuck_name, not_owned

// counter {provider, reason=corrupt|stuck_name|not_owned}: files set aside into quarantine/. The
// disk provider's own family (not in abi/tier_metrics.h).
class DiskMetrics : public provider::ColdMetrics {
 public:
  // Registers every family and series. `host` must outlive this object. Any thread, once.
  explicit DiskMetrics(const tier_host_services* host);
  void Quarantined(QuarantineReason reason);
  // counter {provider, decision}: segments spilled, by why they got their codec
  // (tier_cold_codec_decisions_total; CodecDecisionName spells the values).
  void CodecDecided(CodecDecision decision);
  void DirUnavailable(DirProblem problem);

 private:
  std::vector<tier_metric*> quarantined_;
  std::vector<tier_metric*> codec_decisions_;
  std::vector<tier_metric*> dirs_unavailable_;
};

}  // namespace tier::disk
