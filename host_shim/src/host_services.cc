#include <tier/host/host_services.h>

#include <time.h>

#include <exception>
#include <shared_mutex>
#include <string>
#include <vector>

#include <tier/host/log.h>

namespace tier {

// What the table's host_context points at. `metrics` is read under a shared lock by every metric
// service and cleared under the exclusive lock when the HostServices goes: after that no service
// touches the registry or a metric handle it gave out.
struct HostServices::Core : std::enable_shared_from_this<HostServices::Core> {
  tier_host_services table{};
  mutable std::shared_mutex mu;
  MetricsRegistry* metrics = nullptr;  // guarded by mu; null once inert
};

namespace {

using Core = HostServices::Core;

// Every service catches everything: no C++ exception crosses the ABI in either direction.

void ServiceLog(void* context, tier_log_level level, const char* message) {
  (void)context;
  try {
    Log(level, message != nullptr ? message : "(null message)");
  } catch (...) {
  }
}

tier_metric_family* ServiceMetricFamily(void* context, tier_metric_type type, const char* name,
                                        const char* help, const char* const* label_names,
                                        uint32_t label_count, const double* bucket_bounds,
                                        uint32_t bucket_count) {
  try {
    if (name == nullptr || (label_count > 0 && label_names == nullptr) ||
        (bucket_count > 0 && bucket_bounds == nullptr)) {
      Log(TIER_LOG_WARN, "provider asked for a metric family with NULL arguments");
      return nullptr;
    }
    std::vector<std::string> labels;
    for (uint32_t i = 0; i < label_count; ++i) {
      if (label_names[i] == nullptr) return nullptr;
      labels.emplace_back(label_names[i]);
    }
    std::vector<double> buckets(bucket_bounds, bucket_bounds + bucket_count);
    auto* core = static_cast<Core*>(context);
    std::shared_lock lock(core->mu);
    if (core->metrics == nullptr) return nullptr;  // the host is gone
    auto result = core->metrics->Family(type, name, help != nullptr ? help : "", labels, buckets);
    if (!result.ok()) {
      Log(TIER_LOG_WARN, "provider metric refused: " + result.status().message());
      return nullptr;
    }
    return result.value();
  } catch (...) {
    return nullptr;
  }
}

tier_metric* ServiceMetric(void* context, tier_metric_family* family,
                           const char* const* label_values, uint32_t label_count) {
  try {
    if (family == nullptr || (label_count > 0 && label_values == nullptr)) return nullptr;
    std::vector<std::string> values;
    for (uint32_t i = 0; i < label_count; ++i) {
      if (label_values[i] == nullptr) return nullptr;
      values.emplace_back(label_values[i]);
    }
    auto* core = static_cast<Core*>(context);
    std::shared_lock lock(core->mu);
    if (core->metrics == nullptr) return nullptr;
    return core->metrics->Series(family, values);
  } catch (...) {
    return nullptr;
  }
}

// A metric handle is the registry's: touched only while the registry is.
template <typename F>
void WithLiveMetrics(void* context, tier_metric* metric, F f) {
  if (metric == nullptr) return;
  auto* core = static_cast<Core*>(context);
  std::shared_lock lock(core->mu);
  if (core->metrics != nullptr) f();
}

void ServiceMetricAdd(void* context, tier_metric* metric, double delta) {
  WithLiveMetrics(context, metric, [&] { metric->Add(delta); });
}
void ServiceMetricSet(void* context, tier_metric* metric, double value) {
  WithLiveMetrics(context, metric, [&] { metric->Set(value); });
}
void ServiceMetricObserve(void* context, tier_metric* metric, double value) {
  WithLiveMetrics(context, metric, [&] { metric->Observe(value); });
}
uint64_t ServiceMonotonicNs(void*) {
  return MonotonicNs();
}

}  // namespace

uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

HostServices::HostServices(MetricsRegistry* metrics)
    : metrics_(metrics), core_(std::make_shared<Core>()) {
  core_->metrics = metrics;
  tier_host_services& t = core_->table;
  t.struct_size = sizeof(tier_host_services);
  t.abi_major = TIER_ABI_VERSION_MAJOR;
  t.abi_minor = TIER_ABI_VERSION_MINOR;
  t.host_context = core_.get();
  t.log = ServiceLog;
  t.metric_family = ServiceMetricFamily;
  t.metric = ServiceMetric;
  t.metric_add = ServiceMetricAdd;
  t.metric_set = ServiceMetricSet;
  t.metric_observe = ServiceMetricObserve;
  t.monotonic_ns = ServiceMonotonicNs;
}

HostServices::~HostServices() {
  std::unique_lock lock(core_->mu);  // waits for metric services in flight
  core_->metrics = nullptr;
}

const tier_host_services* HostServices::table() const {
  return &core_->table;
}

std::shared_ptr<const void> HostServices::Retain(const tier_host_services* table) {
  if (table == nullptr || table->log != ServiceLog || table->host_context == nullptr) return {};
  return static_cast<Core*>(table->host_context)->shared_from_this();
}

}  // namespace tier
