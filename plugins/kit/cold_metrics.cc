#include <tier/provider/cold_metrics.h>

#include <cstring>
#include <utility>

#include <tier/check.h>

namespace tier::provider {

ColdMetrics::ColdMetrics(const tier_host_services* host, const char* provider,
                         std::vector<const char*> io_paths)
    : host_(host), provider_(provider), io_paths_(std::move(io_paths)) {
  TIER_CHECK(provider_ != nullptr && !io_paths_.empty());
  io_path_.assign(io_paths_.size(), nullptr);
  has_metrics_ = TIER_HAS_SLOT(host, tier_host_services, metric_family) &&
                 TIER_HAS_SLOT(host, tier_host_services, metric) &&
                 TIER_HAS_SLOT(host, tier_host_services, metric_add) &&
                 TIER_HAS_SLOT(host, tier_host_services, metric_set) &&
                 TIER_HAS_SLOT(host, tier_host_services, metric_observe);
  if (!has_metrics_) return;
  void* ctx = host->host_context;
  auto family = [&](tier_metric_type type, const char* name, const char* help,
                    std::initializer_list<const char*> labels, const double* buckets = nullptr,
                    uint32_t bucket_count = 0) {
    return host->metric_family(ctx, type, name, help, labels.begin(),
                               static_cast<uint32_t>(labels.size()), buckets, bucket_count);
  };
  const double buckets[] = TIER_DURATION_BUCKETS_SECONDS;

  tier_metric_family* spills = family(TIER_METRIC_COUNTER, TIER_METRIC_COLD_SPILLS,
                                      "Cold-tier spills by result", {"provider", "result"});
  tier_metric_family* restores = family(TIER_METRIC_COUNTER, TIER_METRIC_COLD_RESTORES,
                                        "Cold-tier restores by result", {"provider", "result"});
  tier_metric_family* removes = family(TIER_METRIC_COUNTER, TIER_METRIC_COLD_REMOVES,
                                       "Cold-tier removes by result", {"provider", "result"});
  for (int s = 0; s < TIER_STATUS_COUNT; ++s) {
    const char* values[2] = {provider_, tier_status_name(s)};
    spills_[s] = Series(spills, values, 2);
    restores_[s] = Series(restores, values, 2);
    removes_[s] = Series(removes, values, 2);
  }
  tier_metric_family* decisions =
      family(TIER_METRIC_COUNTER, TIER_METRIC_COLD_DECISIONS, "Cold-tier restore decisions",
             {"provider", "decision", "reason"});
  for (uint32_t d = TIER_DECISION_RESTORE; d <= TIER_DECISION_SKIP_TO_ROOT; ++d) {
    for (uint32_t r = 0; r < TIER_REASON_COUNT; ++r) {
      // Only pairs that occur: restore/cheaper and skip_to_root/{miss,cost,corrupt,busy}.
      if ((d == TIER_DECISION_RESTORE) != (r == TIER_REASON_CHEAPER)) continue;
      const char* values[3] = {provider_, tier_decision_name(d), tier_reason_name(r)};
      decisions_[(d - 1) * TIER_REASON_COUNT + r] = Series(decisions, values, 3);
    }
  }
  tier_metric_family* spill_bytes = family(TIER_METRIC_COUNTER, TIER_METRIC_COLD_SPILL_BYTES,
                                           "Bytes of completed spills", {"provider", "kind"});
  tier_metric_family* restore_bytes = family(TIER_METRIC_COUNTER, TIER_METRIC_COLD_RESTORE_BYTES,
                                             "Bytes of completed restores", {"provider", "kind"});
  const char* logical[2] = {provider_, "logical"};
  const char* stored[2] = {provider_, "stored"};
  spill_logical_ = Series(spill_bytes, logical, 2);
  spill_stored_ = Series(spill_bytes, stored, 2);
  restore_logical_ = Series(restore_bytes, logical, 2);
  restore_stored_ = Series(restore_bytes, stored, 2);
  const char* by_provider[1] = {provider_};
  spill_seconds_ = Series(
      family(TIER_METRIC_HISTOGRAM, TIER_METRIC_COLD_SPILL_SECONDS, "Duration of successful spills",
             {"provider"}, buckets, TIER_DURATION_BUCKET_COUNT),
      by_provider, 1);
  restore_seconds_ = Series(
      family(TIER_METRIC_HISTOGRAM, TIER_METRIC_COLD_RESTORE_SECONDS,
             "Duration of successful restores", {"provider"}, buckets, TIER_DURATION_BUCKET_COUNT),
      by_provider, 1);
  used_ =
      Series(family(TIER_METRIC_GAUGE, TIER_METRIC_COLD_USED_BYTES,
                    "Bytes used in the cold tier, headers and alignment included", {"provider"}),
             by_provider, 1);
  capacity_ = Series(family(TIER_METRIC_GAUGE, TIER_METRIC_COLD_CAPACITY_BYTES,
                            "Cold-tier byte budget", {"provider"}),
                     by_provider, 1);
  entries_ = Series(family(TIER_METRIC_GAUGE, TIER_METRIC_COLD_ENTRIES,
                           "Complete, visible cold checkpoints", {"provider"}),
                    by_provider, 1);
  tier_metric_family* loss =
      family(TIER_METRIC_COUNTER, TIER_METRIC_COLD_DATA_LOSS,
             "Cold checkpoints that failed verification", {"provider", "where"});
  const char* at_restore[2] = {provider_, "restore"};
  const char* at_open[2] = {provider_, "open"};
  data_loss_[0] = Series(loss, at_restore, 2);
  data_loss_[1] = Series(loss, at_open, 2);
  tier_metric_family* io_path = family(TIER_METRIC_GAUGE, TIER_METRIC_COLD_IO_PATH,
                                       "1 for the cold-tier I/O path in use", {"provider", "path"});
  for (size_t i = 0; i < io_path_.size(); ++i) {
    const char* values[2] = {provider_, io_paths_[i]};
    io_path_[i] = Series(io_path, values, 2);
  }
}

tier_metric* ColdMetrics::Series(tier_metric_family* family, const char* const* values,
                                 uint32_t count) {
  if (!has_metrics_ || family == nullptr) return nullptr;
  return host_->metric(host_->host_context, family, values, count);
}

void ColdMetrics::Add(tier_metric* m, double delta) {
  if (has_metrics_ && m != nullptr) host_->metric_add(host_->host_context, m, delta);
}

void ColdMetrics::Set(tier_metric* m, double value) {
  if (has_metrics_ && m != nullptr) host_->metric_set(host_->host_context, m, value);
}

void ColdMetrics::Spill(tier_status r) {
  if (r >= 0 && r < TIER_STATUS_COUNT) Add(spills_[r], 1);
}
void ColdMetrics::Restore(tier_status r) {
  if (r >= 0 && r < TIER_STATUS_COUNT) Add(restores_[r], 1);
}
void ColdMetrics::Remove(tier_status r) {
  if (r >= 0 && r < TIER_STATUS_COUNT) Add(removes_[r], 1);
}
void ColdMetrics::Decision(tier_decision d, tier_reason r) {
  if (d >= 1 && d <= 2 && r < TIER_REASON_COUNT)
    Add(decisions_[(d - 1) * TIER_REASON_COUNT + r], 1);
}
void ColdMetrics::SpillBytes(uint64_t logical_bytes, uint64_t stored_bytes) {
  Add(spill_logical_, static_cast<double>(logical_bytes));
  Add(spill_stored_, static_cast<double>(stored_bytes));
}
void ColdMetrics::RestoreBytes(uint64_t logical_bytes, uint64_t stored_bytes) {
  Add(restore_logical_, static_cast<double>(logical_bytes));
  Add(restore_stored_, static_cast<double>(stored_bytes));
}
void ColdMetrics::SpillSeconds(double seconds) {
  if (has_metrics_ && spill_seconds_ != nullptr)
    host_->metric_observe(host_->host_context, spill_seconds_, seconds);
}
void ColdMetrics::RestoreSeconds(double seconds) {
  if (has_metrics_ && restore_seconds_ != nullptr)
    host_->metric_observe(host_->host_context, restore_seconds_, seconds);
}
void ColdMetrics::SetUsage(uint64_t used_bytes, uint64_t capacity_bytes, uint64_t entries) {
  Set(used_, static_cast<double>(used_bytes));
  Set(capacity_, static_cast<double>(capacity_bytes));
  Set(entries_, static_cast<double>(entries));
}
void ColdMetrics::DataLoss(DataLossWhere where) {
  Add(data_loss_[static_cast<int>(where)], 1);
}
void ColdMetrics::SetIoPath(const char* path) {
  for (size_t i = 0; i < io_path_.size(); ++i) {
    Set(io_path_[i], std::strcmp(io_paths_[i], path) == 0 ? 1.0 : 0.0);
  }
}

std::vector<tier_metric*> ColdMetrics::CounterSeries(const char* name, const char* help,
                                                     const char* label,
                                                     const std::vector<const char*>& values) {
  std::vector<tier_metric*> series(values.size(), nullptr);
  if (!has_metrics_) return series;
  const char* labels[2] = {"provider", label};
  tier_metric_family* family = host_->metric_family(host_->host_context, TIER_METRIC_COUNTER, name,
                                                    help, labels, 2, nullptr, 0);
  for (size_t i = 0; i < values.size(); ++i) {
    const char* pair[2] = {provider_, values[i]};
    series[i] = Series(family, pair, 2);
  }
  return series;
}

}  // namespace tier::provider
