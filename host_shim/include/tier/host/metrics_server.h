// metrics_server.h -- the host's one /metrics endpoint: the registry in Prometheus' text format,
// served by a small poll() server of its own (src/metrics_http.h), so that idle or slow clients
// never hold the thread that answers scrapes.
// TOOL-LEVEL: not part of the integration API (host_shim/README.md, "Headers"); for the tools and
// tests built on the library (tier-host, tier-bench, the tests). a server serves
// MetricsRegistry::ExpositionText() from its own endpoint.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <tier/host/metrics_registry.h>
#include <tier/status.h>

namespace tier {

class MetricsHttpServer;

// Serves `registry` at http://HOST:PORT/metrics until destroyed, on one thread of its own. At
// most 64 connections (a newcomer evicts the oldest idle or half-sent one), 8 KiB of request
// head, 5 s to send it, 10 s to read the answer; one request per connection. Besides the
// registry it exposes prometheus-cpp's exposer families (exposer_scrapes_total,
// exposer_transferred_bytes_total, exposer_request_latencies). Any thread.
class MetricsServer {
 public:
  // INVALID_ARGUMENT for a malformed address, IO_ERROR when it cannot be resolved or bound.
  // Borrows `registry`, which must outlive the server.
  static Result<std::unique_ptr<MetricsServer>> Start(const std::string& host_port,
                                                      const MetricsRegistry& registry);
  ~MetricsServer();
  // The bound port (useful with port 0).
  int port() const;
  // /metrics requests that have begun collecting the registry so far. Any thread.
  uint64_t scrapes_started() const;
  // Waits until a /metrics request that began after scrapes_started() returned `started` has
  // served the whole registry, or `timeout` passes; true when one did. Any thread.
  bool WaitForScrapeStartedAfter(uint64_t started, std::chrono::milliseconds timeout) const;

 private:
  class Exposition;
  MetricsServer() = default;
  std::unique_ptr<Exposition> exposition_;  // outlives http_ (destroyed after it)
  std::unique_ptr<MetricsHttpServer> http_;
};

}  // namespace tier
