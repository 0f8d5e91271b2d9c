#include "fake_host.h"

#include <ctime>

namespace tier::disk::test {

FakeHost::FakeHost() {
  services_.struct_size = sizeof(services_);
  services_.abi_major = TIER_ABI_VERSION_MAJOR;
  services_.abi_minor = TIER_ABI_VERSION_MINOR;
  services_.host_context = this;
  services_.log = Log;
  services_.metric_family = MetricFamily;
  services_.metric = Metric;
  services_.metric_add = Add;
  services_.metric_set = Set;
  services_.metric_observe = Observe;
  services_.monotonic_ns = Now;
}

void FakeHost::Log(void* ctx, tier_log_level, const char* message) {
  auto* self = static_cast<FakeHost*>(ctx);
  std::lock_guard lock(self->mu_);
  self->logs_.emplace_back(message);
}

tier_metric_family* FakeHost::MetricFamily(void* ctx, tier_metric_type type, const char* name,
                                           const char*, const char* const*, uint32_t label_count,
                                           const double*, uint32_t) {
  auto* self = static_cast<FakeHost*>(ctx);
  std::lock_guard lock(self->mu_);
  auto it = self->families_.find(name);
  if (it != self->families_.end()) {
    return it->second->type == type && it->second->label_count == label_count
               ? reinterpret_cast<tier_metric_family*>(it->second)
               : nullptr;
  }
  self->family_store_.push_back(std::make_unique<Family>(Family{type, name, label_count}));
  self->families_[name] = self->family_store_.back().get();
  return reinterpret_cast<tier_metric_family*>(self->family_store_.back().get());
}

tier_metric* FakeHost::Metric(void* ctx, tier_metric_family* family, const char* const* values,
                              uint32_t count) {
  auto* self = static_cast<FakeHost*>(ctx);
  if (family == nullptr) return nullptr;
  auto* f = reinterpret_cast<Family*>(family);
  if (count != f->label_count) return nullptr;
  std::string labels;
  for (uint32_t i = 0; i < count; ++i) labels += (i ? "," : "") + std::string(values[i]);
  const std::string id = f->name + "{" + labels + "}";
  std::lock_guard lock(self->mu_);
  auto it = self->series_.find(id);
  if (it != self->series_.end()) return reinterpret_cast<tier_metric*>(it->second);
  self->series_store_.push_back(std::make_unique<Series>(Series{f, labels}));
  self->series_[id] = self->series_store_.back().get();
  return reinterpret_cast<tier_metric*>(self->series_store_.back().get());
}

void FakeHost::Add(void* ctx, tier_metric* metric, double delta) {
  auto* self = static_cast<FakeHost*>(ctx);
  if (metric == nullptr) return;
  auto* s = reinterpret_cast<Series*>(metric);
  std::lock_guard lock(self->mu_);
  if (s->family->type == TIER_METRIC_COUNTER && delta < 0) return;
  s->value += delta;
}

void FakeHost::Set(void* ctx, tier_metric* metric, double value) {
  auto* self = static_cast<FakeHost*>(ctx);
  if (metric == nullptr) return;
  std::lock_guard lock(self->mu_);
  reinterpret_cast<Series*>(metric)->value = value;
}

void FakeHost::Observe(void* ctx, tier_metric* metric, double value) {
  auto* self = static_cast<FakeHost*>(ctx);
  if (metric == nullptr) return;
  auto* s = reinterpret_cast<Series*>(metric);
  std::lock_guard lock(self->mu_);
  s->value += value;
  ++s->observations;
}

uint64_t FakeHost::Now(void* ctx) {
  auto* self = static_cast<FakeHost*>(ctx);
  if (const uint64_t frozen = self->frozen_ns_.load(); frozen != 0) return frozen;
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + ts.tv_nsec;
}

double FakeHost::Value(const std::string& family, const std::string& labels) const {
  std::lock_guard lock(mu_);
  auto it = series_.find(family + "{" + labels + "}");
  if (it == series_.end()) return 0;
  return it->second->family->type == TIER_METRIC_HISTOGRAM
             ? static_cast<double>(it->second->observations)
             : it->second->value;
}

size_t FakeHost::CountLogs(const std::string& needle) const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const std::string& line : logs_) n += line.find(needle) != std::string::npos;
  return n;
}

std::vector<std::string> FakeHost::Logs() const {
  std::lock_guard lock(mu_);
  return logs_;
}

bool FakeHost::LogContains(const std::string& needle) const {
  std::lock_guard lock(mu_);
  for (const std::string& line : logs_) {
    if (line.find(needle) != std::string::npos) return true;
  }
  return false;
}

}  // namespace tier::disk::test
