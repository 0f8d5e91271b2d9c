// tier-bench: spill and restore model-shaped checkpoints through a tier provider, against fio
// (the disk's limit) and a naive FILE* peer in the same run; see bench_run.h and README.md.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>

#include <tier/host/log.h>
#include "bench_config.h"
#include "bench_report.h"
#include "bench_run.h"
#include "load_run.h"
#include "memory_probe.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;  // a measurement failed or a restore was not byte-exact
constexpr int kExitUsage = 2;

std::string SelfExe(const char* argv0) {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : std::string(argv0);
}

std::string CommandLine(int argc, char** argv) {
  std::string line = "tier-bench";
  for (int i = 1; i < argc; ++i) line += std::string(" ") + argv[i];
  return line;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--internal-memory-probe") {
    tier::SetLogLevel(TIER_LOG_WARN);
    return tier::bench::MemoryProbeChildMain(argv[2]);
  }
  tier::bench::BenchConfig config;
  config.command_line = CommandLine(argc, argv);
  std::vector<std::string> kinds, options;
  std::string log_level = "warn";
  CLI::App app{
      "tier-bench: spill and restore checkpoints shaped by a model profile through a tier "
      "provider (loaded through the tier ABI), against fio's sequential O_DIRECT io_uring "
      "bandwidth (the disk's limit) and a naive one-file-per-layer FILE* peer, interleaved in "
      "the same run on the same directory and sizes",
      "tier-bench"};
  app.add_option("--tier-plugin", config.plugin, "Provider library: a path, or a short name (disk)")
      ->required();
  app.add_option("--dir", config.dir,
                 "Existing directory on the disk to measure (a fresh tier-bench-PID folder is "
                 "made in it and removed at the end); for an object store (--tier-opt pool=...) "
                 "only scratch files go there (default /var/tmp)");
  auto* size = app.add_option("--size-mib", config.size_mib,
                              "Resize the profile's checkpoint to about N MiB (every segment "
                              "scaled by one factor)")
                   ->check(CLI::Range(1ull, 1ull << 22));
  app.add_option("--tokens", config.tokens,
                 "Checkpoint of the profile at N tokens (default 100000: 3.58 GB for the INT8 "
                 "profile)")
      ->check(CLI::Range(1ull, 10000000ull))
      ->excludes(size);
  app.add_option("--profile", config.profile, "Model profile: a shipped name or a JSON path")
      ->capture_default_str();
  app.add_option("--kinds", kinds, "Data kinds, comma-separated: random,bf16,fp32 (default all)")
      ->delimiter(',')
      ->check(CLI::IsMember({"random", "bf16", "fp32"}));
  app.add_option("--repeats", config.repeats, "Interleaved rounds per data kind")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1000u));
  app.add_option("--tier-opt", options,
                 "Provider option key=value (repeatable); dir and capacity are set by tier-bench");
  app.add_option("--json", config.json_path, "Write every figure as JSON to FILE");
  app.add_option("--fio", config.fio, "The fio executable")->capture_default_str();
  app.add_flag("!--no-fio", config.run_fio, "Do not run fio (ratios vs fio are null)");
  app.add_option("--rados", config.rados, "The rados executable (object stores)")
      ->capture_default_str();
  app.add_flag("!--no-rados-bench", config.run_rados_bench,
               "Do not run rados bench (ratios vs rados bench are null)");
  app.add_flag("!--no-naive", config.run_naive, "Do not run the naive peer");
  app.add_flag("!--no-memory", config.run_memory, "Do not measure the provider's peak memory");
  app.add_flag("--with-zstd", config.with_zstd,
               "On bf16 and fp32 also measure compression=zstd (capacity gain and its cost)");
  app.add_option("--encryption-key-file", config.encryption_key_file,
                 "Seal every spill and open every restore of ours with AES-256-GCM as the Host "
                 "does with HostOptions::encryption (a 0600 file of 32 bytes or 64 hex digits); "
                 "the crypto is inside the timed interval and the CPU figures")
      ->type_name("FILE");
  app.add_option(
         "--misalign", config.misalign,
         "Offset every buffer by N bytes from 4 KiB alignment (the provider's staging path)")
      ->check(CLI::Range(0ull, 4095ull));
  tier::bench::LoadConfig load;
  auto* restores = app.add_option("--concurrent-restores", load.restores,
                                  "Load mode: N restores in flight at once (with "
                                  "--concurrent-spills), against fio's same mix")
                       ->check(CLI::Range(0u, 64u));
  auto* spills = app.add_option("--concurrent-spills", load.spills,
                                "Load mode: M spills in flight while the restores run")
                     ->check(CLI::Range(0u, 64u));
  app.add_option("--dirs", load.dirs,
                 "Load mode: the disk provider over N directories under --dir (dirs=), fio's "
                 "jobs spread over N directories of its own")
      ->check(CLI::Range(1u, 64u));
  app.add_flag("--keep", config.keep_files, "Leave the files written under --dir");
  app.add_option("--log-level", log_level, "Host log level: debug, info, warn, error")
      ->capture_default_str();
  app.footer(
      "Every restore reads the disk: fio and the provider use O_DIRECT, and before each restore "
      "round every file written is fdatasync'ed and dropped with POSIX_FADV_DONTNEED (mincore() "
      "counts what is left).\nExit status: 0 done, 1 a measurement failed or a restore was not "
      "byte-exact, 2 bad usage.\nExample:\n  tier-bench --tier-plugin disk --dir /var/tmp "
      "--size-mib 1024 --json out.json\n  tier-bench --tier-plugin rados --tier-opt "
      "conf=/etc/ceph/ceph.conf --tier-opt pool=tier --tier-opt client=tier --size-mib 1024");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  if (!kinds.empty()) {
    config.kinds.clear();
    for (const std::string& k : kinds) config.kinds.push_back(*tier::bench::ParseDataKind(k));
  }
  for (const std::string& kv : options) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "tier-bench: --tier-opt '%s': expected key=value\n", kv.c_str());
      return kExitUsage;
    }
    config.provider_options.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  tier_log_level level = TIER_LOG_WARN;
  if (!tier::ParseLogLevel(log_level, &level)) {
    std::fprintf(stderr, "tier-bench: --log-level '%s': expected debug, info, warn or error\n",
                 log_level.c_str());
    return kExitUsage;
  }
  tier::SetLogLevel(level);
  if (config.dir.empty()) {
    if (!config.object_store()) {
      std::fprintf(stderr,
                   "tier-bench: --dir is required (the directory on the disk to measure)\n");
      return kExitUsage;
    }
    config.dir = "/var/tmp";
  }

  if (restores->count() > 0 || spills->count() > 0) {
    nlohmann::json json;
    const tier::Status s = tier::bench::RunLoad(config, load, std::cerr, std::cout, &json);
    if (!s.ok()) {
      std::fprintf(stderr, "tier-bench: %s\n", s.ToString().c_str());
      return s.code() == TIER_INVALID_ARGUMENT ? kExitUsage : kExitFailed;
    }
    if (!config.json_path.empty()) {
      std::ofstream out(config.json_path);
      out << json.dump(2) << "\n";
      if (!out) return kExitFailed;
    }
    return kExitOk;
  }

  auto result = tier::bench::RunBench(config, SelfExe(argv[0]), std::cerr);
  if (!result.ok()) {
    std::fprintf(stderr, "tier-bench: %s\n", result.status().ToString().c_str());
    return result.status().code() == TIER_INVALID_ARGUMENT ? kExitUsage : kExitFailed;
  }
  const tier::bench::Summary summary = tier::bench::Summarize(result.value());
  tier::bench::PrintReport(result.value(), summary, std::cout);
  if (!config.json_path.empty()) {
    std::ofstream out(config.json_path);
    out << tier::bench::ReportJson(result.value(), summary).dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "tier-bench: cannot write '%s'\n", config.json_path.c_str());
      return kExitFailed;
    }
  }
  const bool exact =
      summary.restores_checked > 0 && summary.restores_exact == summary.restores_checked;
  return exact ? kExitOk : kExitFailed;
}
