#include "server_config.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>

#include "flag_ranges.h"
#include "workload.h"

namespace tier {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr double kGiB = 1073741824.0;
constexpr uint64_t kMaxBudgetMiB = uint64_t{16} << 30;  // 16 PiB: `<< 20` stays far inside 64 bits
constexpr double kMinColdGiB = 1.0 / 1024;              // 1 MiB
constexpr double kMaxColdGiB = 16777216;                // 16 PiB

// A flag whose --help shows its default and whose text `check` refuses before it converts.
template <typename T>
CLI::Option* AddChecked(CLI::App& app, const std::string& name, T& value, const std::string& help,
                        const CLI::Validator& check) {
  return app.add_option(name, value, help)->capture_default_str()->check(check);
}

// A flag whose text `parse` (returning a Result) turns into `value`, refused with its message.
template <typename T, typename Parse>
CLI::Option* AddParsed(CLI::App& app, const std::string& name, T& value, Parse parse,
                       const std::string& help) {
  return app.add_option_function<std::string>(
      name,
      [&value, name, parse](const std::string& text) {
        auto parsed = parse(text);
        if (!parsed.ok()) throw CLI::ValidationError(name, parsed.status().message());
        value = parsed.value();
      },
      help);
}

}  // namespace

void AddServerFlags(CLI::App& app, ServerConfig& c) {
  app.add_option("--tier-plugin", c.tier_plugin,
                 "Tier provider to load: a path to a .so, or a short name (null, disk) looked up "
                 "in $TIER_PLUGIN_PATH, <prefix>/lib/tier and the build tree")
      ->type_name("PATH");
  app.add_option("--tier-opt", c.tier_opts,
                 "Option handed to the provider's open, KEY=VALUE (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  app.add_option("--cold-kv-dir", c.cold_kv_dir,
                 "Cold tier directory (a Linux filesystem; under WSL2 not /mnt/c). Selects the "
                 "disk provider. An empty value means no cold tier (two tiers)")
      ->type_name("PATH");
  AddChecked(app, "--cold-kv-gib", c.cold_kv_gib, "Cold tier budget in GiB (logical bytes)",
             NumberInRange(kMinColdGiB, kMaxColdGiB, "GiB", kGiB));
  AddChecked(app, "--host-kv-mib", c.host_kv_mib, "Pinned Host budget for checkpoints, MiB",
             WholeInRange(0, kMaxBudgetMiB, "MiB", kMiB));
  AddChecked(app, "--device-kv-mib", c.device_kv_mib,
             "Device budget for parked checkpoints, MiB (simulated without a GPU)",
             WholeInRange(0, kMaxBudgetMiB, "MiB", kMiB));
  AddChecked(app, "--tenant-share", c.tenant_share,
             "A tenant's fair share of each tier's budget, 0 to 1: pressure takes first from "
             "tenants holding more (0 = off: value order alone)",
             NumberInRange(0, 1, "of a tier"));
  AddChecked(app, "--max-concurrency", c.max_concurrency, "Lanes decoding at once",
             WholeInRange(1, 1024, "lanes"));
  app.add_option("--model-profile", c.model_profile,
                 "Model/GPU profile: a shipped name or a JSON file (see --list-profiles)")
      ->capture_default_str();
  app.add_option("--metrics-addr", c.metrics_addr,
                 "Serve Prometheus metrics at http://HOST:PORT/metrics")
      ->type_name("HOST:PORT");
  app.add_option("--kv-events-addr", c.kv_events.addr,
                 "Publish KV events (vLLM's format: ZeroMQ PUB, msgpack batches) bound at this "
                 "endpoint, e.g. tcp://127.0.0.1:5557 (off by default)")
      ->type_name("ENDPOINT");
  app.add_option("--kv-events-replay-addr", c.kv_events.replay_addr,
                 "With --kv-events-addr: serve missed batches on this ZeroMQ ROUTER endpoint")
      ->type_name("ENDPOINT");
  app.add_option("--kv-events-topic", c.kv_events.topic,
                 "With --kv-events-addr: the topic frame (default kv@HOSTNAME@MODEL_PROFILE)");
  app.add_option(
         "--encryption-key-file", c.encryption.key_file,
         "Encrypt every checkpoint at rest (AES-256-GCM) with the master key in FILE: 32 raw "
         "bytes or 64 hex digits, a regular file of mode 0600 owned by this user (off by "
         "default)")
      ->type_name("FILE");
  app.add_option("--encryption-old-key-file", c.encryption.old_key_files,
                 "With --encryption-key-file: an earlier master key, for reading checkpoints "
                 "spilled under it (rotation); repeatable")
      ->type_name("FILE")
      ->allow_extra_args(false);
  AddChecked(app, "--bytes-scale", c.bytes_scale,
             "Store and copy 1/N of every logical byte (the cost model and the report keep "
             "logical sizes), so a laptop can replay 100k-token sessions",
             WholeInRange(1, uint64_t{1} << 30, ""));
  AddChecked(app, "--device", c.device,
             "Device transfer path: auto (CUDA when a GPU is present), cpu, cuda",
             CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--namespace", c.namespace_id,
                 "A label for this fleet's checkpoints; the namespace used is "
                 "LABEL/<the model profile's layout fingerprint>/scale<--bytes-scale> (without "
                 "it: the fingerprint and scale alone), so servers of another layout or scale "
                 "never share checkpoints; checkpoints of another namespace are never served")
      ->type_name("LABEL");
  AddChecked(app, "--log-level", c.log_level, "debug, info, warn or error",
             CLI::IsMember({"debug", "info", "warn", "error"}));
  AddParsed(app, "--policy", c.policy, ParsePolicy,
            "Order in which checkpoints leave Device, Host and Cold: value (prefill time saved per "
            "byte, aged by recency; the default), lru or gdsf (baselines)")
      ->type_name("value|lru|gdsf")
      ->default_str("value");
  AddParsed(
      app, "--value-levers", c.value_levers, ParseValueLevers,
      "Parts of the value policy, for measuring what each pays: all (the default), none, or a "
      "comma list of superseded, shared_use, net_of_restore, cold_admission, adaptive_age "
      "(\"all,-superseded\" turns one off)")
      ->type_name("LIST")
      ->default_str("all");
  AddChecked(app, "--provider-timeout-s", c.provider_timeout_s,
             "Deadline of every provider operation; past it the request prefills from the "
             "root (reason timeout) and the operation's buffers stay pinned until it ends",
             NumberInRange(0.001, 3600, "seconds"));
  app.add_flag(
      "--check", c.check,
      "Load and open the provider, print its name, version and negotiated ABI, then "
      "spill/stat/restore/remove one small multi-segment checkpoint and compare the bytes: a smoke "
      "subset of tier-conformance's rule table (one operation at a time, no in-flight or timing "
      "check, so it never fails a correct provider); run tier-conformance for the whole table");
}

void AddReplayFlags(CLI::App& replay, ReplayConfig& c) {
  AddChecked(replay, "--workload", c.workload,
             "agents: built-in agent sessions (shared 8-30k system prefixes, histories "
             "growing to 80-120k tokens, think times); trace: a Mooncake JSONL trace",
             CLI::IsMember({"agents", "trace"}));
  replay
      .add_option("--trace", c.trace,
                  "Mooncake-format JSONL (timestamp, input_length, output_length, hash_ids); "
                  "implies --workload trace. A regular file or a pipe; lines of at most " +
                      std::to_string(sim::kMaxTraceLineBytes >> 20) + " MiB, input_length 1 to " +
                      std::to_string(sim::kMaxTraceInputTokens) + " and output_length 0 to " +
                      std::to_string(sim::kMaxTraceOutputTokens) + " tokens, at most " +
                      std::to_string(sim::kMaxTraceRequests) + " requests")
      ->type_name("FILE");
  const CLI::Validator scale_range = NumberInRange(0.0001, 10000, "");
  replay
      .add_option_function<std::string>(
          "--trace-time-scale",
          [&c](const std::string& text) {
            c.trace_time_scale_auto = text == "auto";
            if (!c.trace_time_scale_auto) ParseNumber(text, &c.trace_time_scale);
          },
          "Stretch the trace's arrival times by this factor (2 = half the rate), or auto: the "
          "factor that brings the trace's offered work (root prefill + decode per second of "
          "arrivals, before reuse) to --target-utilization of --max-concurrency lanes (1 for a "
          "trace lighter than that); the factor is printed and in the report")
      ->type_name("F|auto")
      ->default_str("1")
      ->check(CLI::Validator(
          [scale_range](std::string& text) -> std::string {
            if (text == "auto") return {};
            return CLI::Validator(scale_range)(text);
          },
          "auto or " + scale_range.get_description()));
  AddChecked(replay, "--target-utilization", c.target_utilization,
             "With --trace-time-scale auto: the lanes' utilization to stretch the trace to",
             NumberInRange(0.05, 0.95, ""));
  AddChecked(replay, "--sessions", c.sessions, "Agent sessions to generate",
             WholeInRange(1, 100000, "sessions"));
  AddChecked(replay, "--think-s", c.think_s,
             "Agents: mean think/tool time between a session's turns, seconds (exponential)",
             NumberInRange(0.001, 86400, "seconds"));
  AddChecked(replay, "--start-spread-s", c.start_spread_s,
             "Agents: sessions start uniformly within this many seconds",
             NumberInRange(0, 86400, "seconds"));
  replay
      .add_option("--restore-cost", c.restore_cost,
                  "measured: a cold restore costs its measured wall time, at --bytes-scale > 1 its "
                  "logical bytes at the rate of full-size restores (--restore-probe-mib); "
                  "model: its logical bytes at --cold-read-gbps, and the restore-or-root decision "
                  "by that model (repeatable; the default of compare-policies)")
      ->check(CLI::IsMember({"measured", "model"}));
  AddChecked(replay, "--restore-probe-mib", c.restore_probe_mib,
             "With --restore-cost measured and --bytes-scale > 1: before the replay, spill "
             "and time a restore of one checkpoint of each of these sizes (MiB, full size) "
             "on a scratch namespace, and charge each cold restore its logical bytes at the "
             "fitted rate (plus the fitted fixed latency) instead of its wall time x the "
             "bytes scale; 0 = no probe (wall time x scale)",
             WholeInRange(0, 16384, "MiB"))
      ->delimiter(',');
  AddChecked(replay, "--cold-read-gbps", c.cold_read_gbps,
             "With --restore-cost model: the cold tier's read bandwidth, GB/s (2.4: this "
             "machine's NVMe under fio, O_DIRECT QD16)",
             NumberInRange(0.01, 1000, "GB/s"));
  AddChecked(replay, "--seed", c.seed, "Seed of the agents generator",
             WholeInRange(0, UINT64_MAX, ""));
  replay.add_option("--report-json", c.report_json, "Write the report as JSON to FILE")
      ->type_name("FILE");
  replay.add_flag("--compare-null", c.compare_null,
                  "Run the same workload again without a cold tier (null provider) and print "
                  "both side by side");
  replay.add_flag("!--no-progress", c.progress, "No progress line on stderr");
  replay.add_flag("--linger", c.linger,
                  "Keep serving /metrics after the replay until SIGINT or SIGTERM");
  AddChecked(replay, "--wait-for-scrape", c.wait_for_scrape_s,
             "With --metrics-addr: before replaying, wait up to SECONDS for /metrics to be "
             "scraped once, so a Prometheus sees every counter start from zero",
             NumberInRange(0, 3600, "seconds"))
      ->type_name("SECONDS");
  AddChecked(replay, "--clock", c.clock,
             "virtual: the cost model's time, restores charged at their measured time x "
             "--bytes-scale (fast); wall: lanes run on the wall clock x --time-scale and keep "
             "decoding while restores fly; the report gives the scheduler's longest stall "
             "in a tier call",
             CLI::IsMember({"virtual", "wall"}));
  AddChecked(replay, "--time-scale", c.time_scale,
             "With --clock wall: virtual seconds per wall second (100 = 100x faster than "
             "real time; restores still take their real time)",
             NumberInRange(0.01, 100000, "virtual seconds per wall second"));
  AddChecked(replay, "--tenants", c.tenants,
             "Give session s the tenant t<s mod N> (part of every identity: tenants never "
             "share a checkpoint, shared prefixes included); 0 = no tenants",
             NumberInRange(0, 1000000, "tenants"))
      ->type_name("N");
  AddChecked(replay, "--prefetch-lead-s", c.prefetch_lead_s,
             "Agents: send each turn's prefetch hint this long before the turn (the "
             "framework saw its tool's result); 0 turns hints off",
             NumberInRange(0, 3600, "seconds"))
      ->type_name("SECONDS");
}

void AddCompareFlags(CLI::App& compare, CompareConfig& c) {
  AddChecked(compare, "--policies", c.policies, "Policies to run, in order (comma separated)",
             CLI::IsMember({"value", "lru", "gdsf"}))
      ->delimiter(',');
  AddChecked(compare, "--cold-sizes-gib", c.cold_sizes_gib,
             "Cold budgets to run each policy at, GiB logical (comma separated)",
             NumberInRange(kMinColdGiB, kMaxColdGiB, "GiB", kGiB))
      ->delimiter(',');
}

Result<ProviderOptions> ParseTierOpts(const std::vector<std::string>& tier_opts) {
  ProviderOptions options;
  for (const std::string& opt : tier_opts) {
    const size_t eq = opt.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Status(TIER_INVALID_ARGUMENT, "--tier-opt '" + opt + "': expected KEY=VALUE");
    }
    options.emplace_back(opt.substr(0, eq), opt.substr(eq + 1));
  }
  return options;
}

Result<uint64_t> ColdCapacityBytes(const ServerConfig& config) {
  const double bytes = config.cold_kv_gib * kGiB / static_cast<double>(config.bytes_scale);
  if (!(config.cold_kv_gib >= kMinColdGiB && config.cold_kv_gib <= kMaxColdGiB) || !(bytes >= 1)) {
    char gib[32];
    std::snprintf(gib, sizeof(gib), "%g", config.cold_kv_gib);
    return Status(TIER_INVALID_ARGUMENT,
                  std::string("--cold-kv-gib ") + gib + " with --bytes-scale " +
                      std::to_string(config.bytes_scale) +
                      " leaves the provider less than one byte (it stores GiB / bytes-scale)");
  }
  return static_cast<uint64_t>(std::floor(bytes));
}

Result<ProviderChoice> ChooseProvider(const ServerConfig& config) {
  auto options = ParseTierOpts(config.tier_opts);
  if (!options.ok()) return options.status();
  ProviderChoice choice;
  choice.options = options.take();
  if (config.cold_kv_dir.has_value()) {
    if (config.cold_kv_dir->empty()) {
      if (!config.tier_plugin.empty() && config.tier_plugin != "null") {
        return Status(TIER_INVALID_ARGUMENT,
                      "--cold-kv-dir '' turns the cold tier off, but --tier-plugin asks for '" +
                          config.tier_plugin + "'");
      }
      choice.plugin = "null";
      return choice;
    }
    choice.plugin = config.tier_plugin.empty() ? "disk" : config.tier_plugin;
    auto capacity_bytes = ColdCapacityBytes(config);
    if (!capacity_bytes.ok()) return capacity_bytes.status();
    choice.options.emplace_back("dir", *config.cold_kv_dir);
    choice.options.emplace_back("capacity_bytes", std::to_string(capacity_bytes.value()));
    return choice;
  }
  choice.plugin = config.tier_plugin.empty() ? "null" : config.tier_plugin;
  return choice;
}

}  // namespace tier
