#include "tenant_metrics.h"

namespace tier {

TenantMetrics::TenantMetrics(MetricsRegistry* registry, const std::vector<std::string>& allowed) {
  MetricFamily* admissions =
      registry->Counter("tier_tenant_admissions_total",
                        "Admit calls by tenant (HostOptions::metrics_tenants; other tenants as "
                        "\"other\", none as \"none\").",
                        {"tenant"});
  MetricFamily* seals =
      registry->Counter("tier_tenant_seals_total",
                        "Seal calls by tenant (as tier_tenant_admissions_total).", {"tenant"});
  const auto make = [&](const std::string& label) {
    return Series{registry->Series(admissions, {label}), registry->Series(seals, {label})};
  };
  for (const std::string& tenant : allowed) {
    if (!tenant.empty() && tenant != "other" && tenant != "none") named_[tenant] = make(tenant);
  }
  other_ = make("other");
  none_ = make("none");
}

const TenantMetrics::Series& TenantMetrics::Of(std::string_view tenant) const {
  if (tenant.empty()) return none_;
  auto it = named_.find(tenant);
  return it == named_.end() ? other_ : it->second;
}

void TenantMetrics::Admitted(std::string_view tenant) {
  if (Metric* m = Of(tenant).admissions) m->Add(1);
}

void TenantMetrics::Sealed(std::string_view tenant) {
  if (Metric* m = Of(tenant).seals) m->Add(1);
}

}  // namespace tier
