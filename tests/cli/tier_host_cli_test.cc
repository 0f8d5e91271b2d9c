// tier_host_cli_test.cc -- TierHostCli: tier-host as a user runs it. Load failures exit 2 with one
// line naming the path and the cause; --check against the null provider exits 0. Every number a
// user types, every trace, profile and report path is checked before the run (exit 2 naming the
// flag or file and the value as typed), and no value can forge a log line.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

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
      // Issue 26, 6: NaN passed CLI::Range (every comparison with it is false).
      {"--provider-timeout-s", "nan", "from 0.001 to 3600", false},
      {"--provider-timeout-s", "inf", "from 0.001 to 3600", false},
      {"--provider-timeout-s", "-inf", "from 0.001 to 3600", false},
      {"--cold-read-gbps", "nan", "from 0.01 to 1000", true},
      {"--think-s", "inf", "from 0.001 to 86400", true},
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

// Issue 26, 3: --namespace is a label; the namespace used carries the layout and the bytes scale,
// so two servers of one label but another scale never share (or judge) each other's checkpoints.
TEST(TierHostCli, NamespaceCarriesTheLayoutAndTheBytesScale) {
  const CommandResult a = SmallReplay({"--namespace", "fleet", "--bytes-scale", "1000"}, {});
  const CommandResult b = SmallReplay({"--namespace", "fleet", "--bytes-scale", "500"}, {});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_NE(a.err.find("namespace fleet/qwen3.8-27b"), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("/scale1000,"), std::string::npos) << a.err;
  EXPECT_NE(b.err.find("/scale500,"), std::string::npos) << b.err;
}

// Issue 23: --tenants N spreads sessions over N tenants; each tenant's restores are its own
// (exact), and sessions of other tenants no longer reuse one another's system prefixes.
TEST(TierHostCli, TenantsKeepRestoresExactAndStopSharingAcrossTenants) {
  const auto run = [](const std::string& tenants) {
    return RunCommand({TIER_HOST, "--bytes-scale", "1000", "--tier-plugin", NULL_PLUGIN, "replay",
                       "--sessions", "12", "--no-progress", "--tenants", tenants});
  };
  const CommandResult shared = run("0"), apart = run("12");
  ASSERT_EQ(shared.exit_code, 0) << shared.err;
  ASSERT_EQ(apart.exit_code, 0) << apart.err;
  EXPECT_NE(apart.err.find(", 12 tenants"), std::string::npos) << apart.err;
  EXPECT_NE(apart.out.find("restore exact                     true"), std::string::npos)
      << apart.out;
  const auto roots = [](const std::string& out) {
    const size_t at = out.find("root prefills");
    return at == std::string::npos ? -1L : std::stol(out.substr(at + 13));
  };
  EXPECT_GT(roots(apart.out), roots(shared.out)) << "one tenant a session: nothing is shared";
}

// HostOptions::tenant_share through tier-host: a share in 0..1 runs (restores exact), one outside
// is a usage error naming the flag.
TEST(TierHostCli, TenantShareRunsWithinZeroToOneAndIsRefusedOutside) {
  const CommandResult ok = RunCommand({TIER_HOST, "--bytes-scale", "1000", "--tier-plugin",
                                       NULL_PLUGIN, "--tenant-share", "0.5", "replay", "--sessions",
                                       "6", "--no-progress", "--tenants", "3"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("restore exact                     true"), std::string::npos) << ok.out;
  for (const char* bad : {"1.5", "-0.1", "nan", "x"}) {
    const CommandResult refused =
        RunCommand({TIER_HOST, "--tier-plugin", NULL_PLUGIN, "--tenant-share", bad, "--check"});
    EXPECT_EQ(refused.exit_code, 2) << bad << ": " << refused.err;
    EXPECT_NE(refused.err.find("--tenant-share"), std::string::npos) << refused.err;
  }
}

// Issue 26, 8: gc without a cold tier is a usage error; gc of a namespace nothing is stored under
// says so (a wrong --namespace, --model-profile or --bytes-scale), and removes nothing.
TEST(TierHostCli, GcWithoutAColdTierExits2AndAnEmptyNamespaceSaysSo) {
  const CommandResult none = RunCommand({TIER_HOST, "gc", "--keep-gib", "0"});
  EXPECT_EQ(none.exit_code, 2) << none.out << none.err;
  EXPECT_NE(none.err.find("no cold tier"), std::string::npos) << none.err;
  const CommandResult null_plugin =
      RunCommand({TIER_HOST, "--tier-plugin", NULL_PLUGIN, "gc", "--keep-gib", "0"});
  EXPECT_EQ(null_plugin.exit_code, 2) << null_plugin.err;
  ScopedTempDir dir;
  const std::string cold = dir.path() + "/cold";
  ASSERT_EQ(SmallReplay({"--cold-kv-dir", cold, "--namespace", "stored"}, {}).exit_code, 0);
  const CommandResult other = RunCommand({TIER_HOST, "--cold-kv-dir", cold, "--bytes-scale", "1000",
                                          "--namespace", "typo", "gc", "--keep-gib", "0"});
  EXPECT_EQ(other.exit_code, 0) << other.err;
  EXPECT_NE(other.out.find("nothing stored under namespace 'typo/"), std::string::npos)
      << other.out;
  const CommandResult help = RunCommand({TIER_HOST, "gc", "--help"});
  EXPECT_EQ(help.out.find("safe while servers restore"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("On a shared provider (rados)"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("stop that server first"), std::string::npos) << help.out;
}

// compare-policies with one small run: the value policy at 1 GiB.
CommandResult ComparePolicies(const std::string& cold) {
  return RunCommand({TIER_HOST, "--cold-kv-dir", cold, "--bytes-scale", "1000", "compare-policies",
                     "--sessions", "1", "--no-progress", "--policies", "value", "--cold-sizes-gib",
                     "1"});
}

// Issue 26, 2: compare-policies creates its run directories; one of that name it did not create
// is refused and left as it was (a user's data, a server's cold directory).
TEST(TierHostCli, ComparePoliciesRefusesADirectoryItDidNotCreate) {
  ScopedTempDir dir;
  const std::string run = dir.path() + "/compare-value-1";
  ASSERT_EQ(::mkdir(run.c_str(), 0700), 0);
  std::ofstream(run + "/precious") << "a user's file\n";
  const CommandResult r = ComparePolicies(dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(run), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not created by compare-policies"), std::string::npos) << r.err;
  EXPECT_TRUE(std::ifstream(run + "/precious").good()) << "compare-policies deleted a user's file";
}

// Issue 26, 2: a run directory that a server holds (the disk provider's lock) is left alone, even
// one compare-policies made before (its marker is there).
TEST(TierHostCli, ComparePoliciesLeavesADirectoryAServerHolds) {
  ScopedTempDir dir;
  const std::string run = dir.path() + "/compare-value-1";
  ASSERT_EQ(::mkdir(run.c_str(), 0700), 0);
  std::ofstream(run + "/.tier-compare-policies") << "left by an earlier run\n";
  std::ofstream(run + "/in-use") << "a server's file\n";
  const int fd = ::open(run.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);  // as the disk provider holds its directory
  const CommandResult r = ComparePolicies(dir.path());
  ::close(fd);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("in use"), std::string::npos) << r.err;
  EXPECT_TRUE(std::ifstream(run + "/in-use").good()) << "compare-policies deleted a held directory";
}

// Issue 26, 2: after its runs compare-policies removes the directories it made, and nothing else.
TEST(TierHostCli, ComparePoliciesRemovesOnlyWhatItCreated) {
  ScopedTempDir dir;
  std::ofstream(dir.path() + "/neighbour") << "not compare-policies'\n";
  const CommandResult r = ComparePolicies(dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_FALSE(std::ifstream(dir.path() + "/compare-value-1/.tier-compare-policies").good())
      << "its run directory is still there";
  EXPECT_TRUE(std::ifstream(dir.path() + "/neighbour").good());
}

}  // namespace

namespace {

std::string WriteKeyFile(const std::string& path, char fill, mode_t mode) {
  std::ofstream(path) << std::string(64, fill);
  ::chmod(path.c_str(), mode);
  return path;
}

}  // namespace

// Issue 23, 2: --encryption-key-file turns encryption at rest on for the replay's cold tier (it
// still restores exact); a key file others may read is refused naming it; an old key given with
// --encryption-old-key-file still reads what it spilled (rotation), a new key alone does not.
TEST(TierHostCli, EncryptionKeyFileEncryptsTheColdTierAndRotationReadsOldCheckpoints) {
  ScopedTempDir dir;
  const std::string cold = dir.path() + "/cold";
  const std::string key_a = WriteKeyFile(dir.path() + "/a.key", 'a', 0600);
  const std::string key_b = WriteKeyFile(dir.path() + "/b.key", 'b', 0600);
  const std::string loose = WriteKeyFile(dir.path() + "/loose.key", 'c', 0644);
  // Budgets of 1 MiB: every turn goes down to the disk (2 sessions, ~20 cold restores).
  const auto Encrypted = [&](std::vector<std::string> keys) {
    std::vector<std::string> argv = {TIER_HOST, "--bytes-scale", "1000", "--cold-kv-dir",
                                     cold,      "--host-kv-mib", "1",    "--device-kv-mib",
                                     "1"};
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(),
                {"replay", "--sessions", "2", "--no-progress", "--restore-probe-mib", "0"});
    return RunCommand(argv);
  };

  const CommandResult refused = Encrypted({"--encryption-key-file", loose});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find(loose), std::string::npos) << refused.err;

  const CommandResult first = Encrypted({"--encryption-key-file", key_a});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.out.find("restore exact                     true"), std::string::npos)
      << first.out;
  // The replay spilled (that the files hold no plaintext is tests/host/encryption_test.cc's).
  ASSERT_EQ(system(("ls " + cold + "/*.ckpt >/dev/null 2>&1").c_str()), 0) << "spilled";

  // The same cold directory, restarted: under B with A as an old key the stored checkpoints are
  // re-adopted; under B alone none is (their manifests do not open).
  const auto readopted = [](const CommandResult& r) {
    const size_t at = r.err.find("re-adopted ");
    return at == std::string::npos ? -1L : std::stol(r.err.substr(at + 11));
  };
  const CommandResult rotated =
      Encrypted({"--encryption-key-file", key_b, "--encryption-old-key-file", key_a});
  ASSERT_EQ(rotated.exit_code, 0) << rotated.err;
  const CommandResult new_only = Encrypted({"--encryption-key-file", key_b});
  ASSERT_EQ(new_only.exit_code, 0) << new_only.err;
  EXPECT_GT(readopted(rotated), 0) << rotated.err;
  EXPECT_EQ(readopted(new_only), 0) << new_only.err;
}
