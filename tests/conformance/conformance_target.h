// conformance_target.h -- which provider the AbiConformance suite runs against (set from the
// command line by conformance_main.cc before the tests are instantiated).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace tier::conformance {

enum class Expectation { kAuto, kAbsent, kFull };

struct Target {
  std::string name;                  // the provider table's name: the test-name suffix
  std::string path;                  // the shared object
  std::vector<std::string> options;  // KEY=VALUE; "{tmpdir}" becomes a fresh directory per test
  std::string namespace_id = "conformance";
  Expectation expectation = Expectation::kAuto;  // kAuto: absent when capacity is 0
};

std::vector<Target>& Targets();

// GoogleTest names a failing test's parameter with this: the provider's name, not its bytes.
inline void PrintTo(const Target& target, std::ostream* out) {
  *out << target.name << " (" << target.path << ")";
}

// Settings for the whole run (set from the command line before the tests run).
struct SuiteOptions {
  // How long a test waits for one accepted spill or restore (or a close) before failing it.
  int op_timeout_s = 30;
};

SuiteOptions& Options();

}  // namespace tier::conformance
