// replay_test.cc -- Replay: tier-host replay end to end at small scale, with the disk and the null
// providers, a restart on the same cold directory, and the shared Mooncake trace when present.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
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
  // From cold: at admission, or ahead of it by a prefetch hint (which of the two depends on how
  // long this machine takes for a restore).
  EXPECT_GT(doc["cold_restores"].get<int>() + doc["prefetches_used"].get<int>(), 0) << r.out;
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
  // The modelled restore cost: which restores happen does not depend on this machine's load.
  auto args = [&](const std::string& report) {
    auto a = AgentsReplay(cold, report);
    a.insert(a.end(), {"--restore-cost", "model"});
    return a;
  };
  auto first = RunCommand(args(dir.path() + "/first.json"));
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  auto second = RunCommand(args(dir.path() + "/second.json"));
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

TEST(Replay, ReturningSessionFiguresAreReportedAndAddUp) {
  ScopedTempDir dir;
  const std::string report = dir.path() + "/report.json";
  auto args = AgentsReplay(dir.path() + "/cold", report);
  args.insert(args.end(), {"--restore-cost", "model"});  // six sessions
  auto r = RunCommand(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json doc = ReadJson(report);
  ASSERT_TRUE(doc.contains("returning")) << doc.dump(2);
  const json& returning = doc["returning"];
  ASSERT_FALSE(returning.empty());
  uint64_t requests = 0;
  for (const auto& [kind, f] : returning.items()) {
    SCOPED_TRACE(kind);
    EXPECT_TRUE(kind == "device" || kind == "host" || kind == "cold" || kind == "cold_prefetched" ||
                kind == "root");
    requests += f["requests"].get<uint64_t>();
    EXPECT_GT(f["requests"].get<uint64_t>(), 0u);
    EXPECT_LE(f["ttft_p50_s"].get<double>(), f["ttft_p99_s"].get<double>());
    EXPECT_LE(f["queue_p50_s"].get<double>(), f["queue_p99_s"].get<double>());
    EXPECT_GT(f["root_prefill_p50_s"].get<double>(), 0);
    EXPECT_GT(f["parked_tokens_p50"].get<double>(), 0);
    EXPECT_NEAR(f["ttft_mean_s"].get<double>(),
                f["queue_mean_s"].get<double>() + f["restore_mean_s"].get<double>() +
                    f["prefill_mean_s"].get<double>(),
                1e-6)
        << "TTFT is queue + restore + prefill";
    if (kind != "root") {
      // Resuming cost less than the root prefill those requests would have needed.
      EXPECT_LT(f["restore_p50_s"].get<double>() + f["prefill_p50_s"].get<double>(),
                f["root_prefill_p50_s"].get<double>());
    }
  }
  uint64_t from_cold = 0;
  for (const char* kind : {"cold", "cold_prefetched"}) {
    if (returning.contains(kind)) from_cold += returning[kind]["requests"].get<uint64_t>();
  }
  EXPECT_EQ(doc["returning_from_cold"]["requests"].get<uint64_t>(), from_cold);
  if (from_cold > 0) {
    EXPECT_NE(r.out.find("returning sessions restored from cold ("), std::string::npos) << r.out;
    EXPECT_LT(doc["returning_from_cold"]["restore_mean_s"].get<double>(),
              doc["returning_from_cold"]["root_prefill_p50_s"].get<double>());
  }
  // Every turn after a session's first resumes a parked conversation (or could not).
  EXPECT_EQ(requests, doc["requests"].get<uint64_t>() - 6);
  EXPECT_NE(r.out.find("returning sessions"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("s root prefill"), std::string::npos) << r.out;
  EXPECT_FALSE(doc["stability"]["unstable"].get<bool>()) << doc["stability"].dump();
  EXPECT_EQ(doc["restore_cost"], "model 2.4 GB/s");
}

// A Mooncake-format trace written here: `count` requests of 2048 tokens, `gap_ms` apart.
std::string WriteTrace(const std::string& dir, int count, int gap_ms) {
  const std::string path = dir + "/trace.jsonl";
  std::ofstream out(path);
  for (int i = 0; i < count; ++i) {
    out << "{\"timestamp\": " << i * gap_ms << ", \"input_length\": 2048, \"output_length\": 40, "
        << "\"hash_ids\": [1, 2, " << 1000 + i << ", " << 2000 + i << "]}\n";
  }
  return path;
}

// Measured cost at 1/1000 of the bytes (README, replay): a cold restore is charged its logical
// bytes at the rate of full-size restores timed before the replay, not its wall time x 1000; the
// probe's scratch namespace leaves nothing in the cold directory.
TEST(Replay, MeasuredCostAtAScaleChargesTheFullSizeProbeRate) {
  ScopedTempDir dir;
  const std::string report = dir.path() + "/report.json";
  auto args = AgentsReplay(dir.path() + "/cold", report);
  args.insert(args.end(), {"--restore-cost", "measured", "--restore-probe-mib", "4,16"});
  auto r = RunCommand(args);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json doc = ReadJson(report);
  EXPECT_EQ(doc["restore_cost"], "measured (full-size restore probe)");
  ASSERT_TRUE(doc.contains("restore_probe")) << doc.dump(2);
  const json& probe = doc["restore_probe"];
  const double rate = probe["bytes_per_second"].get<double>();
  const double fixed_s = probe["fixed_s"].get<double>();
  ASSERT_GT(rate, 0);
  EXPECT_GE(fixed_s, 0);
  ASSERT_EQ(probe["samples"].size(), 2u);
  EXPECT_EQ(probe["samples"][0]["bytes"].get<uint64_t>(), 4ull << 20);
  EXPECT_EQ(probe["samples"][1]["bytes"].get<uint64_t>(), 16ull << 20);
  for (const json& sample : probe["samples"]) {
    EXPECT_GT(sample["restore_s"].get<double>(), 0);  // a real restore at that size
    EXPECT_NEAR(sample["charged_s"].get<double>(), fixed_s + sample["bytes"].get<double>() / rate,
                1e-6);
  }
  // Every cold restore at admission is charged from the probe: fixed + logical bytes / rate.
  const auto charged = doc["cold_restores_charged"].get<uint64_t>();
  EXPECT_EQ(charged, doc["cold_restores"].get<uint64_t>());
  const double bytes = doc["cold_restore_charged_bytes_logical"].get<double>();
  if (charged > 0) {
    EXPECT_GT(bytes, 0);
  }
  EXPECT_NEAR(doc["cold_restore_charged_seconds"].get<double>(),
              static_cast<double>(charged) * fixed_s + bytes / rate,
              1e-6 * static_cast<double>(charged + 1))
      << "charged at the probe's rate, within rounding";
  EXPECT_NE(r.out.find("restore probe (disk, full size)"), std::string::npos) << r.out;
  // The probe's namespace removed what it spilled: every checkpoint file is the replay's.
  std::set<std::string> tags;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() + "/cold")) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 5 && name.substr(name.size() - 5) == ".ckpt") {
      tags.insert(name.substr(0, name.find('-')));
    }
  }
  EXPECT_LE(tags.size(), 1u) << "checkpoints of more than one namespace in the cold directory";
  // --restore-probe-mib 0: the old charge (wall time x the bytes scale), no probe.
  auto plain = AgentsReplay(dir.path() + "/cold-plain", report);
  plain.insert(plain.end(), {"--restore-cost", "measured", "--restore-probe-mib", "0"});
  auto p = RunCommand(plain);
  ASSERT_EQ(p.exit_code, 0) << p.out << p.err;
  const json plain_doc = ReadJson(report);
  EXPECT_EQ(plain_doc["restore_cost"], "measured");
  EXPECT_FALSE(plain_doc.contains("restore_probe"));
}

TEST(Replay, AnOverloadedTraceIsFlaggedAndAutoStretchesIt) {
  ScopedTempDir dir;
  const std::string trace = WriteTrace(dir.path(), 120, 20);  // ~1 s of work every 20 ms
  const std::string flagged = dir.path() + "/flagged.json", stretched = dir.path() + "/auto.json";
  auto at_one = RunCommand({TIER_HOST, "--cold-kv-dir", "", "--bytes-scale", "1000", "replay",
                            "--trace", trace, "--report-json", flagged, "--no-progress"});
  ASSERT_EQ(at_one.exit_code, 0) << at_one.out << at_one.err;
  const json one = ReadJson(flagged)["stability"];
  EXPECT_TRUE(one["unstable"].get<bool>()) << one.dump();
  EXPECT_GT(one["offered_utilization"].get<double>(), 1.0);
  EXPECT_NE(at_one.out.find("UNSTABLE"), std::string::npos) << at_one.out;
  auto autoscaled = RunCommand({TIER_HOST, "--cold-kv-dir", "", "--bytes-scale", "1000", "replay",
                                "--trace", trace, "--trace-time-scale", "auto", "--report-json",
                                stretched, "--no-progress"});
  ASSERT_EQ(autoscaled.exit_code, 0) << autoscaled.out << autoscaled.err;
  const json st = ReadJson(stretched)["stability"];
  EXPECT_GT(st["trace_time_scale"].get<double>(), 1.0);
  EXPECT_NE(st["trace_time_scale_how"].get<std::string>().find("auto"), std::string::npos);
  EXPECT_FALSE(st["unstable"].get<bool>()) << st.dump();
  EXPECT_LT(st["offered_utilization"].get<double>(), 1.0);
  EXPECT_NE(autoscaled.err.find("--trace-time-scale auto"), std::string::npos)
      << "the factor is printed: " << autoscaled.err;
}

TEST(Replay, AutoKeepsALightTracesOwnTimes) {
  ScopedTempDir dir;
  const std::string trace = WriteTrace(dir.path(), 10, 60000);  // one a minute
  const std::string report = dir.path() + "/auto.json";
  auto r =
      RunCommand({TIER_HOST, "--cold-kv-dir", "", "--bytes-scale", "1000", "replay", "--trace",
                  trace, "--trace-time-scale", "auto", "--report-json", report, "--no-progress"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_DOUBLE_EQ(ReadJson(report)["stability"]["trace_time_scale"].get<double>(), 1.0);
}

TEST(Replay, ComparePoliciesIsRepeatableAndPrintsOneTable) {
  ScopedTempDir dir;
  const std::string report = dir.path() + "/compare.json";
  auto r = RunCommand({TIER_HOST,
                       "--cold-kv-dir",
                       dir.path(),
                       "--bytes-scale",
                       "1000",
                       "--device-kv-mib",
                       "2048",
                       "--host-kv-mib",
                       "3072",
                       "compare-policies",
                       "--workload",
                       "agents",
                       "--sessions",
                       "4",
                       "--policies",
                       "value,lru,gdsf,value",
                       "--cold-sizes-gib",
                       "8,32",
                       "--report-json",
                       report,
                       "--no-progress"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json runs = ReadJson(report);
  ASSERT_EQ(runs.size(), 8u);
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i]["restore_cost"], "model 2.4 GB/s") << "the modelled cost by default";
    EXPECT_EQ(runs[i]["cold_kv_gib"].get<double>(), i < 4 ? 8.0 : 32.0);
    EXPECT_TRUE(runs[i]["restore_exact"].get<bool>());
  }
  EXPECT_EQ(runs[0]["policy"].get<std::string>().rfind("value", 0), 0u);
  EXPECT_EQ(runs[1]["policy"], "lru");
  EXPECT_EQ(runs[2]["policy"], "gdsf");
  // Repeatable: the modelled restore cost decides and charges restores, so the same policy twice
  // saves the same up to the order in which concurrent provider completions are applied (under
  // 0.1% on the shared trace; 1% allowed).
  for (size_t first : {0, 4}) {
    const double saved = runs[first]["prefill_seconds_saved"].get<double>();
    EXPECT_NEAR(runs[first + 3]["prefill_seconds_saved"].get<double>(), saved, 0.01 * saved)
        << "the same policy twice saves the same";
    const double restores = runs[first]["cold_restores"].get<double>();
    EXPECT_NEAR(runs[first + 3]["cold_restores"].get<double>(), restores, 1 + 0.02 * restores);
  }
  // One row per run, and the verdict line.
  for (const char* policy : {"value", "lru", "gdsf"}) {
    EXPECT_NE(r.out.find(std::string("8        ") + policy), std::string::npos) << r.out;
  }
  EXPECT_TRUE(r.out.find("saves the most prefill at every cold size") != std::string::npos ||
              r.out.find("is not ahead of") != std::string::npos)
      << r.out;
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1)
      << "each run's cold directory is removed after it (only the report remains)";
}

TEST(Replay, MooncakeTraceRestoresFromColdExactly) {
  const std::string trace = SHARED_TRACE;
  if (std::ifstream(trace).fail()) {
    GTEST_SKIP() << "the shared trace " << trace << " is absent on this machine";
  }
  ScopedTempDir dir;
  const std::string report = dir.path() + "/trace.json";
  auto r =
      RunCommand({TIER_HOST, "--cold-kv-dir", dir.path() + "/cold", "--cold-kv-gib", "256",
                  "--bytes-scale", "1000", "--max-concurrency", "16", "replay", "--trace", trace,
                  "--trace-time-scale", "auto", "--report-json", report, "--no-progress"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json doc = ReadJson(report);
  EXPECT_EQ(doc["requests"].get<int>(), 3993);
  EXPECT_FALSE(doc["stability"]["unstable"].get<bool>()) << doc["stability"].dump();
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
