#include "metrics_server.h"

#include <prometheus/exposer.h>
#include <prometheus/registry.h>

namespace tier {

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& host_port,
                                                            const MetricsRegistry& registry) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon + 1 == host_port.size() ||
      host_port.find_first_not_of("0123456789", colon + 1) != std::string::npos) {
    return Status(TIER_INVALID_ARGUMENT,
                  "--metrics-addr '" + host_port + "': expected HOST:PORT, e.g. 127.0.0.1:9464");
  }
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(host_port, 2);
    server->exposer_->RegisterCollectable(registry.registry());
    const auto ports = server->exposer_->GetListeningPorts();
    server->port_ = ports.empty() ? 0 : ports.front();
  } catch (const std::exception& e) {
    return Status(TIER_IO_ERROR, "--metrics-addr '" + host_port + "': cannot listen: " + e.what());
  }
  return server;
}

MetricsServer::~MetricsServer() = default;

}  // namespace tier
