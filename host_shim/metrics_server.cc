#include "metrics_server.h"

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <condition_variable>
#include <mutex>

namespace tier {

// Collected after the registry on every /metrics request (the exposer collects in registration
// order), so a count here means the registry's series have been served. Adds no series.
class MetricsServer::ScrapeCounter : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++count_;
    }
    changed_.notify_all();
    return {};
  }
  uint64_t count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
  }
  bool WaitAbove(uint64_t seen, std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return count_ > seen; });
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  mutable uint64_t count_ = 0;  // guarded by mutex_
};

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
    server->scrape_counter_ = std::make_shared<ScrapeCounter>();
    server->exposer_->RegisterCollectable(server->scrape_counter_);
    const auto ports = server->exposer_->GetListeningPorts();
    server->port_ = ports.empty() ? 0 : ports.front();
  } catch (const std::exception& e) {
    return Status(TIER_IO_ERROR, "--metrics-addr '" + host_port + "': cannot listen: " + e.what());
  }
  return server;
}

MetricsServer::~MetricsServer() = default;

uint64_t MetricsServer::scrapes() const { return scrape_counter_->count(); }

bool MetricsServer::WaitForScrapeAfter(uint64_t seen, std::chrono::milliseconds timeout) const {
  return scrape_counter_->WaitAbove(seen, timeout);
}

}  // namespace tier
