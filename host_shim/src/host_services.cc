#include <tier/host/host_services.h>

#include <time.h>

#include <exception>
#include <string>
#include <vector>

#include <tier/host/log.h>

namespace tier {
namespace {

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
    auto* host = static_cast<HostServices*>(context);
    auto result = host->metrics()->Family(type, name, help != nullptr ? help : "", labels, buckets);
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
    return static_cast<HostServices*>(context)->metrics()->Series(family, values);
  } catch (...) {
    return nullptr;
  }
}

void ServiceMetricAdd(void*, tier_metric* metric, double delta) {
  if (metric != nullptr) metric->Add(delta);
}
void ServiceMetricSet(void*, tier_metric* metric, double value) {
  if (metric != nullptr) metric->Set(value);
}
void ServiceMetricObserve(void*, tier_metric* metric, double value) {
  if (metric != nullptr) metric->Observe(value);
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

HostServices::HostServices(MetricsRegistry* metrics) : metrics_(metrics), table_{} {
  table_.struct_size = sizeof(tier_host_services);
  table_.abi_major = TIER_ABI_VERSION_MAJOR;
  table_.abi_minor = TIER_ABI_VERSION_MINOR;
  table_.host_context = this;
  table_.log = ServiceLog;
  table_.metric_family = ServiceMetricFamily;
  table_.metric = ServiceMetric;
  table_.metric_add = ServiceMetricAdd;
  table_.metric_set = ServiceMetricSet;
  table_.metric_observe = ServiceMetricObserve;
  table_.monotonic_ns = ServiceMonotonicNs;
}

}  // namespace tier
