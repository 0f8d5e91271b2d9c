// host_services.h -- the tier_host_services table the host lends to providers: log, metrics, clock.
#pragma once

#include <tier/host/metrics_registry.h>
#include "tier_provider.h"

namespace tier {

// Binds the ABI's host-services table to this process's log and a MetricsRegistry. The registry
// must outlive this object, and this object every provider instance opened with table().
class HostServices {
 public:
  explicit HostServices(MetricsRegistry* metrics);
  HostServices(const HostServices&) = delete;
  HostServices& operator=(const HostServices&) = delete;

  const tier_host_services* table() const { return &table_; }
  MetricsRegistry* metrics() const { return metrics_; }

 private:
  MetricsRegistry* metrics_;
  tier_host_services table_;
};

// Nanoseconds on CLOCK_MONOTONIC. Any thread.
uint64_t MonotonicNs();

}  // namespace tier
