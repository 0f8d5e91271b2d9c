// metrics.h -- the provider's metric series (abi/tier_metrics.h families), created once at open
// through the host services. Every method is thread-safe and a no-op when the host gave no
// metrics (NULL handles are accepted by the host API).
#pragma once

#include <array>
#include <cstdint>

#include "tier_metrics.h"
#include "tier_provider.h"

namespace tier::rados {

enum class DataLossWhere { kRestore = 0, kOpen = 1 };

class RadosMetrics {
 public:
  // Registers every family and series. `host` must outlive this object. Any thread, once.
  explicit RadosMetrics(const tier_host_services* host);

  void Spill(tier_status result);
  void Restore(tier_status result);
  void Remove(tier_status result);
  void Decision(tier_decision decision, tier_reason reason);
  void SpillBytes(uint64_t logical_bytes, uint64_t stored_bytes);
  void RestoreBytes(uint64_t logical_bytes, uint64_t stored_bytes);
  void SpillSeconds(double seconds);
  void RestoreSeconds(double seconds);
  void SetUsage(uint64_t used_bytes, uint64_t capacity_bytes, uint64_t entries);
  void DataLoss(DataLossWhere where);
  // Sets the io_path gauge: 1 for `path` (a TIER_IO_PATH_* value), 0 for the others.
  void SetIoPath(const char* path);

 private:
  tier_metric* Series(tier_metric_family* family, const char* const* values, uint32_t count);
  void Add(tier_metric* m, double v);
  void Set(tier_metric* m, double v);

  const tier_host_services* host_;
  bool has_metrics_ = false;
  std::array<tier_metric*, TIER_STATUS_COUNT> spills_{}, restores_{}, removes_{};
  std::array<tier_metric*, 2 * TIER_REASON_COUNT> decisions_{};  // [decision-1][reason]
  tier_metric *spill_logical_ = nullptr, *spill_stored_ = nullptr;
  tier_metric *restore_logical_ = nullptr, *restore_stored_ = nullptr;
  tier_metric *spill_seconds_ = nullptr, *restore_seconds_ = nullptr;
  tier_metric *used_ = nullptr, *capacity_ = nullptr, *entries_ = nullptr;
  std::array<tier_metric*, 2> data_loss_{};
  std::array<tier_metric*, 1> io_path_{};
};

}  // namespace tier::rados
