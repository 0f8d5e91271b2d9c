#include "bench_config.h"

#include <cstdlib>

namespace tier::bench {

std::string BenchConfig::option(const std::string& key, const std::string& fallback) const {
  for (const auto& [k, v] : provider_options) {
    if (k == key) return v;
  }
  return fallback;
}

uint32_t BenchConfig::queue_depth() const {
  return static_cast<uint32_t>(std::strtoul(option("queue_depth", "16").c_str(), nullptr, 10));
}

uint64_t BenchConfig::object_bytes() const {
  return std::strtoull(option("object_mib", "4").c_str(), nullptr, 10) << 20;
}

uint64_t BenchConfig::staging_bytes() const {
  if (object_store()) return uint64_t{queue_depth()} * object_bytes();
  return std::strtoull(option("staging_mib", "64").c_str(), nullptr, 10) << 20;
}

}  // namespace tier::bench
