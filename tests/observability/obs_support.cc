#include "obs_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

namespace tier::obs {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int DecodeStatus(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

Child::~Child() {
  if (pid_ > 0) Terminate(5);
}

bool Child::Start(const std::vector<std::string>& argv, const std::string& stdout_path,
                  const std::string& stderr_path, std::string* error,
                  const std::string& stdin_path) {
  stdout_path_ = stdout_path;
  stderr_path_ = stderr_path;
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  int pipe_fds[2];  // exec failure report: closed on a successful exec (O_CLOEXEC)
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    *error = std::string("pipe2: ") + std::strerror(errno);
    return false;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    return false;
  }
  if (pid == 0) {
    // Child: die with the test process, detach from the terminal's signals, redirect, exec.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::setpgid(0, 0);
    const int in = ::open(stdin_path.empty() ? "/dev/null" : stdin_path.c_str(), O_RDONLY);
    const int out = ::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0 || err < 0) {
      const int e = errno;
      (void)!::write(pipe_fds[1], &e, sizeof(e));
      ::_exit(127);
    }
    ::dup2(in, STDIN_FILENO);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    ::execv(args[0], args.data());
    const int e = errno;
    (void)!::write(pipe_fds[1], &e, sizeof(e));
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  int child_errno = 0;
  const ssize_t n = ::read(pipe_fds[0], &child_errno, sizeof(child_errno));
  ::close(pipe_fds[0]);
  pid_ = pid;
  status_ = -1;
  if (n == static_cast<ssize_t>(sizeof(child_errno))) {
    Reap(true);
    *error = "cannot start " + argv[0] + ": " + std::strerror(child_errno);
    return false;
  }
  return true;
}

void Child::Reap(bool block) {
  if (pid_ <= 0 || status_ >= 0) return;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
  if (r == pid_) status_ = DecodeStatus(status);
}

bool Child::running() {
  Reap(false);
  return pid_ > 0 && status_ < 0;
}

int Child::exit_code() {
  Reap(false);
  return status_;
}

int Child::Wait(double timeout_s) {
  WaitFor([&] { return !running(); }, timeout_s, 0.05);
  return status_;
}

int Child::Terminate(double grace_s) {
  if (pid_ <= 0) return status_;
  if (running()) {
    ::kill(pid_, SIGTERM);
    if (Wait(grace_s) < 0) {
      ::kill(pid_, SIGKILL);
      Reap(true);
    }
  }
  const int status = status_;
  pid_ = -1;
  return status;
}

RunResult Run(const std::vector<std::string>& argv, const std::string& stdin_path,
              const std::string& scratch_dir, double timeout_s) {
  static std::atomic<int> counter{0};
  const std::string base = scratch_dir + "/run" + std::to_string(counter++);
  RunResult result;
  Child child;
  std::string error;
  if (!child.Start(argv, base + ".out", base + ".err", &error, stdin_path)) {
    result.err = error;
    return result;
  }
  result.exit_code = child.Wait(timeout_s);
  if (result.exit_code < 0) {
    child.Terminate(1);
    result.err = "timed out after " + std::to_string(timeout_s) + " s\n";
  }
  result.out = ReadFile(base + ".out");
  result.err += ReadFile(base + ".err");
  return result;
}

int FreeLoopbackPort() {
  std::random_device seed;
  std::mt19937 random(seed());
  std::uniform_int_distribution<int> below_ephemeral(10000, 19999);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int port = below_ephemeral(random);
    address.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    ::close(fd);
    if (free) return port;
  }
  return 0;
}

int MetricsPortFromLog(const std::string& log) {
  static const std::regex at(R"(metrics at http://127\.0\.0\.1:([0-9]+)/metrics)");
  std::smatch match;
  return std::regex_search(log, match, at) ? std::stoi(match[1].str()) : 0;
}

int ConnectLoopback(int port, double timeout_s, std::string* error) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout_s);
  tv.tv_usec = static_cast<suseconds_t>((timeout_s - static_cast<double>(tv.tv_sec)) * 1e6);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    const int connect_errno = errno;
    *error = "connect 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(connect_errno);
    ::close(fd);
    errno = connect_errno;
    return -1;
  }
  return fd;
}

HttpResponse HttpGet(int port, const std::string& target, double timeout_s) {
  HttpResponse response;
  const int fd = ConnectLoopback(port, timeout_s, &response.error);
  if (fd < 0) return response;
  const std::string request =
      "GET " + target + " HTTP/1.0\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    response.error = std::string("send: ") + std::strerror(errno);
    ::close(fd);
    return response;
  }
  std::string raw;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      response.error = std::string("recv: ") + std::strerror(errno);
      ::close(fd);
      return response;
    }
    raw.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  const size_t header_end = raw.find("\r\n\r\n");
  if (raw.compare(0, 5, "HTTP/") != 0 || header_end == std::string::npos) {
    response.error = "not an HTTP response: " + raw.substr(0, 200);
    return response;
  }
  const size_t space = raw.find(' ');
  response.status = std::atoi(raw.c_str() + space + 1);
  response.body = raw.substr(header_end + 4);
  return response;
}

std::string UrlEncode(const std::string& text) {
  std::string out;
  char hex[4];
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

bool WaitFor(const std::function<bool()>& condition, double timeout_s, double poll_s) {
  const double deadline = Now() + timeout_s;
  for (;;) {
    if (condition()) return true;
    if (Now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  return static_cast<bool>(file);
}

std::string Between(const std::string& text, const std::string& begin, const std::string& end) {
  const size_t b = text.find(begin);
  if (b == std::string::npos) return "";
  const size_t e = text.find(end, b + begin.size());
  if (e == std::string::npos) return "";
  return text.substr(b + begin.size(), e - b - begin.size());
}

std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

}  // namespace tier::obs
