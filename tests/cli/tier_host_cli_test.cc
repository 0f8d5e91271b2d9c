// tier_host_cli_test.cc -- TierHostCli: tier-host as a user runs it. Load failures exit 2 with one
// line naming the path and the cause; --check against the null provider exits 0. Every number a
// user types, every trace, profile and report path is checked before the run (exit 2 naming the
// flag or file and the value as typed), and no value can forge a log line.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.h"
#include "tier_provider.h"

namespace {

using tier::test::CommandResult;
using tier::test::CountLines;
using tier::test::RunCommand;
using tier::test::ScopedTempDir;

// A small replay (one session, 1/1000 of the bytes) with the null provider, or the disk provider
// when `server` has --cold-kv-dir; `server` flags go before `replay`, `replay_flags` after it.
CommandResult SmallReplay(const std::vector<std::string>& server,
                          const std::vector<std::string>& replay_flags) {
  std::vector<std::string> argv = {TIER_HOST};
  if (std::find(server.begin(), server.end(), "--bytes-scale") == server.end()) {
    argv.insert(argv.end(), {"--bytes-scale", "1000"});
  }
  if (std::find(server.begin(), server.end(), "--cold-kv-dir") == server.end()) {
    argv.insert(argv.end(), {"--tier-plugin", NULL_PLUGIN});
  }
  argv.insert(argv.end(), server.begin(), server.end());
  argv.insert(argv.end(), {"replay", "--sessions", "1", "--no-progress"});
  argv.insert(argv.end(), replay_flags.begin(), replay_flags.end());
  return RunCommand(argv);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(TierHostCli, MissingPluginExits2WithOneLine) {
  auto r = RunCommand({TIER_HOST, "--tier-plugin", "/no/such.so", "--check"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("'/no/such.so': no such file"), std::string::npos) << r.err;
}

TEST(TierHostCli, NonElfFileExits2WithOneLine) {
  tier::test::ScopedTempDir dir;
  const std::string path = dir.path() + "/notes.txt";
  std::ofstream(path) << "not a plugin\n";
  auto r = RunCommand({TIER_HOST, "--tier-plugin", path, "--check"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("'" + path + "': not a shared object"), std::string::npos) << r.err;
}

TEST(TierHostCli, WrongMajorExits2WithOneLine) {
  auto r = RunCommand({TIER_HOST, "--tier-plugin", WRONG_MAJOR_PLUGIN, "--check"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(
      r.err.find("ABI major version mismatch: plugin 2." + std::to_string(TIER_ABI_VERSION_MINOR) +
                 ", host 1." + std::to_string(TIER_ABI_VERSION_MINOR)),
      std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(WRONG_MAJOR_PLUGIN), std::string::npos) << r.err;
}

TEST(TierHostCli, NullCheckPassesAndPrintsNegotiatedAbi) {
  auto r = RunCommand({TIER_HOST, "--tier-plugin", NULL_PLUGIN, "--check"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ABI        1." + std::to_string(TIER_ABI_VERSION_MINOR) + " (host 1." +
                       std::to_string(TIER_ABI_VERSION_MINOR) + ", plugin 1." +
                       std::to_string(TIER_ABI_VERSION_MINOR) + ")"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("provider   null"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("check passed"), std::string::npos) << r.out;
}

TEST(TierHostCli, ShortPluginNameResolvesInTheBuildTree) {
  auto r = RunCommand({TIER_HOST, "--tier-plugin", "null", "--check"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST(TierHostCli, UnknownProviderOptionExits2NamingIt) {
  auto r =
      RunCommand({TIER_HOST, "--tier-plugin", NULL_PLUGIN, "--tier-opt", "colour=blue", "--check"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("option 'colour'"), std::string::npos) << r.err;
}

TEST(TierHostCli, MalformedTierOptExits2) {
  auto r =
      RunCommand({TIER_HOST, "--tier-plugin", NULL_PLUGIN, "--tier-opt", "novalue", "--check"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("expected KEY=VALUE"), std::string::npos) << r.err;
}

TEST(TierHostCli, HelpAndVersion) {
  auto help = RunCommand({TIER_HOST, "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--tier-plugin"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--check"), std::string::npos);
  auto version = RunCommand({TIER_HOST, "--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.out.find("tier ABI 1." + std::to_string(TIER_ABI_VERSION_MINOR)),
            std::string::npos)
      << version.out;
}

TEST(TierHostCli, UnknownFlagExits2) {
  auto r = RunCommand({TIER_HOST, "--no-such-flag"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--no-such-flag"), std::string::npos) << r.err;
}

// 16.8: sizes and counts that wrapped (-1, 2^44 MiB, 2^64), or were refused in the provider's
// words, are refused naming the flag, the value as typed and a readable range.
TEST(TierHostCli, OutOfRangeNumbersExit2NamingFlagValueAndRange) {
  struct Case {
    std::string flag, value, range;
    bool replay_flag;
  };
  const Case cases[] = {
      {"--host-kv-mib", "-1", "0 B to 16 PiB", false},
      {"--host-kv-mib", "17592186044416", "0 B to 16 PiB", false},  // 2^44 MiB: was 0 bytes
      {"--device-kv-mib", "18446744073709551616", "0 B to 16 PiB", false},
      {"--device-kv-mib", "1.5", "0 B to 16 PiB", false},
      {"--cold-kv-gib", "1e30", "1 MiB to 16 PiB", false},
      {"--cold-kv-gib", "-1", "1 MiB to 16 PiB", false},
      {"--cold-kv-gib", "inf", "1 MiB to 16 PiB", false},
      {"--bytes-scale", "0", "from 1 to 1073741824", false},
      {"--bytes-scale", "-1000", "from 1 to 1073741824", false},
      {"--max-concurrency", "0", "from 1 to 1024", false},
      {"--max-concurrency", "4294967297", "from 1 to 1024", false},
      {"--sessions", "-1", "from 1 to 100000", true},
      {"--trace-time-scale", "0", "from 0.0001 to 10000", true},
      {"--trace-time-scale", "nan", "from 0.0001 to 10000", true},
      {"--wait-for-scrape", "1e309", "from 0 to 3600", true},
      {"--seed", "-1", "from 0 to 18446744073709551615", true},
  };
  ScopedTempDir dir;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.flag + " " + c.value);
    std::vector<std::string> server = {"--cold-kv-dir", dir.path() + "/cold"};
    std::vector<std::string> replay;
    (c.replay_flag ? replay : server)
        .insert((c.replay_flag ? replay : server).end(), {c.flag, c.value});
    const CommandResult r = SmallReplay(server, replay);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_EQ(CountLines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(c.flag + ": '" + c.value + "' is not a "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.range), std::string::npos) << r.err;
    EXPECT_LT(r.err.size(), 200u) << "a readable range, not a 309-digit number";
  }
}

TEST(TierHostCli, ColdBudgetBelowOneByteAfterBytesScaleNamesBothFlags) {
  ScopedTempDir dir;
  const CommandResult r = SmallReplay({"--cold-kv-dir", dir.path() + "/cold", "--cold-kv-gib",
                                       "0.001", "--bytes-scale", "1073741824"},
                                      {});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--cold-kv-gib 0.001 with --bytes-scale 1073741824"), std::string::npos)
      << r.err;
}

TEST(TierHostCli, HelpShowsTheRangesAndTheTraceBounds) {
  const CommandResult top = RunCommand({TIER_HOST, "--help"});
  EXPECT_NE(top.out.find("0 B to 16 PiB"), std::string::npos) << top.out;
  const CommandResult replay = RunCommand({TIER_HOST, "replay", "--help"});
  EXPECT_NE(replay.out.find("lines of at most 1 MiB"), std::string::npos) << replay.out;
  EXPECT_NE(replay.out.find("input_length 1 to 4194304"), std::string::npos) << replay.out;
}

// 16.7 through tier-host: was `internal error: std::bad_alloc`, exit 1.
TEST(TierHostCli, NegativeInputLengthInATraceExits2NamingLineAndField) {
  ScopedTempDir dir;
  const std::string trace = dir.path() + "/t.jsonl";
  std::ofstream(trace) << R"({"timestamp": 0, "input_length": -5, "output_length": 1, )"
                          R"("hash_ids": []})"
                          "\n";
  const CommandResult r = SmallReplay({}, {"--trace", trace});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("trace '" + trace + "' line 1: field 'input_length' is -5"),
            std::string::npos)
      << r.err;
  const CommandResult as_dir = SmallReplay({}, {"--trace", dir.path()});
  EXPECT_EQ(as_dir.exit_code, 2);
  EXPECT_NE(as_dir.err.find("is a directory"), std::string::npos) << as_dir.err;
}

// 16.9 through tier-host.
TEST(TierHostCli, AbsurdModelProfileExits2NamingTheField) {
  ScopedTempDir dir;
  const std::string profile = dir.path() + "/p.json";
  std::ofstream(profile) << R"({"name": "x", "kv_bytes_per_token": 4611686018427387904})";
  const CommandResult r = SmallReplay({"--model-profile", profile}, {});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("model profile '" + profile + "': field '"), std::string::npos) << r.err;
}

// 16.10: a directory or a missing parent is refused before the replay (nothing printed); a write
// that fails (/dev/full) is exit 2 with the reason, not exit 0 with an empty file.
TEST(TierHostCli, UnwritableReportExits2BeforeTheReplay) {
  ScopedTempDir dir;
  const CommandResult to_dir = SmallReplay({}, {"--report-json", dir.path()});
  EXPECT_EQ(to_dir.exit_code, 2) << to_dir.err;
  EXPECT_EQ(to_dir.err.find("replay: agents"), std::string::npos) << "refused before the replay";
  EXPECT_TRUE(to_dir.out.empty()) << to_dir.out;
  EXPECT_NE(to_dir.err.find("--report-json '" + dir.path() + "': is a directory"),
            std::string::npos)
      << to_dir.err;
  const std::string orphan = dir.path() + "/no/such/dir/r.json";
  const CommandResult missing = SmallReplay({}, {"--report-json", orphan});
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_TRUE(missing.out.empty()) << missing.out;
  EXPECT_NE(missing.err.find("the directory '" + dir.path() + "/no/such/dir' does not exist"),
            std::string::npos)
      << missing.err;
}

TEST(TierHostCli, ReportWriteThatFailsExits2WithTheReason) {
  if (std::ofstream("/dev/full").fail()) GTEST_SKIP() << "/dev/full is not available here";
  const CommandResult r = SmallReplay({}, {"--report-json", "/dev/full"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--report-json '/dev/full': write failed: No space left on device"),
            std::string::npos)
      << r.err;
  ScopedTempDir dir;
  const std::string good = dir.path() + "/r.json";
  const CommandResult ok = SmallReplay({}, {"--report-json", good});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  std::ifstream written(good);
  std::string first;
  EXPECT_TRUE(std::getline(written, first) && first == "{") << first;
}

// 16.12: a newline in --namespace or --cold-kv-dir is shown as \n; it cannot start a line.
TEST(TierHostCli, ControlCharactersInValuesCannotForgeLogLines) {
  ScopedTempDir dir;
  const std::string forged = "tier: error: forged";
  const std::string cold = dir.path() + "/c\n" + forged + "\t\x1b[31m";
  const CommandResult r = SmallReplay(
      {"--namespace", "ns\n" + forged, "--cold-kv-dir", cold, "--cold-kv-gib", "1"}, {});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& line : Lines(r.err)) {
    EXPECT_EQ(line.rfind(forged, 0), std::string::npos) << "forged line: " << line;
    EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
  }
  EXPECT_NE(r.err.find("namespace ns\\n" + forged), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("/c\\n" + forged + "\\t\\x1b[31m"), std::string::npos) << r.err;
}

}  // namespace
