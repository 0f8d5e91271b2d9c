// tier-host: a runnable stand-in server. Loads a tier provider through the C ABI and checks it
// (--check), or replays a workload through the Host and the provider (replay).
#include <signal.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include <tier/host/log.h>
#include <tier/host/model_profile.h>
#include "commands.h"
#include "gc.h"
#include "server_config.h"

int main(int argc, char** argv) {
  // A peer that hangs up (a /metrics client, a librados socket) must cost an EPIPE, not the
  // process (host.h, SIGNALS).
  ::signal(SIGPIPE, SIG_IGN);
  tier::ServerConfig config;
  tier::ReplayConfig replay_config;
  CLI::App app{
      "tier-host: a stand-in LLM server that drives a cold-tier provider through the "
      "tier ABI (loader, catalog, the Host over Device, Host and Cold, metrics)",
      "tier-host"};
  app.set_version_flag("--version", std::string("tier-host ") + TIER_VERSION + " (tier ABI " +
                                        std::to_string(TIER_ABI_VERSION_MAJOR) + "." +
                                        std::to_string(TIER_ABI_VERSION_MINOR) + ")");
  tier::AddServerFlags(app, config);
  bool list_profiles = false;
  app.add_flag("--list-profiles", list_profiles, "Print the shipped model profiles and exit");
  CLI::App* replay = app.add_subcommand(
      "replay",
      "Replay agent sessions or a request trace through the Host and the provider "
      "on a virtual clock; print what the cold tier saved");
  tier::AddReplayFlags(*replay, replay_config);
  tier::GcConfig gc_config;
  CLI::App* gc = app.add_subcommand(
      "gc",
      "Remove the least recently used checkpoints of the namespace from the cold tier until it "
      "stores at most --keep-gib (an operator's command). On a shared provider (rados) it may run "
      "while servers use the tier: a removed checkpoint is a miss for them, a restore in flight "
      "completes. The disk provider's directory is locked by the server using it: stop that "
      "server first (gc is refused, BUSY, while it runs)");
  tier::AddGcFlags(*gc, gc_config);
  tier::CompareConfig compare_config;
  CLI::App* compare = app.add_subcommand(
      "compare-policies",
      "Replay one workload under each policy (value, lru, gdsf) at several cold sizes, with a "
      "modelled restore cost, and print one table: prefill saved net of restore and "
      "transfer time, cold restores, cold bytes written and per saved prefill second");
  tier::AddReplayFlags(*compare, replay_config);
  tier::AddCompareFlags(*compare, compare_config);
  app.footer(
      "Usage: tier-host [server flags] --check | tier-host [server flags] replay [replay flags] |"
      "\n       tier-host [server flags] gc --keep-gib N [--dry-run] |"
      "\n       tier-host [server flags] compare-policies [replay flags] [--policies L] "
      "[--cold-sizes-gib L]\n"
      "Exit status: 0 success, 1 the provider or job failed, 2 bad usage or a plugin that cannot "
      "be loaded or opened (gc: also no cold tier), 130 a replay stopped by SIGINT/SIGTERM "
      "(partial report; a second signal stops waiting for what is in flight, the partial report "
      "is still written; a third leaves at once).\nExamples:\n"
      "  tier-host --tier-plugin disk --tier-opt dir=/var/tmp/cold --tier-opt capacity_gib=1 "
      "--check\n"
      "  tier-host --cold-kv-dir ~/cold --cold-kv-gib 200 --bytes-scale 1000 replay --workload "
      "agents --compare-null\n"
      "  tier-host --tier-plugin rados --tier-opt conf=/etc/ceph/ceph.conf --tier-opt pool=tier "
      "gc --keep-gib 512");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "tier-host: %s (see --help)\n", tier::EscapeForLog(e.what()).c_str());
    return tier::kExitUsage;
  }
  tier_log_level level = TIER_LOG_INFO;
  tier::ParseLogLevel(config.log_level, &level);
  tier::SetLogLevel(level);
  try {
    if (list_profiles) {
      for (const std::string& name : tier::ShippedProfileNames()) std::cout << name << "\n";
      return tier::kExitOk;
    }
    if (replay->parsed()) return tier::RunReplayCommand(config, replay_config);
    if (gc->parsed()) return tier::RunGcCommand(config, gc_config);
    if (compare->parsed()) {
      return tier::RunComparePoliciesCommand(config, replay_config, compare_config);
    }
    if (config.check) return tier::RunCheckCommand(config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tier-host: internal error: %s\n", e.what());
    return tier::kExitFailed;
  }
  std::cerr << app.help() << "\n";
  std::fprintf(stderr, "tier-host: nothing to do: give --check or replay (see --help)\n");
  return tier::kExitUsage;
}
