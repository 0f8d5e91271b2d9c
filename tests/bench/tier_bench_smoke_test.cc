// TierBenchSmoke: runs the tier-bench binary at a small size the way a user does and checks what
// it reports: the JSON fields exist, every restore was byte-exact, fio's absence is said and its
// ratios are null, bad usage is refused with a clear message. Never checks a speed.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

using nlohmann::json;

struct BenchRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

BenchRun RunBench(const std::string& args) {
  const std::string command = std::string(TIER_BENCH) + " " + args + " 2>&1";
  BenchRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.output.append(buffer, n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

class TierBenchSmoke : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(TIER_BENCH_TEST_ROOT) + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "-" +
           std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  json ReadJson(const std::string& path) {
    std::ifstream in(path);
    return json::parse(in);
  }
  std::string Common() const {
    return "--tier-plugin " + std::string(TIER_DISK_PLUGIN) + " --dir " + dir_ +
           " --size-mib 24 --repeats 2";
  }
  std::string dir_;
};

TEST_F(TierBenchSmoke, ReportsEveryFieldAndByteExactRestores) {
  const std::string out = dir_ + "/out.json";
  const BenchRun run = RunBench(Common() + " --json " + out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json j = ReadJson(out);
  for (const char* field : {"restore_vs_fio", "spill_vs_fio", "restore_vs_naive", "spill_vs_naive",
                            "byte_exact", "kinds", "compression", "memory", "page_cache", "fio",
                            "logical_bytes", "segments", "queue_depth"}) {
    EXPECT_TRUE(j.contains(field)) << field;
  }
  EXPECT_TRUE(j["byte_exact"].get<bool>());
  // 2 rounds: naive + ours on random, raw + auto on bf16 and fp32.
  EXPECT_EQ(j["restores_checked"].get<int>(), 2 * 2 * 3);
  EXPECT_TRUE(j["restore_vs_naive"].is_number());
  EXPECT_TRUE(j["spill_vs_naive"].is_number());
  if (j["fio"]["installed"].get<bool>()) {
    EXPECT_TRUE(j["restore_vs_fio"].is_number());
    EXPECT_TRUE(j["spill_vs_fio"].is_number());
  }
  for (const char* kind : {"random", "bf16", "fp32"}) {
    ASSERT_TRUE(j["kinds"].contains(kind)) << kind;
    const json& ours = j["kinds"][kind]["contestants"]["ours"];
    EXPECT_EQ(ours["restore_ns"].size(), 2u);
    EXPECT_EQ(ours["restores_byte_exact"].get<int>(), 2);
    EXPECT_GT(ours["restore_gbps"].get<double>(), 0);
    EXPECT_GT(ours["stored_bytes"].get<uint64_t>(), 0u);
  }
  EXPECT_TRUE(j["compression"].contains("bf16"));
  EXPECT_GT(j["compression"]["bf16"]["capacity_gain"].get<double>(), 0);
  EXPECT_TRUE(j["memory"]["measured"].get<bool>()) << j["memory"]["note"];
  for (const json& probe : j["memory"]["probes"]) EXPECT_TRUE(probe["byte_exact"].get<bool>());
  EXPECT_EQ(j["page_cache"]["worst_round_resident_pages"].get<uint64_t>(), 0u);
  EXPECT_NE(run.output.find("restore_vs_fio"), std::string::npos) << run.output;
  // Nothing left behind.
  size_t left = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    left += e.path().filename().string().rfind("tier-bench-", 0) == 0;
  }
  EXPECT_EQ(left, 0u);
}

TEST_F(TierBenchSmoke, WithoutFioSaysSoAndRatiosAreNull) {
  const std::string out = dir_ + "/out.json";
  const BenchRun run =
      RunBench(Common() + " --kinds random --no-memory --fio /nonexistent/fio --json " + out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("fio not installed"), std::string::npos) << run.output;
  const json j = ReadJson(out);
  EXPECT_TRUE(j["restore_vs_fio"].is_null());
  EXPECT_TRUE(j["spill_vs_fio"].is_null());
  EXPECT_TRUE(j["restore_vs_naive"].is_number());
  EXPECT_FALSE(j["fio"]["installed"].get<bool>());
  EXPECT_FALSE(j["kinds"]["random"]["contestants"]["fio"]["available"].get<bool>());
  EXPECT_EQ(j["kinds"]["random"]["contestants"]["fio"]["note"], "fio not installed");
}

// The load mode: restores and spills in flight at once; its figures are in the JSON, fio's
// absent (ratios null).
TEST_F(TierBenchSmoke, LoadModeReportsItsFigures) {
  const std::string out = dir_ + "/load.json";
  const BenchRun run =
      RunBench("--tier-plugin " + std::string(TIER_DISK_PLUGIN) + " --dir " + dir_ +
               " --size-mib 8 --repeats 1 --kinds random --concurrent-restores 2 "
               "--concurrent-spills 1 --fio /nonexistent/fio --json " +
               out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("fio not installed"), std::string::npos) << run.output;
  const json j = ReadJson(out)["load"];
  EXPECT_EQ(j["restores_in_flight"], 2);
  EXPECT_EQ(j["spills_in_flight"], 1);
  EXPECT_EQ(j["restore_solo_ms"].size(), 1u);
  EXPECT_EQ(j["restore_loaded_ms"].size(), 2u);
  EXPECT_EQ(j["restore_no_spill_ms"].size(), 2u);
  EXPECT_GT(j["restore_core_seconds_per_gb"].get<double>(), 0);
  EXPECT_GT(j["spill_core_seconds_per_gb"].get<double>(), 0);
  EXPECT_TRUE(j["mix_read_vs_fio"].is_null());
  EXPECT_EQ(j["mix_read_gbps"].size(), 1u);
}

// --dirs 2: the disk provider over two directories (dirs=), its checkpoints in both.
TEST_F(TierBenchSmoke, LoadModeOverTwoDirectoriesUsesBoth) {
  const std::string out = dir_ + "/load2.json";
  const BenchRun run =
      RunBench("--tier-plugin " + std::string(TIER_DISK_PLUGIN) + " --dir " + dir_ +
               " --size-mib 4 --repeats 1 --kinds random --concurrent-restores 2 "
               "--concurrent-spills 1 --dirs 2 --keep --fio /nonexistent/fio --json " +
               out);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(ReadJson(out)["load"]["dirs"], 2);
  size_t dirs_with_checkpoints = 0;
  for (const auto& work : std::filesystem::directory_iterator(dir_)) {
    for (const char* sub : {"ours0", "ours1"}) {
      std::error_code ec;
      for (const auto& f : std::filesystem::directory_iterator(work.path() / sub, ec)) {
        if (f.path().extension() == ".ckpt") {
          ++dirs_with_checkpoints;
          break;
        }
      }
    }
  }
  EXPECT_EQ(dirs_with_checkpoints, 2u) << run.output;
}

TEST_F(TierBenchSmoke, EncryptedRestoresAreByteExactAndTheFilesHoldCiphertext) {
  // --encryption-key-file: ours seals every spill and opens every restore as an encrypted Host
  // does; the restores stay byte-exact. A key file others can read is refused, naming it.
  const std::string key = dir_ + "/kv.key";
  std::ofstream(key) << std::string(64, 'e') << "\n";
  ASSERT_EQ(::chmod(key.c_str(), 0644), 0);
  const std::string out = dir_ + "/enc.json";
  const std::string args = Common() + " --kinds bf16 --no-memory --no-fio --no-naive --json " +
                           out + " --encryption-key-file " + key;
  BenchRun run = RunBench(args);
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find(key), std::string::npos) << run.output;
  ASSERT_EQ(::chmod(key.c_str(), 0600), 0);
  run = RunBench(args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const json j = ReadJson(out);
  EXPECT_TRUE(j["byte_exact"].get<bool>());
  const json& ours = j["kinds"]["bf16"]["contestants"]["ours"];
  EXPECT_EQ(ours["restores_byte_exact"].get<int>(), 2);
  // Ciphertext does not compress: what bf16 gains in the clear it does not gain encrypted.
  EXPECT_GE(ours["stored_bytes"].get<uint64_t>(), j["logical_bytes"].get<uint64_t>());
}

TEST_F(TierBenchSmoke, MissingDirectoryIsAUsageError) {
  const BenchRun run = RunBench("--tier-plugin " + std::string(TIER_DISK_PLUGIN) + " --dir " +
                                dir_ + "/absent --size-mib 8");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("absent': No such file or directory"), std::string::npos) << run.output;
}

TEST_F(TierBenchSmoke, HelpNamesTheUsage) {
  const BenchRun run = RunBench("--help");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  for (const char* flag : {"--tier-plugin", "--dir", "--size-mib", "--tokens", "--json"}) {
    EXPECT_NE(run.output.find(flag), std::string::npos) << flag;
  }
}

TEST_F(TierBenchSmoke, SizeAndTokensExcludeEachOther) {
  const BenchRun run = RunBench(Common() + " --tokens 1000");
  EXPECT_EQ(run.exit_code, 2) << run.output;
}

}  // namespace
