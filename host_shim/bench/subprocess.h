// subprocess.h -- runs a program to completion and captures its output (fio, and tier-bench's
// own memory-probe child).
#pragma once

#include <string>
#include <vector>

#include <tier/status.h>

namespace tier::bench {

struct Captured {
  int exit_code = -1;  // 128 + signal when it was killed
  std::string out;
  std::string err;
};

// Runs argv (argv[0] looked up in PATH when it has no '/'), stdout and stderr captured through
// temporary files, and waits. UNSUPPORTED when argv[0] cannot be found; IO_ERROR otherwise.
Result<Captured> RunCaptured(const std::vector<std::string>& argv);

// argv joined with spaces (for reports; arguments are not quoted).
std::string JoinCommand(const std::vector<std::string>& argv);

}  // namespace tier::bench
