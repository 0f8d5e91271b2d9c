#include "commands.h"

#include <signal.h>
#include <tier/device/engine_select.h>
#include <tier/host/cost_model.h>
#include <tier/host/host.h>
#include <tier/host/host_services.h>
#include <tier/host/log.h>
#include <tier/host/metrics_registry.h>
#include <tier/host/metrics_server.h>
#include <tier/host/plugin_loader.h>
#include <tier/host/provider_instance.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>

#include "check.h"
#include "kv_pool.h"
#include "replay.h"
#include "report.h"

namespace tier {
namespace {

std::atomic<bool> g_stop{false};

void OnStopSignal(int) {
  g_stop.store(true);
  ::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
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

struct RunInputs {
  const ServerConfig* config;
  const ReplayConfig* replay;
  const ModelProfile* profile;
  const sim::Workload* workload;
  std::string plugin;
  ProviderOptions options;
  std::string namespace_id;
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

// One replay of the workload against one provider, with its own Host (catalog, tiers) and pool.
Result<sim::ReplayReport> ReplayOnce(const RunInputs& in) {
  const ServerConfig& config = *in.config;
  auto engine = SimulatorEngine(config.device);
  if (!engine.ok()) return engine.status();
  const uint64_t device_bytes = config.device_kv_mib << 20;
  auto pool =
      sim::KvPool::Create(engine.value().get(), *in.profile, config.bytes_scale,
                          sim::ReplayPoolPages(*in.workload, *in.profile, config.bytes_scale,
                                               device_bytes, config.max_concurrency));
  if (!pool.ok()) return pool.status();
  HostOptions options;
  options.plugin = in.plugin;
  options.provider_options = in.options;
  options.namespace_id = in.namespace_id;
  options.profile = *in.profile;
  options.pool = pool.value()->view();
  options.engine = engine.value();
  options.device_capacity_bytes = device_bytes;
  options.host_capacity_bytes = config.host_kv_mib << 20;
  options.bytes_scale = config.bytes_scale;
  options.metrics = in.metrics;
  options.policy = config.policy;
  options.provider_timeout_ns = static_cast<uint64_t>(config.provider_timeout_s * 1e9);
  auto host = Host::Open(std::move(options));
  if (!host.ok()) return host.status();
  const std::string io_path = host.value()->provider_io_path();
  Log(TIER_LOG_INFO,
      "replay: " + in.workload->name + " (" + std::to_string(in.workload->requests.size()) +
          " requests) with the " + host.value()->provider_name() + " provider" +
          (io_path.empty() ? std::string() : ", io path " + io_path) + ", namespace " +
          in.namespace_id + ", policy " + PolicyName(config.policy));
  sim::RegisterReplayMetrics(in.metrics);
  WaitForScrape(in);
  sim::ReplayOptions run;
  run.max_concurrency = config.max_concurrency;
  run.progress = in.replay->progress;
  run.label = host.value()->provider_name();
  run.prefetch_lead_s = in.replay->prefetch_lead_s;
  run.stop = &g_stop;
  run.clock = in.replay->clock == "wall" ? sim::ReplayOptions::Clock::kWall
                                         : sim::ReplayOptions::Clock::kVirtual;
  run.time_scale = in.replay->time_scale;
  CostModel cost(*in.profile);
  sim::ReplayReport report =
      sim::RunReplay(*in.workload, *host.value(), *pool.value(), cost, in.metrics, run);
  report.provider = host.value()->provider_name();
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

Result<sim::Workload> LoadWorkload(const ReplayConfig& replay) {
  if (!replay.trace.empty() || replay.workload == "trace") {
    if (replay.trace.empty()) return Status::InvalidArgument("--workload trace needs --trace FILE");
    return sim::LoadMooncakeTrace(replay.trace, replay.trace_time_scale);
  }
  sim::AgentsWorkloadOptions agents;
  agents.sessions = replay.sessions;
  agents.seed = replay.seed;
  return sim::GenerateAgentsWorkload(agents);
}

}  // namespace

std::string NamespaceFor(const ServerConfig& config, const ModelProfile& profile) {
  return !config.namespace_id.empty()
             ? config.namespace_id
             : profile.LayoutFingerprint() + "/scale" + std::to_string(config.bytes_scale);
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
  auto profile = LoadModelProfile(ResolveProfilePath(config.model_profile));
  if (!profile.ok()) return Fail(kExitUsage, profile.status().message());
  auto workload = LoadWorkload(replay_config);
  if (!workload.ok()) return Fail(kExitUsage, workload.status().message());
  auto choice = ChooseProvider(config);
  if (!choice.ok()) return Fail(kExitUsage, choice.status().message());
  if (replay_config.wait_for_scrape_s > 0 && config.metrics_addr.empty()) {
    return Fail(kExitUsage, "--wait-for-scrape needs --metrics-addr HOST:PORT");
  }
  const std::string namespace_id = NamespaceFor(config, profile.value());
  if (Status s = sim::CheckReportPath(replay_config.report_json); !s.ok()) {
    return Fail(kExitUsage, s.message());
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
  g_stop.store(false);
  ::signal(SIGINT, OnStopSignal);
  ::signal(SIGTERM, OnStopSignal);
  RunInputs in{&config,
               &replay_config,
               &profile.value(),
               &workload.value(),
               choice.value().plugin,
               choice.value().options,
               namespace_id,
               &metrics,
               server.get()};
  auto run = ReplayOnce(in);
  if (!run.ok()) return Fail(kExitUsage, run.status().message());
  std::unique_ptr<sim::ReplayReport> compare;
  if (replay_config.compare_null && !g_stop.load()) {
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
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  sim::PrintReport(std::cout, run.value(), compare.get());
  if (!replay_config.report_json.empty()) {
    Status written = sim::WriteReportJson(replay_config.report_json, run.value(), compare.get());
    if (!written.ok()) return Fail(kExitUsage, written.message());
  }
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
