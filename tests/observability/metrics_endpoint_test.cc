// metrics_endpoint_test.cc -- MetricsEndpoint: /metrics keeps answering scrapes while other
// clients hold connections open and send nothing, or half a request, or more clients than the
// server has slots, or a burst arrives right behind a scrape; it closes idle connections at a
// deadline and refuses what it does not serve.
// Loopback only; every wait is bounded.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <tier/host/metrics_registry.h>
#include <tier/host/metrics_server.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "metrics_http.h"
#include "obs_support.h"
#include "test_support.h"

namespace tier::obs {
namespace {

constexpr double kScrapeTimeoutS = 10;  // the old endpoint kept a scrape waiting 30 s

// Connections a test holds open; closed by the destructor.
class HeldConnections {
 public:
  ~HeldConnections() {
    for (const int fd : fds_) ::close(fd);
  }
  // Connects to 127.0.0.1:port and sends `prefix` (maybe nothing); false when it cannot.
  bool Open(int port, const std::string& prefix) {
    std::string error;
    const int fd = ConnectLoopback(port, 20, &error);
    if (fd < 0) return false;
    fds_.push_back(fd);
    return prefix.empty() || ::send(fd, prefix.data(), prefix.size(), MSG_NOSIGNAL) ==
                                 static_cast<ssize_t>(prefix.size());
  }
  int last() const { return fds_.back(); }

 private:
  std::vector<int> fds_;
};

constexpr const char* kHalfRequest = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";

// Sends `request` on a fresh connection and reads until the server closes (up to 10 s).
std::string Exchange(int port, const std::string& request) {
  HeldConnections connection;
  if (!connection.Open(port, request))
    return "connect/send failed: " + std::string(strerror(errno));
  std::string raw;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::recv(connection.last(), buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    raw.append(buffer, static_cast<size_t>(n));
  }
  return raw;
}

class MetricsEndpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    Metric* series = registry_.Series(
        registry_.Counter("tier_test_scrapes_probe_total", "A counter the scrape must show"));
    ASSERT_NE(series, nullptr);
    series->Add(7);
    auto started = MetricsServer::Start("127.0.0.1:0", registry_);
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    server_ = started.take();
    ASSERT_GT(server_->port(), 0);
  }

  // One scrape that must succeed and show the registry.
  void ExpectScrape() {
    const HttpResponse r = HttpGet(server_->port(), "/metrics", kScrapeTimeoutS);
    EXPECT_EQ(r.status, 200) << r.error;
    EXPECT_NE(r.body.find("tier_test_scrapes_probe_total 7"), std::string::npos) << r.body;
  }

  MetricsRegistry registry_;
  std::unique_ptr<MetricsServer> server_;
};

TEST_F(MetricsEndpoint, ScrapesAnswerWhileIdleAndHalfSentClientsHoldConnections) {
  HeldConnections held;
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(held.Open(server_->port(), "")) << strerror(errno);
    ASSERT_TRUE(held.Open(server_->port(), kHalfRequest)) << strerror(errno);
  }
  for (int scrape = 0; scrape < 3; ++scrape) ExpectScrape();
}

TEST_F(MetricsEndpoint, ScrapesAnswerWhenClientsOutnumberTheConnectionSlots) {
  HeldConnections held;
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(held.Open(server_->port(), i % 2 == 0 ? "" : kHalfRequest)) << strerror(errno);
  }
  ExpectScrape();
}

TEST_F(MetricsEndpoint, IdleConnectionIsClosedAtTheRequestDeadline) {
  HeldConnections held;
  ASSERT_TRUE(held.Open(server_->port(), kHalfRequest));
  char byte = 0;
  const ssize_t n = ::recv(held.last(), &byte, 1, 0);  // 20 s receive timeout
  EXPECT_EQ(n, 0) << "the server should have closed it (end of stream), recv: "
                  << (n < 0 ? strerror(errno) : "data");
}

TEST_F(MetricsEndpoint, ServesTheRegistryAndTheExposerFamilies) {
  ExpectScrape();
  const HttpResponse r = HttpGet(server_->port(), "/metrics?x=1", kScrapeTimeoutS);
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_NE(r.body.find("exposer_scrapes_total 1"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("exposer_transferred_bytes_total"), std::string::npos);
  EXPECT_NE(r.body.find("exposer_request_latencies"), std::string::npos);
  EXPECT_GE(server_->scrapes_started(), 2u);
  const std::string head = Exchange(server_->port(), "HEAD /metrics HTTP/1.0\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
  EXPECT_EQ(head.find("tier_test_scrapes_probe_total"), std::string::npos) << "HEAD has no body";
}

TEST_F(MetricsEndpoint, RefusesOtherPathsMethodsAndMalformedRequests) {
  EXPECT_EQ(HttpGet(server_->port(), "/", kScrapeTimeoutS).status, 404);
  const std::string post = Exchange(server_->port(), "POST /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(post.rfind("HTTP/1.1 405 ", 0), 0u) << post;
  const std::string garbage = Exchange(server_->port(), "hello\r\n\r\n");
  EXPECT_EQ(garbage.rfind("HTTP/1.1 400 ", 0), 0u) << garbage;
  const std::string big =
      Exchange(server_->port(), "GET /metrics HTTP/1.1\r\nX: " + std::string(10000, 'a'));
  EXPECT_EQ(big.rfind("HTTP/1.1 431 ", 0), 0u) << big.substr(0, 100);
  ExpectScrape();
}

// Reads from `fd` until the server closes it (the receive timeout bounds each wait).
std::string ReadToEnd(int fd) {
  std::string raw;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    raw.append(buffer, static_cast<size_t>(n));
  }
  return raw;
}

// Issue 26, 7: the server thread is held (inside the answer to a first scrape) while a second
// scrape sends its whole request, a client sends half of one, and a burst of idle connections
// four times the slots arrives behind them. When the thread runs again and accepts them all, the
// scrape is answered and the half request can still be finished: what is ready is read before
// anything is evicted, and idle connections go first.
TEST(MetricsEndpointBurst, AScrapeRightBehindABurstIsAnsweredAndIdleClientsGoFirst) {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, release = false;
  int calls = 0;
  MetricsHttpLimits limits;
  limits.max_connections = 8;
  auto started = MetricsHttpServer::Start("127.0.0.1:0", limits, [&] {
    std::unique_lock lock(mu);
    if (calls++ == 0) {
      entered = true;
      cv.notify_all();
      cv.wait_for(lock, std::chrono::seconds(30), [&] { return release; });
    }
    return MetricsHttpBody{"text/plain", "ok\n"};
  });
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<MetricsHttpServer> server = started.take();
  auto unblock = [&] {
    std::lock_guard lock(mu);
    release = true;
    cv.notify_all();
  };
  struct Unblock {
    std::function<void()> f;
    ~Unblock() { f(); }
  } unblock_at_exit{unblock};
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  HeldConnections first, scrape, half, burst;
  ASSERT_TRUE(first.Open(server->port(), request));
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return entered; }))
        << "the first scrape never reached the handler";
  }
  ASSERT_TRUE(scrape.Open(server->port(), request)) << strerror(errno);
  ASSERT_TRUE(half.Open(server->port(), kHalfRequest)) << strerror(errno);
  for (size_t i = 0; i < 4 * limits.max_connections; ++i) {
    ASSERT_TRUE(burst.Open(server->port(), "")) << strerror(errno);
  }
  unblock();
  const std::string answer = ReadToEnd(scrape.last());
  EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u)
      << "the scrape behind the burst got '" << answer << "' (reset or evicted)";
  EXPECT_NE(answer.find("\r\n\r\nok\n"), std::string::npos) << answer;
  ASSERT_EQ(::send(half.last(), "\r\n", 2, MSG_NOSIGNAL), 2) << strerror(errno);
  const std::string finished = ReadToEnd(half.last());
  EXPECT_EQ(finished.rfind("HTTP/1.1 200 OK\r\n", 0), 0u)
      << "the half-sent request was evicted before idle clients: '" << finished << "'";
  // The server may answer both before it accepts the rest of the burst: wait (bounded) for it.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (server->evicted() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GT(server->evicted(), 0u) << "the burst did not fill the slots";
}

TEST(MetricsEndpointAddress, MalformedAddressesAreRefused) {
  MetricsRegistry registry;
  for (const char* bad :
       {"9464", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:65536", ":9464", "[::1:9464"}) {
    auto started = MetricsServer::Start(bad, registry);
    EXPECT_FALSE(started.ok()) << bad;
    if (!started.ok()) {
      EXPECT_NE(started.status().message().find(bad), std::string::npos)
          << started.status().message();
    }
  }
}

// The same through tier-host as a user runs it: --metrics-addr, a replay kept alive by --linger.
TEST(MetricsEndpointTierHost, AnswersScrapesWhileClientsHoldConnections) {
  tier::test::ScopedTempDir dir;
  Child host;
  std::string error;
  // Port 0: tier-host binds a free port and logs it (no window for another process to take it).
  ASSERT_TRUE(
      host.Start({TIER_HOST, "--tier-plugin", "null", "--bytes-scale", "1000", "--metrics-addr",
                  "127.0.0.1:0", "replay", "--sessions", "1", "--no-progress", "--linger"},
                 dir.path() + "/out", dir.path() + "/err", &error))
      << error;
  int port = 0;
  // Served before the Host has opened (the exposer's own families only): wait for the tier's.
  ASSERT_TRUE(WaitFor(
      [&] {
        port = MetricsPortFromLog(ReadFile(dir.path() + "/err"));
        if (port <= 0) return !host.running();
        const HttpResponse first = HttpGet(port, "/metrics", 1);
        return (first.status == 200 && first.body.find("tier_") != std::string::npos) ||
               !host.running();
      },
      60))
      << ReadFile(dir.path() + "/err");
  ASSERT_TRUE(host.running()) << ReadFile(dir.path() + "/err");
  HeldConnections held;
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(held.Open(port, ""));
    ASSERT_TRUE(held.Open(port, kHalfRequest));
  }
  const HttpResponse r = HttpGet(port, "/metrics", kScrapeTimeoutS);
  EXPECT_EQ(r.status, 200) << r.error;
  EXPECT_NE(r.body.find("tier_"), std::string::npos);
  host.Terminate();
}

}  // namespace
}  // namespace tier::obs
