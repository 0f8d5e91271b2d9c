#include <tier/host/metrics_registry.h>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include <tier/host/log.h>

void tier_metric::Add(double delta) {
  if (type == TIER_METRIC_COUNTER) {
    if (delta > 0) static_cast<prometheus::Counter*>(impl)->Increment(delta);
  } else if (type == TIER_METRIC_GAUGE) {
    static_cast<prometheus::Gauge*>(impl)->Increment(delta);
  }
}

void tier_metric::Set(double value) {
  if (type == TIER_METRIC_GAUGE) static_cast<prometheus::Gauge*>(impl)->Set(value);
}

void tier_metric::Observe(double value) {
  if (type == TIER_METRIC_HISTOGRAM) static_cast<prometheus::Histogram*>(impl)->Observe(value);
}

namespace tier {
namespace {

bool ValidName(const std::string& name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return name.rfind("__", 0) != 0;
}

const char* TypeName(tier_metric_type type) {
  switch (type) {
    case TIER_METRIC_COUNTER:
      return "counter";
    case TIER_METRIC_GAUGE:
      return "gauge";
    case TIER_METRIC_HISTOGRAM:
      return "histogram";
    default:
      return "unknown";
  }
}

void* BuildFamily(prometheus::Registry& registry, tier_metric_type type, const std::string& name,
                  const std::string& help) {
  switch (type) {
    case TIER_METRIC_COUNTER:
      return &prometheus::BuildCounter().Name(name).Help(help).Register(registry);
    case TIER_METRIC_GAUGE:
      return &prometheus::BuildGauge().Name(name).Help(help).Register(registry);
    case TIER_METRIC_HISTOGRAM:
      return &prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
    default:
      return nullptr;
  }
}

}  // namespace

MetricsRegistry::MetricsRegistry() : registry_(std::make_shared<prometheus::Registry>()) {}
MetricsRegistry::~MetricsRegistry() = default;

Result<MetricFamily*> MetricsRegistry::Family(tier_metric_type type, const std::string& name,
                                              const std::string& help,
                                              const std::vector<std::string>& label_names,
                                              const std::vector<double>& bucket_bounds) {
  if (type != TIER_METRIC_COUNTER && type != TIER_METRIC_GAUGE && type != TIER_METRIC_HISTOGRAM) {
    return Status(TIER_INVALID_ARGUMENT, "metric '" + name + "': unknown metric type");
  }
  if (!ValidName(name, true)) {
    return Status(TIER_INVALID_ARGUMENT, "metric name '" + name + "' is not a Prometheus name");
  }
  for (const std::string& label : label_names) {
    if (!ValidName(label, false) || label == "le") {
      return Status(TIER_INVALID_ARGUMENT, "metric '" + name + "': bad label name '" + label + "'");
    }
  }
  if (type == TIER_METRIC_HISTOGRAM &&
      (bucket_bounds.empty() || !std::is_sorted(bucket_bounds.begin(), bucket_bounds.end()))) {
    return Status(TIER_INVALID_ARGUMENT,
                  "histogram '" + name + "': bucket bounds must be non-empty and ascending");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = families_.find(name);
  if (it != families_.end()) {
    MetricFamily* existing = it->second.get();
    if (existing->type != type || existing->label_names != label_names) {
      return Status(TIER_INVALID_ARGUMENT, "metric '" + name + "' already registered as a " +
                                               TypeName(existing->type) + " with other labels");
    }
    return existing;
  }
  auto family = std::make_unique<MetricFamily>();
  family->type = type;
  family->name = name;
  family->label_names = label_names;
  family->bucket_bounds = bucket_bounds;
  try {
    family->impl = BuildFamily(*registry_, type, name, help);
  } catch (const std::exception& e) {
    return Status(TIER_INVALID_ARGUMENT, "metric '" + name + "': " + e.what());
  }
  MetricFamily* result = family.get();
  families_.emplace(name, std::move(family));
  return result;
}

static MetricFamily* MustFamily(Result<MetricFamily*> result) {
  if (!result.ok()) {
    Log(TIER_LOG_ERROR, "internal: " + result.status().ToString());
    std::abort();
  }
  return result.value();
}

MetricFamily* MetricsRegistry::Counter(const std::string& name, const std::string& help,
                                       const std::vector<std::string>& label_names) {
  return MustFamily(Family(TIER_METRIC_COUNTER, name, help, label_names));
}

MetricFamily* MetricsRegistry::Gauge(const std::string& name, const std::string& help,
                                     const std::vector<std::string>& label_names) {
  return MustFamily(Family(TIER_METRIC_GAUGE, name, help, label_names));
}

MetricFamily* MetricsRegistry::Histogram(const std::string& name, const std::string& help,
                                         const std::vector<std::string>& label_names,
                                         const std::vector<double>& bucket_bounds) {
  return MustFamily(Family(TIER_METRIC_HISTOGRAM, name, help, label_names, bucket_bounds));
}

Metric* MetricsRegistry::Series(MetricFamily* family,
                                const std::vector<std::string>& label_values) {
  if (family == nullptr || label_values.size() != family->label_names.size()) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = family->series.find(label_values);
  if (it != family->series.end()) return it->second.get();
  prometheus::Labels labels;
  for (size_t i = 0; i < label_values.size(); ++i) {
    labels[family->label_names[i]] = label_values[i];
  }
  auto metric = std::make_unique<Metric>();
  metric->type = family->type;
  try {
    switch (family->type) {
      case TIER_METRIC_COUNTER:
        metric->impl =
            &static_cast<prometheus::Family<prometheus::Counter>*>(family->impl)->Add(labels);
        break;
      case TIER_METRIC_GAUGE:
        metric->impl =
            &static_cast<prometheus::Family<prometheus::Gauge>*>(family->impl)->Add(labels);
        break;
      case TIER_METRIC_HISTOGRAM:
        metric->impl =
            &static_cast<prometheus::Family<prometheus::Histogram>*>(family->impl)
                 ->Add(labels, prometheus::Histogram::BucketBoundaries(family->bucket_bounds));
        break;
      default:
        return nullptr;
    }
  } catch (const std::exception& e) {
    Log(TIER_LOG_WARN, "metric '" + family->name + "': cannot add series: " + e.what());
    return nullptr;
  }
  Metric* result = metric.get();
  family->series.emplace(label_values, std::move(metric));
  return result;
}

std::string MetricsRegistry::ExpositionText() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace tier
