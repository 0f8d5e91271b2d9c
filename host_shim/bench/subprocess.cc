#include "subprocess.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

extern char** environ;

namespace tier::bench {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

Result<Captured> RunCaptured(const std::vector<std::string>& argv) {
  char out_path[] = "/tmp/tier-bench-out.XXXXXX";
  char err_path[] = "/tmp/tier-bench-err.XXXXXX";
  const int out_fd = ::mkstemp(out_path);
  if (out_fd < 0) return Status(TIER_IO_ERROR, std::string("mkstemp: ") + std::strerror(errno));
  const int err_fd = ::mkstemp(err_path);
  if (err_fd < 0) {
    ::close(out_fd);
    ::unlink(out_path);
    return Status(TIER_IO_ERROR, std::string("mkstemp: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_fd);
  ::close(err_fd);
  Captured captured;
  if (rc == 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    captured.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    captured.out = Slurp(out_path);
    captured.err = Slurp(err_path);
  }
  ::unlink(out_path);
  ::unlink(err_path);
  if (rc != 0) {
    return Status(rc == ENOENT ? TIER_UNSUPPORTED : TIER_IO_ERROR,
                  argv[0] + ": " + std::strerror(rc));
  }
  return captured;
}

std::string JoinCommand(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& a : argv) line += (line.empty() ? "" : " ") + a;
  return line;
}

}  // namespace tier::bench
