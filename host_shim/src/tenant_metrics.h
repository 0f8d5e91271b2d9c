// tenant_metrics.h -- requests and seals by tenant (issue 23), with bounded label cardinality:
// only the tenants the operator names (HostOptions::metrics_tenants) get a series of their own;
// every other tenant counts as "other", a request without a tenant as "none". Scheduler thread.
#pragma once

#include <tier/host/metrics_registry.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tier {

class TenantMetrics {
 public:
  TenantMetrics(MetricsRegistry* registry, const std::vector<std::string>& allowed);
  void Admitted(std::string_view tenant);
  void Sealed(std::string_view tenant);

 private:
  struct Series {
    Metric* admissions = nullptr;
    Metric* seals = nullptr;
  };
  const Series& Of(std::string_view tenant) const;
  std::map<std::string, Series, std::less<>> named_;
  Series other_, none_;
};

}  // namespace tier
