// host_services.h -- the tier_host_services table the host lends to providers: log, metrics, clock.
// TOOL-LEVEL: not part of the integration API (host_shim/README.md, "Headers"); for the tools and
// tests built on the library (tier-host, tier-bench, the tests). tier::Host (host.h) lends the
// services table itself.
#pragma once

#include <tier/host/metrics_registry.h>

#include <memory>

#include "tier_provider.h"

namespace tier {

// Binds the ABI's host-services table to this process's log and a MetricsRegistry. The registry
// must outlive this object. The table itself lives as long as anything retains it (Retain): a
// provider instance keeps what it was handed for as long as any of its calls can still run, even
// past this object (an abandoned provider, an open that returned after its deadline). Once this
// object is gone the services are inert: metric calls return NULL or do nothing, the log still
// goes to this process's log. Thread-safe: any service from any thread, during destruction too.
class HostServices {
 public:
  explicit HostServices(MetricsRegistry* metrics);
  // Makes the services inert (waits for service calls in flight to return) and drops this
  // object's hold on the table.
  ~HostServices();
  HostServices(const HostServices&) = delete;
  HostServices& operator=(const HostServices&) = delete;

  const tier_host_services* table() const;
  MetricsRegistry* metrics() const { return metrics_; }

  // A hold on `table` (a HostServices table, alive at the call): the table stays readable while
  // the hold lives. Null for a table some other host made. Any thread.
  static std::shared_ptr<const void> Retain(const tier_host_services* table);

  struct Core;  // the table and the gate of its services (host_services.cc)

 private:
  MetricsRegistry* metrics_;
  std::shared_ptr<Core> core_;
};

// Nanoseconds on CLOCK_MONOTONIC. Any thread.
uint64_t MonotonicNs();

}  // namespace tier
