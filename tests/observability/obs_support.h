// obs_support.h -- what the observability suites need beyond tests/support: child processes that
// are always cleaned up, free loopback ports, a tiny HTTP client, waiting on a condition.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace tier::obs {

// A child process with stdout/stderr in files. The child is killed (SIGKILL) when this test process
// dies (PR_SET_PDEATHSIG) and terminated by the destructor, so nothing outlives a failed test.
class Child {
 public:
  Child() = default;
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Starts argv[0] (a path) with stdout/stderr appended to the given files and stdin from
  // `stdin_path` ("" = /dev/null). False (and a message in *error) when it cannot be started.
  bool Start(const std::vector<std::string>& argv, const std::string& stdout_path,
             const std::string& stderr_path, std::string* error,
             const std::string& stdin_path = "");
  bool running();
  // The exit status (128 + signal when killed) once it has exited, else -1.
  int exit_code();
  // Waits up to `timeout_s` for an exit; the exit status, or -1 on timeout.
  int Wait(double timeout_s);
  // SIGTERM, up to `grace_s` to exit, then SIGKILL. Returns the exit status (see exit_code()).
  int Terminate(double grace_s = 15);
  pid_t pid() const { return pid_; }
  const std::string& stdout_path() const { return stdout_path_; }
  const std::string& stderr_path() const { return stderr_path_; }

 private:
  void Reap(bool block);
  pid_t pid_ = -1;
  int status_ = -1;
  std::string stdout_path_, stderr_path_;
};

// Runs argv to completion (stdin from `stdin_path`, "" = /dev/null); exit status and both streams.
struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
RunResult Run(const std::vector<std::string>& argv, const std::string& stdin_path,
              const std::string& scratch_dir, double timeout_s = 120);

// A loopback port that was free a moment ago (bound, then released), for a server whose port must
// be known before it starts (a scrape target in Prometheus's configuration). Picked at random
// below 20000: outside the kernel's ephemeral range (what connections take as their local
// ports, and bind(0) hands out) and the test Ceph clusters' range, so nothing but another picker
// takes it meanwhile. Where the port may be chosen by the server, prefer port 0 and
// MetricsPortFromLog.
int FreeLoopbackPort();

// The port in tier-host's "metrics at http://127.0.0.1:PORT/metrics" log line, 0 when absent.
int MetricsPortFromLog(const std::string& log);

// A TCP connection to 127.0.0.1:`port` whose sends and receives time out after `timeout_s`: its
// fd, or -1 with errno as the failed call left it, why in *error, and nothing left open.
int ConnectLoopback(int port, double timeout_s, std::string* error);

struct HttpResponse {
  int status = 0;  // HTTP status, 0 when there was no answer
  std::string body;
  std::string error;  // why there was no answer
};
// GET http://127.0.0.1:PORT<target> (HTTP/1.0, so the body ends at close).
HttpResponse HttpGet(int port, const std::string& target, double timeout_s = 10);
std::string UrlEncode(const std::string& text);

// Polls `condition` every `poll_s` until it holds or `timeout_s` passes; whether it held.
bool WaitFor(const std::function<bool()>& condition, double timeout_s, double poll_s = 0.1);

std::string ReadFile(const std::string& path);
bool WriteFile(const std::string& path, const std::string& text);

// The text between `begin` and `end` in `text` ("" when a marker is missing).
std::string Between(const std::string& text, const std::string& begin, const std::string& end);

// Replaces every occurrence of `from` by `to`.
std::string ReplaceAll(std::string text, const std::string& from, const std::string& to);

}  // namespace tier::obs
