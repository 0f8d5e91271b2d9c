// cold_metrics.h -- a provider's series of the shared cold-tier families (abi/tier_metrics.h),
// labelled with its name, created once at open through the host services. Every method is
// thread-safe and a no-op when the host gave no metrics (NULL handles are accepted by the host
// API). A provider with families of its own registers them with CounterSeries().
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tier_metrics.h"
#include "tier_provider.h"

namespace tier::provider {

enum class DataLossWhere { kRestore = 0, kOpen = 1 };

class ColdMetrics {
 public:
  // Registers every family and series for `provider` (the label value), with one io_path series
  // per entry of `io_paths` (TIER_IO_PATH_* values, static strings). `host` must outlive this
  // object. Any thread, once.
  ColdMetrics(const tier_host_services* host, const char* provider,
              std::vector<const char*> io_paths);

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
  // Sets the io_path gauge: 1 for `path` (one of the io_paths given), 0 for the others.
  void SetIoPath(const char* path);

  // A counter family of the provider's own, {provider, `label`}, with one series per value (in
  // order; nullptr entries without metrics). Any thread.
  std::vector<tier_metric*> CounterSeries(const char* name, const char* help, const char* label,
                                          const std::vector<const char*>& values);
  void Add(tier_metric* m, double delta);

 private:
  tier_metric* Series(tier_metric_family* family, const char* const* values, uint32_t count);
  void Set(tier_metric* m, double value);

  const tier_host_services* host_;
  const char* provider_;
  bool has_metrics_ = false;
  std::array<tier_metric*, TIER_STATUS_COUNT> spills_{}, restores_{}, removes_{};
  std::array<tier_metric*, 2 * TIER_REASON_COUNT> decisions_{};  // [decision-1][reason]
  tier_metric *spill_logical_ = nullptr, *spill_stored_ = nullptr;
  tier_metric *restore_logical_ = nullptr, *restore_stored_ = nullptr;
  tier_metric *spill_seconds_ = nullptr, *restore_seconds_ = nullptr;
  tier_metric *used_ = nullptr, *capacity_ = nullptr, *entries_ = nullptr;
  std::array<tier_metric*, 2> data_loss_{};
  std::vector<const char*> io_paths_;
  std::vector<tier_metric*> io_path_;
};

}  // namespace tier::provider
