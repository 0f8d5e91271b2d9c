#include "test_support.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>

extern char** environ;

namespace tier::test {
namespace {

std::string TempRoot() {
  const char* candidates[] = {std::getenv("TIER_TEST_TMPDIR"), "/var/tmp", "/tmp"};
  for (const char* candidate : candidates) {
    if (candidate != nullptr && ::access(candidate, W_OK) == 0) return candidate;
  }
  return ".";
}

std::string ReadAll(int fd) {
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace

ScopedTempDir::ScopedTempDir(const std::string& prefix) {
  std::string pattern = TempRoot() + "/" + prefix + "-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed for " + pattern);
  }
  path_ = pattern;
}

ScopedTempDir::~ScopedTempDir() {
  RemoveTree(path_);
}

void RemoveTree(const std::string& path) {
  std::error_code ignored;
  // Make everything writable first so a test that chmod'ed a directory can still be cleaned.
  for (auto it = std::filesystem::recursive_directory_iterator(path, ignored);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ignored)) {
    if (!it->is_symlink(ignored)) {
      std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all,
                                   std::filesystem::perm_options::add, ignored);
    }
  }
  std::filesystem::remove_all(path, ignored);
}

CommandResult RunCommand(const std::vector<std::string>& argv) {
  CommandResult result;
  // Files rather than pipes: no risk of a full pipe blocking the child while we wait.
  FILE* out = std::tmpfile();
  FILE* err = std::tmpfile();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fileno(out), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fileno(err), STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) == 0) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  posix_spawn_file_actions_destroy(&actions);
  std::rewind(out);
  std::rewind(err);
  result.out = ReadAll(fileno(out));
  result.err = ReadAll(fileno(err));
  std::fclose(out);
  std::fclose(err);
  return result;
}

int CountLines(const std::string& text) {
  int lines = 0;
  bool content = false;
  for (char c : text) {
    if (c == '\n') {
      lines += content ? 1 : 0;
      content = false;
    } else {
      content = true;
    }
  }
  return lines + (content ? 1 : 0);
}

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

uint64_t RandomSeed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) | rd();
}

std::string SelfExe() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "";
  path[n] = '\0';
  return path;
}

}  // namespace tier::test
