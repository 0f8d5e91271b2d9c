// tier_host_cli_test.cc -- TierHostCli: tier-host as a user runs it. Load failures exit 2 with one
// line naming the path and the cause; --check against the null provider exits 0.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "test_support.h"
#include "tier_provider.h"

namespace {

using tier::test::CountLines;
using tier::test::RunCommand;

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
  EXPECT_NE(r.err.find("ABI major version mismatch: plugin 2." + std::to_string(TIER_ABI_VERSION_MINOR) + ", host 1." + std::to_string(TIER_ABI_VERSION_MINOR)), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(WRONG_MAJOR_PLUGIN), std::string::npos) << r.err;
}

TEST(TierHostCli, NullCheckPassesAndPrintsNegotiatedAbi) {
  auto r = RunCommand({TIER_HOST, "--tier-plugin", NULL_PLUGIN, "--check"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ABI        1." + std::to_string(TIER_ABI_VERSION_MINOR) + " (host 1." + std::to_string(TIER_ABI_VERSION_MINOR) + ", plugin 1." + std::to_string(TIER_ABI_VERSION_MINOR) + ")"), std::string::npos) << r.out;
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
  EXPECT_NE(version.out.find("tier ABI 1." + std::to_string(TIER_ABI_VERSION_MINOR)), std::string::npos) << version.out;
}

TEST(TierHostCli, UnknownFlagExits2) {
  auto r = RunCommand({TIER_HOST, "--no-such-flag"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--no-such-flag"), std::string::npos) << r.err;
}

}  // namespace
