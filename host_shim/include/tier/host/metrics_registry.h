// metrics_registry.h -- the host's one Prometheus registry, shared by the server and its providers.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <tier/status.h>
#include "tier_provider.h"

namespace prometheus {
class Registry;
}

// Host-side definitions of the ABI's opaque metric handles.
struct tier_metric {
  tier_metric_type type;
  void* impl;  // prometheus::Counter*, Gauge* or Histogram*, owned by the registry
  void Add(double delta);
  void Set(double value);
  void Observe(double value);
};

struct tier_metric_family {
  tier_metric_type type;
  std::string name;
  std::vector<std::string> label_names;
  std::vector<double> bucket_bounds;
  void* impl;  // prometheus::Family<T>*, owned by the registry
  std::map<std::vector<std::string>, std::unique_ptr<tier_metric>> series;  // guarded by registry
};

namespace tier {

using MetricFamily = tier_metric_family;
using Metric = tier_metric;

// Owns the registry and every family/series handle ever returned; handles stay valid for its
// lifetime. Every method is thread-safe.
class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Returns the family, creating it on first use. Fails (INVALID_ARGUMENT) on a malformed name or
  // label, or when `name` already exists with another type or other label names.
  Result<MetricFamily*> Family(tier_metric_type type, const std::string& name,
                               const std::string& help, const std::vector<std::string>& label_names,
                               const std::vector<double>& bucket_bounds = {});
  // Shorthands for the server's own families; they abort on a programming error (bad name).
  MetricFamily* Counter(const std::string& name, const std::string& help,
                        const std::vector<std::string>& label_names = {});
  MetricFamily* Gauge(const std::string& name, const std::string& help,
                      const std::vector<std::string>& label_names = {});
  MetricFamily* Histogram(const std::string& name, const std::string& help,
                          const std::vector<std::string>& label_names,
                          const std::vector<double>& bucket_bounds);

  // The series with these label values (created at zero); nullptr on a count mismatch.
  Metric* Series(MetricFamily* family, const std::vector<std::string>& label_values = {});

  // The Prometheus text exposition of everything registered.
  std::string ExpositionText() const;

 private:
  // The prometheus-cpp registry is not part of the integration API: only the library's own
  // /metrics endpoint (MetricsServer) reaches it.
  friend class MetricsServer;
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  std::shared_ptr<prometheus::Registry> registry_;
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<MetricFamily>> families_;  // guarded by mutex_
};

}  // namespace tier
