// replay_test.cc -- Replay: tier-host replay end to end at small scale, with the disk and the null
// providers, a restart on the same cold directory, and the shared Mooncake trace when present.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_support.h"

namespace {

using nlohmann::json;
using tier::test::RunCommand;
using tier::test::ScopedTempDir;

json ReadJson(const std::string& path) {
  std::ifstream file(path);
  return json::parse(file);
}

// Small enough for CI: a few sessions of 20-40k tokens at 1/1000 of the bytes.
std::vector<std::string> AgentsReplay(const std::string& cold_dir, const std::string& report) {
  return {TIER_HOST,
          "--cold-kv-dir",
          cold_dir,
          "--cold-kv-gib",
          "64",
          "--bytes-scale",
          "1000",
          "--device-kv-mib",
          "2048",
          "--host-kv-mib",
          "3072",
          "replay",
          "--workload",
          "agents",
          "--sessions",
          "6",
          "--report-json",
          report,
          "--no-progress"};
}

TEST(Replay, AgentsWithDiskRestoresFromColdExactly) {
  ScopedTempDir dir;
  const std::string report = dir.path() + "/report.json";
  auto args = AgentsReplay(dir.path() + "/cold", report);
  args.push_back("--compare-null");
  auto r = RunCommand(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json doc = ReadJson(report);
  for (const char* field :
       {"requests", "device_hits", "host_restores", "cold_restores", "skip_to_root",
        "root_prefills", "prefill_seconds", "prefill_seconds_saved", "ttft_p50_s", "ttft_p99_s",
        "bytes_spilled_logical", "bytes_spilled_stored", "bytes_restored_logical",
        "bytes_restored_stored", "peak_cold_bytes_logical", "restore_exact"}) {
    EXPECT_TRUE(doc.contains(field)) << "report lacks " << field;
  }
  EXPECT_EQ(doc["provider"], "disk");
  EXPECT_GT(doc["cold_restores"].get<int>(), 0) << r.out;
  EXPECT_TRUE(doc["restore_exact"].get<bool>());
  EXPECT_GT(doc["bytes_spilled_stored"].get<uint64_t>(), 0u);
  EXPECT_EQ(doc["provider_calls_outside_admission"].get<int>(), 0);
  // The same workload without a cold tier: no cold restores, more prefill.
  const json& null_run = doc["compare_null"];
  EXPECT_EQ(null_run["provider"], "null");
  EXPECT_EQ(null_run["cold_restores"].get<int>(), 0);
  EXPECT_EQ(null_run["requests"], doc["requests"]);
  EXPECT_GT(null_run["prefill_seconds"].get<double>(), doc["prefill_seconds"].get<double>());
  EXPECT_NE(r.out.find("prefill s saved"), std::string::npos) << r.out;
}

TEST(Replay, SecondRunReadoptsTheFirstRunsCheckpoints) {
  ScopedTempDir dir;
  const std::string cold = dir.path() + "/cold";
  auto first = RunCommand(AgentsReplay(cold, dir.path() + "/first.json"));
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  auto second = RunCommand(AgentsReplay(cold, dir.path() + "/second.json"));
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  const json doc = ReadJson(dir.path() + "/second.json");
  EXPECT_GT(doc["readopted_checkpoints"].get<int>(), 0) << second.err;
  EXPECT_GT(doc["cold_restores_of_readopted"].get<int>(), 0)
      << "the second run restored checkpoints the first run parked";
  EXPECT_TRUE(doc["restore_exact"].get<bool>());
}

TEST(Replay, NullProviderIsTwoTierBehaviour) {
  ScopedTempDir dir;
  const std::string report = dir.path() + "/report.json";
  auto args = AgentsReplay("", report);  // --cold-kv-dir "" = no cold tier
  auto r = RunCommand(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json doc = ReadJson(report);
  EXPECT_EQ(doc["provider"], "null");
  EXPECT_EQ(doc["cold_restores"].get<int>(), 0);
  EXPECT_EQ(doc["bytes_spilled_stored"].get<int>(), 0);
  EXPECT_GT(doc["root_prefills"].get<int>(), 0);
}

TEST(Replay, MooncakeTraceRestoresFromColdExactly) {
  const std::string trace = SHARED_TRACE;
  if (std::ifstream(trace).fail()) {
    GTEST_SKIP() << "the shared trace " << trace << " is absent on this machine";
  }
  ScopedTempDir dir;
  const std::string report = dir.path() + "/trace.json";
  auto r = RunCommand({TIER_HOST, "--cold-kv-dir", dir.path() + "/cold", "--cold-kv-gib", "256",
                       "--bytes-scale", "1000", "--max-concurrency", "16", "replay", "--trace",
                       trace, "--report-json", report, "--no-progress"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json doc = ReadJson(report);
  EXPECT_EQ(doc["requests"].get<int>(), 3993);
  EXPECT_TRUE(doc["restore_exact"].get<bool>());
  EXPECT_GT(doc["cold_restores"].get<int>(), 0);
  EXPECT_GT(doc["shared_prefixes_published"].get<int>(), 0);
}

TEST(Replay, BadInputsExit2WithAClearError) {
  auto missing = RunCommand({TIER_HOST, "replay", "--trace", "/no/such/trace.jsonl"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("/no/such/trace.jsonl"), std::string::npos) << missing.err;
  ScopedTempDir dir;
  const std::string bad = dir.path() + "/bad.jsonl";
  std::ofstream(bad) << "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 1, "
                        "\"hash_ids\": [1]}\n";
  auto malformed = RunCommand({TIER_HOST, "replay", "--trace", bad});
  EXPECT_EQ(malformed.exit_code, 2);
  EXPECT_NE(malformed.err.find("line 1"), std::string::npos) << malformed.err;
  auto no_trace = RunCommand({TIER_HOST, "replay", "--workload", "trace"});
  EXPECT_EQ(no_trace.exit_code, 2);
  auto profile = RunCommand({TIER_HOST, "--model-profile", "no-such-profile", "replay"});
  EXPECT_EQ(profile.exit_code, 2);
  EXPECT_NE(profile.err.find("no-such-profile"), std::string::npos) << profile.err;
  auto scale = RunCommand({TIER_HOST, "--bytes-scale", "0", "replay"});
  EXPECT_EQ(scale.exit_code, 2);
  auto conflict = RunCommand({TIER_HOST, "--cold-kv-dir", "", "--tier-plugin", "disk", "replay"});
  EXPECT_EQ(conflict.exit_code, 2);
  EXPECT_NE(conflict.err.find("turns the cold tier off"), std::string::npos) << conflict.err;
}

}  // namespace
