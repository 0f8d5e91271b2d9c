#include <tier/host/metrics_server.h>

#include <prometheus/counter.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>
#include <prometheus/text_serializer.h>

#include <condition_variable>
#include <mutex>

#include "metrics_http.h"

namespace tier {

// What one /metrics request answers: the exposer's own families, then the registry, in the text
// format; and the count of scrapes on both sides of collecting the registry. The exposer families
// keep prometheus-cpp's names, help and quantiles, so dashboards built on its Exposer still work.
class MetricsServer::Exposition {
 public:
  explicit Exposition(const MetricsRegistry& registry)
      : registry_(registry.registry()),
        bytes_(prometheus::BuildCounter()
                   .Name("exposer_transferred_bytes_total")
                   .Help("Transferred bytes to metrics services")
                   .Register(own_)
                   .Add({})),
        scrapes_(prometheus::BuildCounter()
                     .Name("exposer_scrapes_total")
                     .Help("Number of times metrics were scraped")
                     .Register(own_)
                     .Add({})),
        latencies_(
            prometheus::BuildSummary()
                .Name("exposer_request_latencies")
                .Help("Latencies of serving scrape requests, in microseconds")
                .Register(own_)
                .Add({}, prometheus::Summary::Quantiles{{0.5, 0.05}, {0.9, 0.01}, {0.99, 0.001}})) {
  }

  // The server thread's handler.
  MetricsHttpBody Serve() {
    const auto start = std::chrono::steady_clock::now();
    std::vector<prometheus::MetricFamily> families = own_.Collect();
    Count(&started_);
    std::vector<prometheus::MetricFamily> served = registry_->Collect();
    Count(&ended_);
    families.insert(families.end(), std::make_move_iterator(served.begin()),
                    std::make_move_iterator(served.end()));
    MetricsHttpBody body;
    body.content_type = "text/plain; version=0.0.4; charset=utf-8";
    body.body = prometheus::TextSerializer().Serialize(families);
    bytes_.Increment(static_cast<double>(body.body.size()));
    scrapes_.Increment();
    latencies_.Observe(static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(
                                               std::chrono::steady_clock::now() - start)
                                               .count()));
    return body;
  }

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

 private:
  void Count(uint64_t* counter) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++*counter;
    }
    changed_.notify_all();
  }

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Registry own_;
  prometheus::Counter& bytes_;
  prometheus::Counter& scrapes_;
  prometheus::Summary& latencies_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  uint64_t started_ = 0;  // guarded by mutex_
  uint64_t ended_ = 0;    // guarded by mutex_
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& host_port,
                                                            const MetricsRegistry& registry) {
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->exposition_ = std::make_unique<Exposition>(registry);
  Exposition* exposition = server->exposition_.get();
  auto http = MetricsHttpServer::Start(host_port, MetricsHttpLimits{},
                                       [exposition] { return exposition->Serve(); });
  if (!http.ok()) return http.status();
  server->http_ = http.take();
  return server;
}

MetricsServer::~MetricsServer() = default;

int MetricsServer::port() const {
  return http_->port();
}

uint64_t MetricsServer::scrapes_started() const {
  return exposition_->started();
}

bool MetricsServer::WaitForScrapeStartedAfter(uint64_t started,
                                              std::chrono::milliseconds timeout) const {
  return exposition_->WaitForOneStartedAfter(started, timeout);
}

}  // namespace tier
