// fake_host.h -- a tier_host_services test double: records log lines and metric values in memory
// so tests can assert on them. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tier_provider.h"

namespace tier::disk::test {

class FakeHost {
 public:
  FakeHost();
  const tier_host_services* services() const { return &services_; }

  // Value of the series "family{v1,v2,...}" (label values in family order, comma-separated);
  // histograms report their observation count. 0 when absent.
  double Value(const std::string& family, const std::string& labels) const;
  std::vector<std::string> Logs() const;
  bool LogContains(const std::string& needle) const;
  size_t CountLogs(const std::string& needle) const;  // lines containing `needle`
  // The monotonic clock the provider sees: stopped at `ns` (not 0), moved by Advance, or the real
  // one again after Freeze(0).
  void FreezeClock(uint64_t ns) { frozen_ns_.store(ns); }
  void AdvanceClock(uint64_t ns) { frozen_ns_.fetch_add(ns); }

 private:
  struct Family {
    tier_metric_type type;
    std::string name;
    uint32_t label_count;
  };
  struct Series {
    Family* family;
    std::string labels;
    double value = 0;
    uint64_t observations = 0;
  };
  static void Log(void* ctx, tier_log_level level, const char* message);
  static tier_metric_family* MetricFamily(void* ctx, tier_metric_type type, const char* name,
                                          const char* help, const char* const* label_names,
                                          uint32_t label_count, const double* buckets,
                                          uint32_t bucket_count);
  static tier_metric* Metric(void* ctx, tier_metric_family* family, const char* const* values,
                             uint32_t count);
  static void Add(void* ctx, tier_metric* metric, double delta);
  static void Set(void* ctx, tier_metric* metric, double value);
  static void Observe(void* ctx, tier_metric* metric, double value);
  static uint64_t Now(void* ctx);

  tier_host_services services_{};
  mutable std::mutex mu_;
  std::map<std::string, Family*> families_;
  std::map<std::string, Series*> series_;
  std::vector<std::unique_ptr<Family>> family_store_;
  std::vector<std::unique_ptr<Series>> series_store_;
  std::vector<std::string> logs_;
  std::atomic<uint64_t> frozen_ns_{0};
};

}  // namespace tier::disk::test
