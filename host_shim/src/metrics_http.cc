#include "metrics_http.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace tier {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kListenBacklog = 512;  // the kernel queue while the thread is not scheduled
constexpr auto kAcceptPause = std::chrono::milliseconds(100);  // after EMFILE with nothing to evict

// Closes a descriptor on scope exit unless released.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = other.Release();
    }
    return *this;
  }
  int get() const { return fd_; }
  int Release() { return std::exchange(fd_, -1); }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

struct HostPort {
  std::string host;
  std::string port;
};

Result<HostPort> ParseHostPort(const std::string& host_port) {
  const Status bad(TIER_INVALID_ARGUMENT,
                   "--metrics-addr '" + host_port + "': expected HOST:PORT, e.g. 127.0.0.1:9464");
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == host_port.size() ||
      host_port.size() - colon - 1 > 5 ||
      host_port.find_first_not_of("0123456789", colon + 1) != std::string::npos ||
      std::stoul(host_port.substr(colon + 1)) > 65535) {
    return bad;
  }
  HostPort parsed{host_port.substr(0, colon), host_port.substr(colon + 1)};
  if (parsed.host.front() == '[') {
    if (parsed.host.size() < 3 || parsed.host.back() != ']') return bad;
    parsed.host = parsed.host.substr(1, parsed.host.size() - 2);
  }
  return parsed;
}

Result<UniqueFd> BindListener(const std::string& host_port) {
  auto parsed = ParseHostPort(host_port);
  if (!parsed.ok()) return parsed.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc =
      ::getaddrinfo(parsed.value().host.c_str(), parsed.value().port.c_str(), &hints, &found);
  if (rc != 0) {
    return Status(TIER_IO_ERROR, "--metrics-addr '" + host_port +
                                     "': cannot resolve the host: " + ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> list(found, &::freeaddrinfo);
  int last_errno = EADDRNOTAVAIL;
  for (const addrinfo* a = list.get(); a != nullptr; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) {
      last_errno = errno;
      continue;
    }
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0 &&
        ::listen(fd.get(), kListenBacklog) == 0) {
      return fd;
    }
    last_errno = errno;
  }
  return Status(TIER_IO_ERROR, "--metrics-addr '" + host_port +
                                   "': cannot listen: " + Status::ErrnoText(last_errno));
}

int BoundPort(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
  if (address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  }
  return 0;
}

std::string Response(int code, std::string_view reason, std::string_view content_type,
                     std::string_view body, bool with_body) {
  std::string out = "HTTP/1.1 " + std::to_string(code) + " " + std::string(reason) + "\r\n";
  out += "Content-Type: " + std::string(content_type) + "\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  if (code == 405) out += "Allow: GET, HEAD\r\n";
  out += "Connection: close\r\n\r\n";
  if (with_body) out += body;
  return out;
}

std::string ErrorResponse(int code, std::string_view reason) {
  return Response(code, reason, "text/plain; charset=utf-8", std::string(reason) + "\n", true);
}

// The end of the request head (the blank line), or npos while it is incomplete.
size_t HeadEnd(const std::string& in) {
  const size_t crlf = in.find("\r\n\r\n");
  if (crlf != std::string::npos) return crlf + 4;
  const size_t lf = in.find("\n\n");
  return lf == std::string::npos ? std::string::npos : lf + 2;
}

struct RequestLine {
  std::string method;
  std::string path;  // without the query
};

// "METHOD SP TARGET SP HTTP/x.y"; false when it is not that.
bool ParseRequestLine(const std::string& head, RequestLine* out) {
  const size_t end = head.find_first_of("\r\n");
  const std::string line = head.substr(0, end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos || sp1 == 0 || sp2 == sp1 + 1 ||
      line.compare(sp2 + 1, 5, "HTTP/") != 0) {
    return false;
  }
  out->method = line.substr(0, sp1);
  const std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  out->path = target.substr(0, target.find('?'));
  return true;
}

}  // namespace

class MetricsHttpServer::Loop {
 public:
  Loop(UniqueFd listener, UniqueFd wake, const MetricsHttpLimits& limits, Handler handler)
      : listener_(std::move(listener)),
        wake_(std::move(wake)),
        limits_(limits),
        handler_(std::move(handler)),
        port_(BoundPort(listener_.get())) {}

  void Run() {
    thread_ = std::thread([this] { Serve(); });
  }

  ~Loop() {
    stop_.store(true);
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_.get(), &one, sizeof(one));
    if (thread_.joinable()) thread_.join();
  }

  int port() const { return port_; }
  uint64_t evicted() const { return evicted_.load(); }

 private:
  enum class Phase { kReading, kWriting, kLingering };

  struct Connection {
    UniqueFd fd;
    uint64_t order = 0;  // accept order, for eviction
    Phase phase = Phase::kReading;
    Clock::time_point deadline;
    std::string in;
    std::string out;
    size_t sent = 0;
  };

  void Serve() {
    std::vector<pollfd> fds;
    while (!stop_.load()) {
      fds.clear();
      fds.push_back({wake_.get(), POLLIN, 0});
      const bool accepting = Clock::now() >= accept_resume_;
      fds.push_back({accepting ? listener_.get() : -1, POLLIN, 0});
      for (const Connection& c : connections_) {
        fds.push_back(
            {c.fd.get(), static_cast<short>(c.phase == Phase::kWriting ? POLLOUT : POLLIN), 0});
      }
      const int ready = ::poll(fds.data(), fds.size(), PollTimeoutMs(accepting));
      if (ready < 0 && errno != EINTR) return;  // only EFAULT/EINVAL/ENOMEM: nothing to recover
      if (stop_.load()) return;
      // Connections first (their indices match fds), then new ones: accepting may evict.
      for (size_t i = 0; i < connections_.size(); ++i) {
        if (ready > 0 && fds[i + 2].revents != 0) Progress(connections_[i]);
      }
      Expire();
      if (ready > 0 && fds[1].revents != 0) AcceptAll();
    }
  }

  int PollTimeoutMs(bool accepting) const {
    Clock::time_point next = Clock::time_point::max();
    for (const Connection& c : connections_) next = std::min(next, c.deadline);
    if (!accepting) next = std::min(next, accept_resume_);
    if (next == Clock::time_point::max()) return -1;
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now());
    return static_cast<int>(std::clamp<int64_t>(wait.count(), 0, 60000));
  }

  void AcceptAll() {
    for (;;) {
      UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (fd.get() < 0) {
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          if (MakeRoom()) continue;
          accept_resume_ = Clock::now() + kAcceptPause;
        }
        return;  // EAGAIN: all accepted
      }
      if (connections_.size() >= limits_.max_connections && !MakeRoom()) return;
      Connection c;
      c.fd = std::move(fd);
      c.order = next_order_++;
      c.deadline = Clock::now() + limits_.request_timeout;
      // What it already sent is read now: a scrape right behind a burst is answered before the
      // burst can evict it (issue 26).
      Read(c);
      if (c.fd.get() >= 0) connections_.push_back(std::move(c));
    }
  }

  // Frees a slot: first by reading what every connection has ready (a complete request is
  // answered; one whose client left or that finished lingering goes), then by evicting one.
  bool MakeRoom() {
    for (Connection& c : connections_) {
      if (c.phase != Phase::kWriting) Progress(c);
    }
    std::erase_if(connections_, [](const Connection& c) { return c.fd.get() < 0; });
    return connections_.size() < limits_.max_connections || EvictOne();
  }

  // Closes the connection that matters least: lingering after its answer (its input drained, so
  // the close cannot reset it), then idle (nothing received), then half a request, then being
  // answered; the oldest first.
  bool EvictOne() {
    auto rank = [](const Connection& c) {
      if (c.phase == Phase::kLingering) return 0;
      if (c.phase == Phase::kReading) return c.in.empty() ? 1 : 2;
      return 3;
    };
    auto victim = std::min_element(
        connections_.begin(), connections_.end(), [&](const Connection& a, const Connection& b) {
          return std::pair(rank(a), a.order) < std::pair(rank(b), b.order);
        });
    if (victim == connections_.end()) return false;
    connections_.erase(victim);
    evicted_.fetch_add(1);
    return true;
  }

  void Expire() {
    const Clock::time_point now = Clock::now();
    std::erase_if(connections_,
                  [&](const Connection& c) { return c.fd.get() < 0 || now >= c.deadline; });
  }

  void Progress(Connection& c) {
    switch (c.phase) {
      case Phase::kReading:
        return Read(c);
      case Phase::kWriting:
        return Write(c);
      case Phase::kLingering:
        return Drain(c);
    }
  }

  void Read(Connection& c) {
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::recv(c.fd.get(), buffer, sizeof(buffer), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        return c.fd.Reset();  // the client went away before its request was complete
      }
      if (n < 0) return;
      c.in.append(buffer, static_cast<size_t>(n));
      const size_t head_end = HeadEnd(c.in);
      if (head_end != std::string::npos && head_end <= limits_.max_request_bytes) {
        return Answer(c, c.in.substr(0, head_end));
      }
      if (c.in.size() > limits_.max_request_bytes) {
        return StartWriting(c, ErrorResponse(431, "Request Header Fields Too Large"));
      }
    }
  }

  void Answer(Connection& c, const std::string& head) {
    RequestLine request;
    if (!ParseRequestLine(head, &request)) {
      return StartWriting(c, ErrorResponse(400, "Bad Request"));
    }
    if (request.method != "GET" && request.method != "HEAD") {
      return StartWriting(c, ErrorResponse(405, "Method Not Allowed"));
    }
    if (request.path != "/metrics") return StartWriting(c, ErrorResponse(404, "Not Found"));
    MetricsHttpBody body;
    try {
      body = handler_();
    } catch (const std::exception&) {
      return StartWriting(c, ErrorResponse(500, "Internal Server Error"));
    }
    StartWriting(c, Response(200, "OK", body.content_type, body.body, request.method == "GET"));
  }

  void StartWriting(Connection& c, std::string response) {
    c.in.clear();
    c.out = std::move(response);
    c.sent = 0;
    c.phase = Phase::kWriting;
    c.deadline = Clock::now() + limits_.response_timeout;
    Write(c);
  }

  void Write(Connection& c) {
    while (c.sent < c.out.size()) {
      const ssize_t n =
          ::send(c.fd.get(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      if (n <= 0) return c.fd.Reset();
      c.sent += static_cast<size_t>(n);
    }
    ::shutdown(c.fd.get(), SHUT_WR);
    c.out.clear();
    c.out.shrink_to_fit();
    c.phase = Phase::kLingering;
    c.deadline = Clock::now() + limits_.linger_timeout;
  }

  void Drain(Connection& c) {
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::recv(c.fd.get(), buffer, sizeof(buffer), 0);
      if (n > 0) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      return c.fd.Reset();  // end of stream or an error: done
    }
  }

  UniqueFd listener_;
  UniqueFd wake_;
  const MetricsHttpLimits limits_;
  const Handler handler_;
  const int port_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> evicted_{0};
  // The server thread's alone:
  std::vector<Connection> connections_;
  uint64_t next_order_ = 0;
  Clock::time_point accept_resume_{};
  std::thread thread_;
};

Result<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& host_port,
                                                                    const MetricsHttpLimits& limits,
                                                                    Handler handler) {
  TIER_CHECK(limits.max_connections >= 1 && limits.max_request_bytes >= 64);
  auto listener = BindListener(host_port);
  if (!listener.ok()) return listener.status();
  UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (wake.get() < 0) return Status::FromErrno(errno, "--metrics-addr: eventfd");
  auto loop = std::make_unique<Loop>(listener.take(), std::move(wake), limits, std::move(handler));
  loop->Run();
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(std::move(loop)));
}

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<Loop> loop) : loop_(std::move(loop)) {}
MetricsHttpServer::~MetricsHttpServer() = default;

int MetricsHttpServer::port() const {
  return loop_->port();
}

uint64_t MetricsHttpServer::evicted() const {
  return loop_->evicted();
}

}  // namespace tier
