#include "commands.h"

#include <signal.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "check.h"
#include "cold_tier.h"
#include <tier/host/cost_model.h>
#include "device_tier.h"
#include <tier/host/host_services.h>
#include <tier/host/log.h>
#include <tier/host/metrics_registry.h>
#include <tier/host/metrics_server.h>
#include "planner.h"
#include <tier/host/plugin_loader.h>
#include <tier/host/provider_instance.h>
#include "replay.h"
#include "report.h"
#include "server_metrics.h"

namespace tier {
namespace {

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "tier-host: %s\n", message.c_str());
  return code;
}

// One loaded and opened provider.
struct OpenProvider {
  std::shared_ptr<PluginLibrary> library;
  std::unique_ptr<ProviderInstance> instance;
};

Result<OpenProvider> LoadAndOpen(const std::string& plugin, const ProviderOptions& options,
                                 const HostServices& host, const std::string& namespace_id) {
  const std::string path = ResolvePluginPath(plugin);
  auto library = PluginLibrary::Load(path, host.table());
  if (!library.ok()) return library.status();
  auto instance = ProviderInstance::Open(library.value(), host.table(), namespace_id, options);
  if (!instance.ok()) {
    return Status(instance.status().code(), std::string("cannot open the ") +
                                                library.value()->name() + " provider (" + path +
                                                "): " + instance.status().ToString());
  }
  OpenProvider open;
  open.library = library.take();
  open.instance = instance.take();
  return open;
}

// One replay of `workload` against one provider, with its own catalog and planner.
Result<ReplayReport> ReplayOnce(const ServerConfig& config, const ReplayConfig& replay_config,
                                const ModelProfile& profile, const Workload& workload,
                                const std::string& plugin, const ProviderOptions& options,
                                const std::string& namespace_id, MetricsRegistry* metrics,
                                DeviceTier* device, const MetricsServer* server = nullptr) {
  HostServices host(metrics);
  ServerMetrics server_metrics(metrics);
  server_metrics.SetDevicePath(device->path());
  auto provider = LoadAndOpen(plugin, options, host, namespace_id);
  if (!provider.ok()) return provider.status();
  ProviderInstance& instance = *provider.value().instance;
  ColdTier cold(&instance);
  CostModel cost(profile);
  PlannerConfig planner_config;
  planner_config.namespace_id = namespace_id;
  planner_config.device_capacity_bytes = config.device_kv_mib << 20;
  planner_config.host_capacity_bytes = config.host_kv_mib << 20;
  planner_config.bytes_scale = config.bytes_scale;
  Planner planner(planner_config, cost, device, &cold, &server_metrics);
  Status started = planner.Start();
  if (!started.ok())
    return Status(started.code(), "re-adopting cold checkpoints: " + started.ToString());
  auto info = instance.Info();
  const std::string name = instance.library().name();
  Log(TIER_LOG_INFO,
      "replay: " + workload.name + " (" + std::to_string(workload.requests.size()) +
          " requests) with the " + name + " provider" +
          (info.ok() && info.value().io_path ? std::string(", io path ") + info.value().io_path
                                             : std::string()) +
          ", namespace " + namespace_id);
  if (server != nullptr && replay_config.wait_for_scrape_s > 0) {
    // Every series exists now: let a scraper record them at zero before the replay moves them.
    const uint64_t started = server->scrapes_started();
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%g", replay_config.wait_for_scrape_s);
    Log(TIER_LOG_INFO, std::string("waiting up to ") + seconds +
                           " s for /metrics to be scraped (--wait-for-scrape)");
    const auto timeout =
        std::chrono::milliseconds(static_cast<int64_t>(replay_config.wait_for_scrape_s * 1000.0));
    if (!server->WaitForScrapeStartedAfter(started, timeout)) {
      Log(TIER_LOG_WARN, "no scrape of /metrics within --wait-for-scrape; replaying anyway");
    }
  }
  ReplayOptions options_run;
  options_run.max_concurrency = config.max_concurrency;
  options_run.progress = replay_config.progress;
  options_run.label = name;
  ReplayReport report = RunReplay(workload, planner, cost, &server_metrics, &cold, options_run);
  report.provider = name;
  instance.Close();
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

}  // namespace

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
  const bool passed = RunProviderCheck(*instance.value(), std::cout);
  instance.value()->Close();
  return passed ? kExitOk : kExitFailed;
}

int RunReplayCommand(const ServerConfig& config, const ReplayConfig& replay_config) {
  auto profile = LoadModelProfile(ResolveProfilePath(config.model_profile));
  if (!profile.ok()) return Fail(kExitUsage, profile.status().message());
  Workload workload;
  if (!replay_config.trace.empty() || replay_config.workload == "trace") {
    if (replay_config.trace.empty()) return Fail(kExitUsage, "--workload trace needs --trace FILE");
    auto loaded = LoadMooncakeTrace(replay_config.trace, replay_config.trace_time_scale);
    if (!loaded.ok()) return Fail(kExitUsage, loaded.status().message());
    workload = loaded.take();
  } else {
    AgentsWorkloadOptions agents;
    agents.sessions = replay_config.sessions;
    agents.seed = replay_config.seed;
    workload = GenerateAgentsWorkload(agents);
  }
  auto choice = ChooseProvider(config);
  if (!choice.ok()) return Fail(kExitUsage, choice.status().message());
  const std::string namespace_id =
      !config.namespace_id.empty()
          ? config.namespace_id
          : profile.value().LayoutFingerprint() + "/scale" + std::to_string(config.bytes_scale);

  std::string device_reason;
  auto device = SelectDeviceTier(config.device, &device_reason);
  if (!device.ok()) return Fail(kExitUsage, device.status().message());
  Log(TIER_LOG_INFO, std::string("device path: ") + device.value()->path() + " (" +
                         device.value()->description() + "; " + device_reason + ")");

  if (replay_config.wait_for_scrape_s > 0 && config.metrics_addr.empty()) {
    return Fail(kExitUsage, "--wait-for-scrape needs --metrics-addr HOST:PORT");
  }
  if (Status s = CheckReportPath(replay_config.report_json); !s.ok())
    return Fail(kExitUsage, s.message());
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
  auto run = ReplayOnce(config, replay_config, profile.value(), workload, choice.value().plugin,
                        choice.value().options, namespace_id, &metrics, device.value().get(),
                        server.get());
  if (!run.ok()) return Fail(kExitUsage, run.status().message());
  std::unique_ptr<ReplayReport> compare;
  if (replay_config.compare_null) {
    MetricsRegistry null_metrics;  // the comparison run stays out of /metrics
    auto null_run = ReplayOnce(config, replay_config, profile.value(), workload, "null", {},
                               namespace_id, &null_metrics, device.value().get());
    if (!null_run.ok()) return Fail(kExitUsage, null_run.status().message());
    compare = std::make_unique<ReplayReport>(null_run.take());
  }
  PrintReport(std::cout, run.value(), compare.get());
  if (!replay_config.report_json.empty()) {
    Status written = WriteReportJson(replay_config.report_json, run.value(), compare.get());
    if (!written.ok()) return Fail(kExitUsage, written.message());
  }
  if (replay_config.linger && server) {
    Log(TIER_LOG_INFO, "replay done; serving /metrics until SIGINT or SIGTERM (--linger)");
    WaitForSignal();
  }
  const ReplayReport& r = run.value();
  if (!r.restore_exact) return Fail(kExitFailed, "a restored checkpoint did not match its bytes");
  if (r.provider_calls_outside_admission != 0) {
    return Fail(kExitFailed, "provider I/O happened outside admission and pressure");
  }
  return kExitOk;
}

}  // namespace tier
