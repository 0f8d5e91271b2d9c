#include "commands.h"

#include <signal.h>
#include <tier/device/engine_select.h>
#include <tier/host/cost_model.h>
#include <tier/host/format.h>
#include <tier/host/host.h>
#include <tier/host/host_services.h>
#include <tier/host/identity.h>
#include <tier/host/log.h>
#include <tier/host/metrics_registry.h>
#include <tier/host/metrics_server.h>
#include <tier/host/plugin_loader.h>
#include <tier/host/provider_instance.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "check.h"
#include "kv_pool.h"
#include "offered_load.h"
#include "replay.h"
#include "report.h"
#include "restore_probe.h"
#include "run_dirs.h"

namespace tier {
namespace {

// SIGINT/SIGTERM: the first stops the replay (what is in flight completes, a partial report), the
// second stops waiting for what is in flight (the partial report is still written, then the
// process leaves without closing the provider), a third leaves at once.
std::atomic<bool> g_stop{false};
std::atomic<bool> g_hurry{false};
std::atomic<int> g_signals{0};
static_assert(std::atomic<int>::is_always_lock_free);  // async-signal-safe

void OnStopSignal(int) {
  const int seen = g_signals.fetch_add(1) + 1;
  if (seen == 1) g_stop.store(true);
  if (seen == 2) g_hurry.store(true);
  if (seen >= 3) ::_exit(kExitInterrupted);
}

void CatchStopSignals() {
  g_stop.store(false);
  g_hurry.store(false);
  g_signals.store(0);
  struct sigaction action {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

void DefaultStopSignals() {
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
}

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "tier-host: %s\n", EscapeForLog(message).c_str());
  return code;
}

// The simulator's pool is host memory it writes directly: the replay runs on the CPU engine (a
// real server hands its own engine and pool to Host::Open).
Result<std::shared_ptr<device::TransferEngine>> SimulatorEngine(const std::string& device) {
  if (device == "cuda") {
    return Status::Unsupported(
        "--device cuda: the replay's simulated pool lives in host memory; it runs on the CPU "
        "path (a server on a GPU passes its own engine to Host::Open)");
  }
  device::EngineOptions options;
  options.prefer = device::DevicePreference::kCpu;
  device::EngineSelection selection = device::SelectTransferEngine(options);
  if (selection.engine == nullptr) return Status::Unsupported("cpu engine: " + selection.reason);
  return std::shared_ptr<device::TransferEngine>(std::move(selection.engine));
}

// A workload as loaded, with the stretch its arrivals got and how it was chosen.
struct LoadedWorkload {
  sim::Workload workload;
  double time_scale = 1;
  std::string time_scale_how;  // "" (not a trace), "given", "auto: ..."
};

// What every replay of one command line shares: the model, the workload, the namespace.
struct ReplaySetup {
  ModelProfile profile;
  LoadedWorkload loaded;
  std::string namespace_id;
};

struct RunInputs {
  const ServerConfig* config;
  const ReplayConfig* replay;
  const ReplaySetup* setup;
  std::string plugin;
  ProviderOptions options;
  MetricsRegistry* metrics;
  const MetricsServer* server = nullptr;
};

void WaitForScrape(const RunInputs& in) {
  if (in.server == nullptr || in.replay->wait_for_scrape_s <= 0) return;
  // Every series exists now: let a scraper record them at zero before the replay moves them.
  const uint64_t started = in.server->scrapes_started();
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", in.replay->wait_for_scrape_s);
  Log(TIER_LOG_INFO, std::string("waiting up to ") + seconds +
                         " s for /metrics to be scraped (--wait-for-scrape)");
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(in.replay->wait_for_scrape_s * 1000.0));
  if (!in.server->WaitForScrapeStartedAfter(started, timeout)) {
    Log(TIER_LOG_WARN, "no scrape of /metrics within --wait-for-scrape; replaying anyway");
  }
}

// --restore-cost measured at --bytes-scale > 1 with a cold tier: time full-size restores of the
// same provider on a scratch namespace (closed again before the Host opens the tier). An empty
// probe otherwise: the replay charges a restore its wall time x the bytes scale.
Result<RestoreProbe> MaybeProbeRestores(const RunInputs& in, bool model) {
  RestoreProbe none;
  std::vector<uint64_t> sizes;
  for (uint64_t mib : in.replay->restore_probe_mib) {
    if (mib > 0) sizes.push_back(mib << 20);
  }
  if (model || in.config->bytes_scale <= 1 || in.plugin == "null" || sizes.empty()) return none;
  const std::string ns = in.setup->namespace_id + ".restore-probe";
  const uint64_t timeout_ns = static_cast<uint64_t>(in.config->provider_timeout_s * 1e9);
  auto probe = ProbeRestores(in.plugin, in.options, ns, sizes, timeout_ns);
  if (!probe.ok()) return probe.status();
  std::string line = "replay: restore probe (namespace " + ns + "):";
  for (const RestoreProbeSample& s : probe.value().samples) {
    line += " " + FormatBytes(s.bytes) + " in " + FormatDurationNs(s.restore_ns) + ";";
  }
  char rate[64];
  std::snprintf(rate, sizeof(rate), "%.2f GB/s", probe.value().bytes_per_second / 1e9);
  Log(TIER_LOG_INFO, line + " charging " + rate + " + " + FormatDurationNs(probe.value().fixed_ns) +
                         " per cold restore at full size");
  return probe;
}

// One replay of the workload against one provider, with its own Host (catalog, tiers) and pool.
Result<sim::ReplayReport> ReplayOnce(const RunInputs& in) {
  const ServerConfig& config = *in.config;
  const ModelProfile& profile = in.setup->profile;
  const sim::Workload& workload = in.setup->loaded.workload;
  auto engine = SimulatorEngine(config.device);
  if (!engine.ok()) return engine.status();
  const uint64_t device_bytes = config.device_kv_mib << 20;
  auto pool = sim::KvPool::Create(engine.value().get(), profile, config.bytes_scale,
                                  sim::ReplayPoolPages(workload, profile, config.bytes_scale,
                                                       device_bytes, config.max_concurrency));
  if (!pool.ok()) return pool.status();
  HostOptions options;
  options.plugin = in.plugin;
  options.provider_options = in.options;
  options.namespace_id = in.setup->namespace_id;
  options.profile = profile;
  options.pool = pool.value()->view();
  options.engine = engine.value();
  options.device_capacity_bytes = device_bytes;
  options.host_capacity_bytes = config.host_kv_mib << 20;
  options.tenant_share = config.tenant_share;
  options.bytes_scale = config.bytes_scale;
  options.kv_events = config.kv_events;
  options.encryption = config.encryption;
  options.metrics = in.metrics;
  options.policy = config.policy;
  options.value_levers = config.value_levers;
  const bool model = in.replay->restore_cost == "model";
  if (model) options.model_cold_read_bytes_per_second = in.replay->cold_read_gbps * 1e9;
  // Before the Host opens the cold tier: the rate of full-size restores of this provider.
  auto probe = MaybeProbeRestores(in, model);
  if (!probe.ok()) return probe.status();
  options.provider_timeout_ns = static_cast<uint64_t>(config.provider_timeout_s * 1e9);
  auto host = Host::Open(std::move(options));
  if (!host.ok()) return host.status();
  const std::string io_path = host.value()->provider_io_path();
  Log(TIER_LOG_INFO,
      "replay: " + workload.name + " (" + std::to_string(workload.requests.size()) +
          " requests) with the " + host.value()->provider_name() + " provider" +
          (io_path.empty() ? std::string() : ", io path " + io_path) + ", namespace " +
          in.setup->namespace_id + ", policy " + PolicyName(config.policy) +
          (in.replay->tenants == 0 ? std::string()
                                   : ", " + std::to_string(in.replay->tenants) + " tenants"));
  sim::RegisterReplayMetrics(in.metrics);
  WaitForScrape(in);
  sim::ReplayOptions run;
  run.max_concurrency = config.max_concurrency;
  run.progress = in.replay->progress;
  run.label = host.value()->provider_name();
  run.prefetch_lead_s = in.replay->prefetch_lead_s;
  run.tenants = in.replay->tenants;
  run.stop = &g_stop;
  run.hurry = &g_hurry;
  run.clock = in.replay->clock == "wall" ? sim::ReplayOptions::Clock::kWall
                                         : sim::ReplayOptions::Clock::kVirtual;
  run.time_scale = in.replay->time_scale;
  run.measured_cold_read_bytes_per_second = probe.value().bytes_per_second;
  run.measured_cold_fixed_ns = probe.value().fixed_ns;
  CostModel cost(profile);
  sim::ReplayReport report =
      sim::RunReplay(workload, *host.value(), *pool.value(), cost, in.metrics, run);
  report.provider = host.value()->provider_name();
  report.policy = PolicyName(config.policy);
  if (config.policy == Policy::kValue) {
    report.policy += "(" + ValueLeversName(config.value_levers) + ")";
  }
  std::ostringstream cost_text;
  cost_text << "model " << in.replay->cold_read_gbps << " GB/s";
  report.restore_cost = model                           ? cost_text.str()
                        : probe.value().samples.empty() ? "measured"
                                                        : "measured (full-size restore probe)";
  for (const RestoreProbeSample& s : probe.value().samples) {
    report.restore_probe.push_back({s.bytes, static_cast<double>(s.restore_ns) / 1e9,
                                    static_cast<double>(probe.value().ChargeNs(s.bytes)) / 1e9});
  }
  report.restore_probe_bytes_per_second = probe.value().bytes_per_second;
  report.restore_probe_fixed_s = static_cast<double>(probe.value().fixed_ns) / 1e9;
  report.trace_time_scale = in.setup->loaded.time_scale;
  report.trace_time_scale_how = in.setup->loaded.time_scale_how;
  if (g_hurry.load()) {
    // A second signal: the provider may still work on what is in flight. Nothing is closed or
    // freed under it; the caller writes the report and leaves.
    (void)host.value().release();
    (void)pool.value().release();
    new std::shared_ptr<device::TransferEngine>(engine.value());
    return report;
  }
  host.value().reset();  // closes the provider before the pool goes
  return report;
}

void WaitForSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  int signal_number = 0;
  sigwait(&set, &signal_number);
}

Result<LoadedWorkload> LoadWorkload(const ReplayConfig& replay, const ModelProfile& profile,
                                    uint32_t lanes) {
  LoadedWorkload loaded;
  if (!replay.trace.empty() || replay.workload == "trace") {
    if (replay.trace.empty()) return Status::InvalidArgument("--workload trace needs --trace FILE");
    const double given = replay.trace_time_scale_auto ? 1.0 : replay.trace_time_scale;
    auto trace = sim::LoadMooncakeTrace(replay.trace, given);
    if (!trace.ok()) return trace.status();
    loaded.workload = trace.take();
    loaded.time_scale = given;
    loaded.time_scale_how = "given";
    if (replay.trace_time_scale_auto) {
      const CostModel cost(profile);
      const sim::OfferedLoad load = sim::EstimateOfferedLoad(loaded.workload, cost, lanes);
      loaded.time_scale = sim::AutoTimeScale(load, replay.target_utilization);
      TIER_RETURN_IF_ERROR(sim::StretchArrivals(&loaded.workload, loaded.time_scale));
      char how[400];
      std::snprintf(how, sizeof(how), "auto: %s; stretched by %.2f to %.2f",
                    sim::DescribeOfferedLoad(load).c_str(), loaded.time_scale,
                    load.utilization / loaded.time_scale);
      loaded.time_scale_how = how;
      Log(TIER_LOG_INFO, "replay: --trace-time-scale " + loaded.time_scale_how);
    }
    return loaded;
  }
  sim::AgentsWorkloadOptions agents;
  agents.sessions = replay.sessions;
  agents.seed = replay.seed;
  agents.mean_think_s = replay.think_s;
  agents.session_start_spread_s = replay.start_spread_s;
  loaded.workload = sim::GenerateAgentsWorkload(agents);
  return loaded;
}

// The steps replay and compare-policies share before their first run, errors first.
Result<ReplaySetup> PrepareReplay(const ServerConfig& config, const ReplayConfig& replay) {
  auto profile = LoadModelProfile(ResolveProfilePath(config.model_profile));
  if (!profile.ok()) return profile.status();
  auto loaded = LoadWorkload(replay, profile.value(), config.max_concurrency);
  if (!loaded.ok()) return loaded.status();
  TIER_RETURN_IF_ERROR(sim::CheckReportPath(replay.report_json));
  ReplaySetup setup{profile.take(), loaded.take(), ""};
  setup.namespace_id = NamespaceFor(config, setup.profile);
  return setup;
}

}  // namespace

std::string NamespaceFor(const ServerConfig& config, const ModelProfile& profile) {
  return CheckpointNamespace(config.namespace_id, profile, config.bytes_scale);
}

int RunCheckCommand(const ServerConfig& config) {
  MetricsRegistry metrics;
  HostServices host(&metrics);
  auto choice = ChooseProvider(config);
  if (!choice.ok()) return Fail(kExitUsage, choice.status().message());
  const std::string path = ResolvePluginPath(choice.value().plugin);
  auto library = PluginLibrary::Load(path, host.table());
  if (!library.ok()) return Fail(kExitUsage, library.status().message());
  std::cout << "tier-host --check: plugin " << path << "\n";
  const std::string ns = config.namespace_id.empty() ? "tier-host" : config.namespace_id;
  auto instance = ProviderInstance::Open(library.value(), host.table(), ns, choice.value().options);
  if (!instance.ok()) {
    return Fail(kExitUsage, std::string("cannot open the ") + library.value()->name() +
                                " provider: " + instance.status().ToString());
  }
  const uint64_t timeout_ns = static_cast<uint64_t>(config.provider_timeout_s * 1e9);
  const bool passed = RunProviderCheck(*instance.value(), std::cout, timeout_ns);
  instance.value()->Close();  // a no-op when the check abandoned a stuck instance
  if (!passed && instance.value()->outstanding() > 0) {
    // The provider still owns borrowed buffers and threads: leave without unloading it.
    (void)instance.value().release();
    std::cout.flush();
    std::_Exit(kExitFailed);
  }
  return passed ? kExitOk : kExitFailed;
}

int RunReplayCommand(const ServerConfig& config, const ReplayConfig& replay_config) {
  auto setup = PrepareReplay(config, replay_config);
  if (!setup.ok()) return Fail(kExitUsage, setup.status().message());
  auto choice = ChooseProvider(config);
  if (!choice.ok()) return Fail(kExitUsage, choice.status().message());
  if (replay_config.wait_for_scrape_s > 0 && config.metrics_addr.empty()) {
    return Fail(kExitUsage, "--wait-for-scrape needs --metrics-addr HOST:PORT");
  }
  MetricsRegistry metrics;
  std::unique_ptr<MetricsServer> server;
  if (!config.metrics_addr.empty()) {
    auto started = MetricsServer::Start(config.metrics_addr, metrics);
    if (!started.ok()) return Fail(kExitUsage, started.status().message());
    server = started.take();
    Log(TIER_LOG_INFO, "metrics at http://" +
                           config.metrics_addr.substr(0, config.metrics_addr.rfind(':')) + ":" +
                           std::to_string(server->port()) + "/metrics");
  }
  CatchStopSignals();
  RunInputs in{
      &config,  &replay_config, &setup.value(), choice.value().plugin, choice.value().options,
      &metrics, server.get()};
  auto run = ReplayOnce(in);
  if (!run.ok()) return Fail(kExitUsage, run.status().message());
  std::unique_ptr<sim::ReplayReport> compare;
  if (replay_config.compare_null && !g_stop.load() && !g_hurry.load()) {
    MetricsRegistry null_metrics;  // the comparison run stays out of /metrics
    RunInputs null_in = in;
    null_in.plugin = "null";
    null_in.options = {};
    null_in.metrics = &null_metrics;
    null_in.server = nullptr;
    auto null_run = ReplayOnce(null_in);
    if (!null_run.ok()) return Fail(kExitUsage, null_run.status().message());
    compare = std::make_unique<sim::ReplayReport>(null_run.take());
  }
  sim::PrintReport(std::cout, run.value(), compare.get());
  if (!replay_config.report_json.empty()) {
    Status written = sim::WriteReportJson(replay_config.report_json, run.value(), compare.get());
    if (!written.ok()) return Fail(kExitUsage, written.message());
  }
  if (g_hurry.load()) {
    std::cout.flush();
    std::fprintf(stderr,
                 "tier-host: interrupted twice: the report covers the requests completed; "
                 "what was in flight was not waited for\n");
    std::_Exit(kExitInterrupted);
  }
  DefaultStopSignals();
  if (replay_config.linger && server && !g_stop.load()) {
    Log(TIER_LOG_INFO, "replay done; serving /metrics until SIGINT or SIGTERM (--linger)");
    WaitForSignal();
  }
  const sim::ReplayReport& r = run.value();
  if (!r.restore_exact) return Fail(kExitFailed, "a restored checkpoint did not match its bytes");
  if (r.provider_calls_outside_admission != 0) {
    return Fail(kExitFailed, "provider I/O happened outside admission and pressure");
  }
  if (r.interrupted)
    return Fail(kExitInterrupted, "interrupted: the report covers the requests completed");
  return kExitOk;
}

}  // namespace tier

namespace tier {
namespace {

struct CompareRun {
  double cold_gib = 0;
  std::string policy;
  sim::ReplayReport report;
};

std::string Num(double value, int digits) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(digits) << value;
  return out.str();
}

std::string ColdTtft(const sim::ReplayReport& r) {
  auto it = r.returning.find("cold");
  if (it == r.returning.end()) return "-";
  return Num(it->second.ttft_p50_s, 2);
}

void PrintCompareTable(std::ostream& out, const std::vector<CompareRun>& runs) {
  out << "\n"
      << std::left << std::setw(9) << "cold GiB" << std::setw(8) << "policy" << std::right
      << std::setw(12) << "saved s" << std::setw(9) << "share" << std::setw(8) << "cold+"
      << std::setw(11) << "cold" << std::setw(12) << "written/" << std::setw(8) << "device"
      << std::setw(7) << "host" << std::setw(7) << "root" << std::setw(10) << "TTFT p50"
      << std::setw(11) << "from cold" << std::setw(10) << "stable"
      << "\n"
      << std::left << std::setw(9) << "" << std::setw(8) << "" << std::right << std::setw(12)
      << "(net)" << std::setw(9) << "" << std::setw(8) << "prefet." << std::setw(11) << "written"
      << std::setw(12) << "saved s" << std::setw(8) << "hits" << std::setw(7) << "rest."
      << std::setw(7) << "prefill" << std::setw(10) << "s" << std::setw(11) << "TTFT p50 s"
      << std::setw(10) << ""
      << "\n";
  for (const CompareRun& run : runs) {
    const sim::ReplayReport& r = run.report;
    out << std::left << std::setw(9) << Num(run.cold_gib, 0) << std::setw(8) << run.policy
        << std::right << std::setw(12) << Num(r.prefill_seconds_saved, 1) << std::setw(8)
        << Num(100 * r.prefill_saved_share, 2) << "%" << std::setw(8)
        << (std::to_string(r.cold_restores) + "+" + std::to_string(r.host.prefetches_used))
        << std::setw(11) << FormatBytes(r.host.cold_write_logical_bytes) << std::setw(12)
        << FormatBytes(static_cast<uint64_t>(sim::ColdBytesPerSavedSecond(r))) << std::setw(8)
        << r.device_hits << std::setw(7) << r.host_restores << std::setw(7) << r.root_prefills
        << std::setw(10) << Num(r.ttft_p50_s, 2) << std::setw(11) << ColdTtft(r) << std::setw(10)
        << (r.unstable ? "UNSTABLE" : "yes") << "\n";
  }
  // The first policy against every other, size by size.
  if (runs.empty()) return;
  const std::string lead = runs.front().policy;
  bool ahead = true;
  for (const CompareRun& a : runs) {
    if (a.policy != lead) continue;
    for (const CompareRun& b : runs) {
      if (b.cold_gib == a.cold_gib && b.policy != lead &&
          b.report.prefill_seconds_saved >= a.report.prefill_seconds_saved) {
        ahead = false;
        out << lead << " is not ahead of " << b.policy << " at " << Num(a.cold_gib, 0) << " GiB ("
            << Num(a.report.prefill_seconds_saved, 1) << " s vs "
            << Num(b.report.prefill_seconds_saved, 1) << " s saved)\n";
      }
    }
  }
  if (ahead) out << lead << " saves the most prefill at every cold size\n";
}

nlohmann::json CompareJson(const std::vector<CompareRun>& runs) {
  nlohmann::json doc = nlohmann::json::array();
  for (const CompareRun& run : runs) {
    nlohmann::json r = sim::ReportJson(run.report);
    r["cold_kv_gib"] = run.cold_gib;
    doc.push_back(r);
  }
  return doc;
}

}  // namespace

int RunComparePoliciesCommand(const ServerConfig& config, const ReplayConfig& replay_config,
                              const CompareConfig& compare) {
  if (!config.cold_kv_dir.has_value() || config.cold_kv_dir->empty()) {
    return Fail(kExitUsage,
                "compare-policies needs --cold-kv-dir DIR: each run uses a fresh directory "
                "under it (DIR/compare-POLICY-SIZE, created by it and removed after the run)");
  }
  auto setup = PrepareReplay(config, replay_config);
  if (!setup.ok()) return Fail(kExitUsage, setup.status().message());
  const LoadedWorkload& loaded = setup.value().loaded;
  ReplayConfig replay = replay_config;
  if (replay.restore_cost.empty()) replay.restore_cost = "model";
  replay.compare_null = false;
  CatchStopSignals();
  std::cout << "compare-policies: " << loaded.workload.name << " ("
            << loaded.workload.requests.size() << " requests), Device " << config.device_kv_mib
            << " MiB, Host " << config.host_kv_mib << " MiB, " << config.max_concurrency
            << " lanes, restore cost "
            << (replay.restore_cost == "model" ? "model " + Num(replay.cold_read_gbps, 1) + " GB/s"
                                               : std::string("measured"))
            << ", bytes scale " << config.bytes_scale;
  if (!loaded.time_scale_how.empty()) {
    std::cout << ", trace time scale " << Num(loaded.time_scale, 2) << " (" << loaded.time_scale_how
              << ")";
  }
  std::cout << std::endl;
  std::vector<CompareRun> runs;
  for (double gib : compare.cold_sizes_gib) {
    for (const std::string& name : compare.policies) {
      if (g_stop.load()) break;
      ServerConfig run_config = config;
      run_config.policy = ParsePolicy(name).value();
      run_config.cold_kv_gib = gib;
      const std::filesystem::path dir =
          std::filesystem::path(*config.cold_kv_dir) / ("compare-" + name + "-" + Num(gib, 0));
      auto made = MakeRunDirectory(dir);
      if (!made.ok()) return Fail(kExitUsage, made.message());
      run_config.cold_kv_dir = dir.string();
      auto choice = ChooseProvider(run_config);
      if (!choice.ok()) return Fail(kExitUsage, choice.status().message());
      MetricsRegistry metrics;
      RunInputs in{
          &run_config, &replay, &setup.value(), choice.value().plugin, choice.value().options,
          &metrics,    nullptr};
      auto run = ReplayOnce(in);
      if (g_hurry.load() && run.ok()) {
        runs.push_back({gib, name, run.take()});
        break;  // the provider was left running on `dir`: it stays
      }
      if (Status removed = RemoveRunDirectory(dir); !removed.ok()) {
        Log(TIER_LOG_WARN, "compare-policies: " + removed.message());
      }
      if (!run.ok()) return Fail(kExitUsage, run.status().message());
      if (!run.value().restore_exact) {
        return Fail(kExitFailed, "a restored checkpoint did not match its bytes (" + name + ")");
      }
      runs.push_back({gib, name, run.take()});
    }
  }
  PrintCompareTable(std::cout, runs);
  if (!replay.report_json.empty()) {
    Status written = sim::WriteReportText(replay.report_json, CompareJson(runs).dump(2) + "\n");
    if (!written.ok()) return Fail(kExitUsage, written.message());
  }
  if (g_hurry.load()) {
    std::cout.flush();
    std::_Exit(kExitInterrupted);
  }
  DefaultStopSignals();
  if (g_stop.load()) return Fail(kExitInterrupted, "interrupted: the table covers the runs done");
  return kExitOk;
}

}  // namespace tier
