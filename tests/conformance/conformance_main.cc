// tier-conformance: runs the AbiConformance suite against any tier provider.
//
//   tier-conformance --tier-plugin PATH [--tier-opt KEY=VALUE ...] [--expect auto|absent|full]
//                    [--namespace NS] [--tier-plugin PATH2 ...] [--tier-op-timeout-s S]
//                    [gtest flags]
//   tier-conformance --list-rules       (the rule table of abi/tier_provider.h, as markdown)
//
// Options after a --tier-plugin belong to it. "{tmpdir}" in an option value is replaced by a
// fresh directory for each test. Test names end in the provider's name: .../null, .../disk.
// --tier-op-timeout-s (1..3600, default 30) bounds every wait for a completion or a close: an
// operation that never completes fails its test then, and that provider's later tests are skipped.
// After the last test it prints, per provider, how many rules of the table (rules.cc) were checked,
// skipped (and why) and failed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <tier/host/host_services.h>
#include <tier/host/metrics_registry.h>
#include <tier/host/plugin_loader.h>
#include "conformance_target.h"
#include "rules.h"

namespace tier::conformance {

std::vector<Target>& Targets() {
  static std::vector<Target> targets;
  return targets;
}

SuiteOptions& Options() {
  static SuiteOptions options;
  return options;
}

namespace {

int Usage(const char* message) {
  std::fprintf(stderr,
               "tier-conformance: %s\nusage: tier-conformance --tier-plugin PATH [--tier-opt "
               "KEY=VALUE ...] [--expect auto|absent|full] [--namespace NS] "
               "[--tier-op-timeout-s S] [gtest flags]\n       tier-conformance --list-rules\n",
               message);
  return 2;
}

// Parses --tier-op-timeout-s's value: whole seconds in [1, 3600].
bool ParseTimeout(const std::string& text, int* seconds) {
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < 1 || value > 3600) return false;
  *seconds = static_cast<int>(value);
  return true;
}

}  // namespace
}  // namespace tier::conformance

int main(int argc, char** argv) {
  using tier::conformance::Expectation;
  using tier::conformance::Target;
  auto& targets = tier::conformance::Targets();
  std::vector<char*> gtest_args{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--list-rules") {
      tier::conformance::PrintRuleTable();
      return 0;
    }
    if (arg == "--tier-op-timeout-s" && has_value) {
      const std::string value = argv[++i];
      if (!tier::conformance::ParseTimeout(value, &tier::conformance::Options().op_timeout_s)) {
        return tier::conformance::Usage(
            ("--tier-op-timeout-s '" + value + "': expected whole seconds in [1, 3600]").c_str());
      }
    } else if (arg == "--tier-plugin" && has_value) {
      targets.push_back(Target{});
      targets.back().path = tier::ResolvePluginPath(argv[++i]);
    } else if ((arg == "--tier-opt" || arg == "--expect" || arg == "--namespace") && has_value) {
      if (targets.empty()) return tier::conformance::Usage((arg + " before --tier-plugin").c_str());
      const std::string value = argv[++i];
      if (arg == "--tier-opt") {
        targets.back().options.push_back(value);
      } else if (arg == "--namespace") {
        targets.back().namespace_id = value;
      } else if (value == "auto" || value == "absent" || value == "full") {
        targets.back().expectation = value == "auto"     ? Expectation::kAuto
                                     : value == "absent" ? Expectation::kAbsent
                                                         : Expectation::kFull;
      } else {
        return tier::conformance::Usage(("--expect '" + value + "'").c_str());
      }
    } else if (arg.rfind("--tier-", 0) == 0 || arg == "--expect" || arg == "--namespace") {
      return tier::conformance::Usage(("bad or incomplete option " + arg).c_str());
    } else {
      gtest_args.push_back(argv[i]);
    }
  }
  if (targets.empty()) return tier::conformance::Usage("no --tier-plugin given");
  // Name each target after its provider table, so tests read AbiConformance.X/disk.
  tier::MetricsRegistry metrics;
  tier::HostServices host(&metrics);
  for (Target& target : targets) {
    auto library = tier::PluginLibrary::Load(target.path, host.table());
    if (!library.ok()) {
      std::fprintf(stderr, "tier-conformance: %s\n", library.status().message().c_str());
      return 2;
    }
    target.name = library.value()->name();
  }
  int gtest_argc = static_cast<int>(gtest_args.size());
  gtest_args.push_back(nullptr);
  ::testing::InitGoogleTest(&gtest_argc, gtest_args.data());
  ::testing::UnitTest::GetInstance()->listeners().Append(
      tier::conformance::NewRuleSummaryPrinter());
  return RUN_ALL_TESTS();
}
