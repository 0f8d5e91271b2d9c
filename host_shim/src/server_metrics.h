// server_metrics.h -- the server's own metric families (the providers register theirs through
// the host services). Names follow Prometheus practice: one tier_ prefix, base units, _total on
// counters, label values from small fixed sets.
#pragma once

#include <string>

#include "catalog.h"
#include <tier/host/metrics_registry.h>

namespace tier {

// Why an admission prefilled from the root instead of reusing a checkpoint.
enum class RootReason {
  kNoCheckpoint,   // the catalog holds no checkpoint that is a prefix of the request
  kMiss,           // the provider no longer has the cold checkpoint
  kCost,           // restoring from cold would cost at least the predicted prefill
  kCorrupt,        // the cold checkpoint failed verification (data loss)
  kBusy,           // the provider could not take the restore now
  kNoRoom,         // no host memory to stage the restore (everything pinned)
  kStalePlan,      // the catalog changed between the plan and its execution
  kRestoreFailed,  // an I/O or other error during the restore
};
constexpr int kRootReasonCount = 8;
const char* RootReasonName(RootReason reason);

enum class Outcome { kDeviceHit, kHostRestore, kColdRestore, kRootPrefill };
constexpr int kOutcomeCount = 4;
const char* OutcomeName(Outcome outcome);

// Handles on every series the server updates; created once, cheap to update. Not thread-safe by
// itself (the planner is single-threaded); the underlying prometheus metrics are.
class ServerMetrics {
 public:
  explicit ServerMetrics(MetricsRegistry* registry);

  void Admission(Outcome outcome);
  void RootPrefill(RootReason reason);
  void Transition(const char* from, const char* to);  // "none|device|host|cold" -> "...|evicted"
  void PrefillSavedSeconds(double seconds);
  void SpillFailure(const char* action);  // "kept_host" | "dropped"
  void RestoreVerification(bool exact);
  void Readopted(uint64_t entries);
  void Ttft(double seconds);
  void SetCatalog(const Catalog& catalog, uint64_t cold_capacity_bytes);
  void SetDevicePath(const std::string& path);  // "cuda" or "cpu"

 private:
  MetricsRegistry* registry_;
  Metric* admissions_[kOutcomeCount];
  Metric* root_prefills_[kRootReasonCount];
  MetricFamily* transitions_;
  Metric* prefill_saved_;
  MetricFamily* spill_failures_;
  Metric* restores_verified_[2];
  Metric* readopted_;
  Metric* ttft_;
  Metric* entries_[3];
  Metric* bytes_[3];
  Metric* cold_capacity_;
  MetricFamily* device_path_;
};

}  // namespace tier
