// metrics_server.h -- the host's one /metrics endpoint (prometheus-cpp's exposer).
#pragma once

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

 private:
  MetricsServer() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace tier
