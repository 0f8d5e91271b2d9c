// metrics_server.h -- the host's one /metrics endpoint (prometheus-cpp's exposer).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <tier/host/metrics_registry.h>
#include <tier/status.h>

namespace prometheus {
class Exposer;
}

namespace tier {

// Serves `registry` at http://HOST:PORT/metrics until destroyed. Any thread.
class MetricsServer {
 public:
  // INVALID_ARGUMENT for a malformed address, IO_ERROR when the port cannot be bound.
  static Result<std::unique_ptr<MetricsServer>> Start(const std::string& host_port,
                                                      const MetricsRegistry& registry);
  ~MetricsServer();
  // The bound port (useful with port 0).
  int port() const { return port_; }
  // /metrics requests that have begun collecting the registry so far. Any thread.
  uint64_t scrapes_started() const;
  // Waits until a /metrics request that began after scrapes_started() returned `started` has
  // served the whole registry, or `timeout` passes; true when one did. Any thread.
  bool WaitForScrapeStartedAfter(uint64_t started, std::chrono::milliseconds timeout) const;

 private:
  class ScrapeCounter;
  MetricsServer() = default;
  std::unique_ptr<ScrapeCounter> scrape_counter_;  // outlives exposer_ (destroyed after it)
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace tier
