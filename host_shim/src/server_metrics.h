// server_metrics.h -- the server's own metric families (the providers register theirs through
// the host services). Names follow Prometheus practice: one tier_ prefix, base units, _total on
// counters, label values from small fixed sets.
#pragma once

#include <string>

#include <tier/host/metrics_registry.h>
#include <tier/host/types.h>

#include "catalog.h"

namespace tier {

// Handles on every series the server updates; created once, cheap to update. Not thread-safe by
// itself (the Host is single-threaded); the underlying prometheus metrics are.
class ServerMetrics {
 public:
  explicit ServerMetrics(MetricsRegistry* registry);

  void Admission(Outcome outcome);
  void RootPrefill(RootReason reason);
  void Transition(const char* from, const char* to);  // "none|device|host|cold" -> "...|evicted"
  void SpillFailure(const char* action);              // "kept_host" | "dropped"
  void CloseFlush(const char* result, uint64_t checkpoints);  // "written" | "failed" | "left"
  void RestoreVerification(bool exact);
  void Readopted(uint64_t entries);
  // "issued", "used", "wasted"; the cold restore time a used prefetch took off its request.
  void Prefetch(const char* result);
  void PrefetchHiddenSeconds(double seconds);
  void SetCatalog(const Catalog& catalog, uint64_t cold_capacity_bytes);
  void SetDevicePath(const std::string& path);  // "cuda" or "cpu"

 private:
  MetricsRegistry* registry_;
  Metric* admissions_[kOutcomeCount];
  Metric* root_prefills_[kRootReasonCount];
  MetricFamily* transitions_;
  MetricFamily* spill_failures_;
  MetricFamily* close_flush_;
  Metric* restores_verified_[2];
  Metric* readopted_;
  Metric* prefetches_[3];
  Metric* prefetch_hidden_;
  Metric* entries_[3];
  Metric* bytes_[3];
  Metric* cold_capacity_;
  MetricFamily* device_path_;
};

}  // namespace tier
