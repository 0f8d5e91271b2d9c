// server_config.h -- tier-host's command line: the server flags (what a real server would take)
// and the replay subcommand's flags, and how they turn into a provider and its options.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <tier/host/host.h>
#include <tier/host/provider_instance.h>
#include <tier/status.h>

namespace CLI {
class App;
}

namespace tier {

struct ServerConfig {
  std::string tier_plugin;                 // --tier-plugin PATH|null|disk ("" = from the flags)
  std::vector<std::string> tier_opts;      // --tier-opt KEY=VALUE, in order
  std::optional<std::string> cold_kv_dir;  // --cold-kv-dir ("" = two tiers, no cold tier)
  double cold_kv_gib = 64;                 // --cold-kv-gib: the cold tier's logical budget
  uint64_t host_kv_mib = 16384;            // --host-kv-mib: pinned Host budget (logical)
  double tenant_share = 0;                 // --tenant-share: HostOptions::tenant_share (0 = off)
  uint64_t device_kv_mib = 8192;           // --device-kv-mib: Device budget for parked checkpoints
  uint32_t max_concurrency = 2;            // --max-concurrency: lanes decoding at once
  std::string model_profile = "qwen3.8-27b-int8-rtx5090";
  std::string metrics_addr;   // --metrics-addr HOST:PORT ("" = no endpoint)
  KvEventsOptions kv_events;  // --kv-events-addr, --kv-events-replay-addr, --kv-events-topic
  HostOptions::Encryption encryption;  // --encryption-key-file, --encryption-old-key-file
  uint64_t bytes_scale = 1;            // --bytes-scale N: store 1/N of every logical byte
  std::string device = "auto";         // --device auto|cpu|cuda
  std::string namespace_id;            // --namespace ("" = derived from the model profile)
  std::string log_level = "info";
  bool check = false;
  Policy policy = Policy::kValue;  // --policy value|lru|gdsf
  ValueLevers value_levers;        // --value-levers LIST (kValue's parts, for measuring them)
  double provider_timeout_s = 30;  // --provider-timeout-s: every provider operation's deadline
};

struct ReplayConfig {
  std::string workload = "agents";  // agents | trace
  std::string trace;                // --trace FILE (implies --workload trace)
  double trace_time_scale = 1.0;
  bool trace_time_scale_auto = false;  // --trace-time-scale auto
  double target_utilization = 0.7;     // --target-utilization (for auto)
  uint32_t sessions = 16;
  double think_s = 300;         // --think-s: agents' mean think/tool time
  double start_spread_s = 600;  // --start-spread-s: agents' sessions start within this
  uint64_t seed = 1;
  // --restore-cost: "measured" (a cold restore costs its wall time; at --bytes-scale > 1 its
  // logical bytes at the rate of full-size restores, --restore-probe-mib) or "model"
  // (its logical bytes at --cold-read-gbps, deterministic). "" = measured for replay, model for
  // compare-policies.
  std::string restore_cost;
  double cold_read_gbps = 2.4;
  // --restore-probe-mib: with --restore-cost measured at --bytes-scale > 1, the sizes of the
  // full-size restores timed before the replay (restore_probe.h); empty = wall time x scale.
  std::vector<uint64_t> restore_probe_mib = {64, 256};
  std::string report_json;
  bool compare_null = false;
  bool progress = true;
  bool linger = false;
  double wait_for_scrape_s = 0;   // --wait-for-scrape SECONDS (0 = start at once)
  double prefetch_lead_s = 3;     // --prefetch-lead-s: hint this long before a turn (0 = off)
  uint32_t tenants = 0;           // --tenants: sessions spread over N tenants (0 = none)
  std::string clock = "virtual";  // --clock virtual|wall
  double time_scale = 1;          // --time-scale: virtual seconds per wall second (--clock wall)
};

// Registers the server flags on `app` (writing into `config`).
void AddServerFlags(CLI::App& app, ServerConfig& config);
// Registers the replay subcommand's flags on `replay`.
void AddReplayFlags(CLI::App& replay, ReplayConfig& config);

// compare-policies: the replay flags plus which policies and cold sizes to run.
struct CompareConfig {
  std::vector<std::string> policies = {"value", "lru", "gdsf"};
  std::vector<double> cold_sizes_gib = {64, 256, 1024};
};
void AddCompareFlags(CLI::App& compare, CompareConfig& config);

// Splits every --tier-opt at its first '='. INVALID_ARGUMENT naming the bad value otherwise.
Result<ProviderOptions> ParseTierOpts(const std::vector<std::string>& tier_opts);

// The provider to load and its options, from --tier-plugin/--tier-opt/--cold-kv-dir/--cold-kv-gib:
// --cold-kv-dir "" means no cold tier (the null provider); a directory means the disk provider
// (unless --tier-plugin names another) with dir= and a capacity of cold-kv-gib / bytes-scale.
struct ProviderChoice {
  std::string plugin;  // name or path for ResolvePluginPath
  ProviderOptions options;
};
Result<ProviderChoice> ChooseProvider(const ServerConfig& config);
// The disk provider's capacity_bytes: --cold-kv-gib / --bytes-scale, at least one byte.
// INVALID_ARGUMENT naming both flags otherwise. Pure.
Result<uint64_t> ColdCapacityBytes(const ServerConfig& config);

}  // namespace tier
