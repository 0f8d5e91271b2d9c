#include <tier/host/metrics_server.h>

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <condition_variable>
#include <mutex>

namespace tier {

// Counts /metrics requests on both sides of the registry: the exposer collects its collectables in
// registration order, and `Marker(true)` is registered before the registry, `Marker(false)` after.
// Adds no series.
class MetricsServer::ScrapeCounter {
 public:
  class Marker : public prometheus::Collectable {
   public:
    Marker(ScrapeCounter* counter, bool start) : counter_(counter), start_(start) {}
    std::vector<prometheus::MetricFamily> Collect() const override {
      {
        std::lock_guard<std::mutex> lock(counter_->mutex_);
        ++(start_ ? counter_->started_ : counter_->ended_);
      }
      counter_->changed_.notify_all();
      return {};
    }

   private:
    ScrapeCounter* counter_;
    bool start_;
  };

  uint64_t started() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return started_;
  }
  // At most `started` scrapes began before the caller read it, so once `started + 1` have ended,
  // at least one of them began afterwards and collected the whole registry as it is now.
  bool WaitForOneStartedAfter(uint64_t started, std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return ended_ >= started + 1; });
  }

  std::shared_ptr<Marker> start_marker = std::make_shared<Marker>(this, true);
  std::shared_ptr<Marker> end_marker = std::make_shared<Marker>(this, false);

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  uint64_t started_ = 0;  // guarded by mutex_
  uint64_t ended_ = 0;    // guarded by mutex_
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
    server->scrape_counter_ = std::make_unique<ScrapeCounter>();
    server->exposer_->RegisterCollectable(server->scrape_counter_->start_marker);
    server->exposer_->RegisterCollectable(registry.registry());
    server->exposer_->RegisterCollectable(server->scrape_counter_->end_marker);
    const auto ports = server->exposer_->GetListeningPorts();
    server->port_ = ports.empty() ? 0 : ports.front();
  } catch (const std::exception& e) {
    return Status(TIER_IO_ERROR, "--metrics-addr '" + host_port + "': cannot listen: " + e.what());
  }
  return server;
}

MetricsServer::~MetricsServer() = default;

uint64_t MetricsServer::scrapes_started() const {
  return scrape_counter_->started();
}

bool MetricsServer::WaitForScrapeStartedAfter(uint64_t started,
                                              std::chrono::milliseconds timeout) const {
  return scrape_counter_->WaitForOneStartedAfter(started, timeout);
}

}  // namespace tier
