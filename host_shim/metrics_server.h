// metrics_server.h -- the host's one /metrics endpoint (prometheus-cpp's exposer).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "metrics_registry.h"
#include "status.h"

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
  // Completed collections of the registry by /metrics requests so far.
  uint64_t scrapes() const;
  // Waits until scrapes() exceeds `seen` or `timeout` passes; true when it did. Any thread.
  bool WaitForScrapeAfter(uint64_t seen, std::chrono::milliseconds timeout) const;

 private:
  class ScrapeCounter;
  MetricsServer() = default;
  std::shared_ptr<ScrapeCounter> scrape_counter_;  // registered after the registry
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace tier
