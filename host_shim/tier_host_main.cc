// tier-host: a runnable stand-in server. Loads a tier provider through the C ABI and checks it
// (--check); later subcommands replay workloads through the catalog and planner.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

#include "check.h"
#include "host_services.h"
#include "log.h"
#include "metrics_registry.h"
#include "plugin_loader.h"
#include "provider_instance.h"
#include "server_config.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;  // the provider misbehaved / the job failed
constexpr int kExitUsage = 2;   // bad flags, a plugin that cannot load or open

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "tier-host: %s\n", message.c_str());
  return code;
}

int RunCheck(const tier::ServerConfig& config) {
  tier::MetricsRegistry metrics;
  tier::HostServices host(&metrics);
  const std::string path =
      tier::ResolvePluginPath(config.tier_plugin.empty() ? "null" : config.tier_plugin);
  auto options = tier::ParseTierOpts(config.tier_opts);
  if (!options.ok()) return Fail(kExitUsage, options.status().message());
  auto library = tier::PluginLibrary::Load(path, host.table());
  if (!library.ok()) return Fail(kExitUsage, library.status().message());
  std::cout << "tier-host --check: plugin " << path << "\n";
  auto instance = tier::ProviderInstance::Open(library.value(), host.table(), config.namespace_id,
                                               options.value());
  if (!instance.ok()) {
    return Fail(kExitUsage, std::string("cannot open the ") + library.value()->name() +
                                " provider: " + instance.status().ToString());
  }
  const bool passed = tier::RunProviderCheck(*instance.value(), std::cout);
  instance.value()->Close();
  return passed ? kExitOk : kExitFailed;
}

}  // namespace

int main(int argc, char** argv) {
  tier::ServerConfig config;
  CLI::App app{
      "tier-host: a stand-in LLM server that drives a cold-tier provider through the "
      "tier ABI (loader, catalog, planner, metrics)",
      "tier-host"};
  app.set_version_flag("--version", std::string("tier-host ") + TIER_VERSION + " (tier ABI " +
                                        std::to_string(TIER_ABI_VERSION_MAJOR) + "." +
                                        std::to_string(TIER_ABI_VERSION_MINOR) + ")");
  tier::AddServerFlags(app, config);
  app.footer(
      "Exit status: 0 success, 1 the provider or job failed, 2 bad usage or a plugin that cannot "
      "be loaded or opened.\nExample: tier-host --tier-plugin disk --tier-opt dir=/var/tmp/cold "
      "--tier-opt capacity_gib=1 --check");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return Fail(kExitUsage, std::string(e.what()) + " (see --help)");
  }
  tier_log_level level = TIER_LOG_INFO;
  tier::ParseLogLevel(config.log_level, &level);
  tier::SetLogLevel(level);
  try {
    if (config.check) return RunCheck(config);
  } catch (const std::exception& e) {
    return Fail(kExitFailed, std::string("internal error: ") + e.what());
  }
  std::cerr << app.help() << "\n";
  return Fail(kExitUsage, "nothing to do: give --check (see --help)");
}
