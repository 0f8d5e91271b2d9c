// test_support.h -- small helpers shared by the test suites: temporary directories, running a
// command with its output captured, environment knobs, seeds and the test executable's path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tier::test {

// A fresh directory (mode 0700) removed recursively on destruction. Created under
// $TIER_TEST_TMPDIR, else /var/tmp (a real disk, so O_DIRECT works), else /tmp.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& prefix = "tier-test");
  ~ScopedTempDir();
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Removes a directory tree (no-op when absent).
void RemoveTree(const std::string& path);

struct CommandResult {
  int exit_code = -1;  // the exit status, or 128 + signal number
  std::string out;     // stdout
  std::string err;     // stderr
};

// Runs argv[0] with arguments (no shell), waits, and captures both streams.
CommandResult RunCommand(const std::vector<std::string>& argv);

// Number of non-empty lines in `text`.
int CountLines(const std::string& text);

// The value of environment variable `name` as an unsigned number, or `fallback` when it is unset
// or empty (a test's knob: TIER_SIM_SEEDS, TIER_CRASH_KILLS, ...).
uint64_t EnvOr(const char* name, uint64_t fallback);
// 64 bits from std::random_device: a run's seed (print it, so the run can be replayed).
uint64_t RandomSeed();
// This executable's path (/proc/self/exe), or "" when it cannot be read.
std::string SelfExe();

}  // namespace tier::test
