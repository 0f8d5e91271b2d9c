// metrics_http.h -- the transport under /metrics: a small HTTP/1.x server on one poll() thread.
// No worker is ever held by a client: a connection that sends nothing, sends half a request or
// does not read its answer costs one slot and one file descriptor, and is closed at a deadline or
// evicted when the slots run out, so a scrape is answered whatever the other clients do.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include <tier/status.h>

namespace tier {

struct MetricsHttpLimits {
  // Open connections at most (the listening socket and a wake-up descriptor come on top). A new
  // connection's request is read as soon as it is accepted. When a new client arrives with every
  // slot taken, what every connection has ready is read first (complete requests are answered,
  // clients that left are dropped); if that frees no slot, the oldest connection lingering after
  // its answer is closed, else the oldest idle one (nothing received), else the oldest with half a
  // request, else the oldest being answered.
  size_t max_connections = 64;
  size_t max_request_bytes = 8192;  // request line and headers; more is answered 431
  // From accept to the blank line that ends the request's headers.
  std::chrono::milliseconds request_timeout{5000};
  // From the first byte of the answer to the last (a client that does not read is closed).
  std::chrono::milliseconds response_timeout{10000};
  // After the answer: how long to read and drop what the client still sends before closing, so
  // that the close does not reset the connection under an answer the client has not read yet.
  std::chrono::milliseconds linger_timeout{1000};
};

// What GET (or HEAD) /metrics answers: the body and its Content-Type.
struct MetricsHttpBody {
  std::string content_type;
  std::string body;
};

// GET /metrics and HEAD /metrics answer 200 with the handler's body and `Connection: close`; any
// other path 404, any other method 405, a malformed request 400, an oversized one 431, a handler
// that throws 500. One request per connection (no keep-alive, no pipelining).
class MetricsHttpServer {
 public:
  // Called on the server thread, once per GET or HEAD /metrics; may throw (answered 500).
  using Handler = std::function<MetricsHttpBody()>;

  // Binds HOST:PORT (HOST a name, an IPv4 address or a bracketed IPv6 one; PORT 0 picks one) and
  // starts the server thread. INVALID_ARGUMENT for a malformed address, IO_ERROR when it cannot
  // be resolved or bound. `handler` is owned; it must stay callable until the destructor returns.
  static Result<std::unique_ptr<MetricsHttpServer>> Start(const std::string& host_port,
                                                          const MetricsHttpLimits& limits,
                                                          Handler handler);
  // Stops the thread and closes every connection. Not from the handler.
  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The bound port. Any thread.
  int port() const;
  // Connections closed so far because every slot was taken (evicted). Any thread.
  uint64_t evicted() const;

 private:
  class Loop;
  explicit MetricsHttpServer(std::unique_ptr<Loop> loop);
  std::unique_ptr<Loop> loop_;
};

}  // namespace tier
