// powerloss_util.h -- small helpers of the power-loss suites: scratch directories on tmpfs (the
// fault filesystem's backing and the crash states checked; nothing here needs a real disk),
// environment knobs, the test executable's own path.
#pragma once

#include <cstdint>
#include <string>

#include "test_support.h"

namespace tier::powerloss::test {

// A fresh directory under /dev/shm (or TMPDIR, or /tmp), removed with its contents at destruction.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  // Creates (0700) and returns path()/name.
  std::string Sub(const std::string& name) const;

 private:
  std::string path_;
};

// Environment knobs, seeds, the executable's path: the suites' shared ones (test_support.h).
using ::tier::test::EnvOr;
using ::tier::test::RandomSeed;
using ::tier::test::SelfExe;

}  // namespace tier::powerloss::test
