// commands.h -- what tier-host does once its command line is parsed.
#pragma once

#include <tier/host/model_profile.h>

#include <string>

#include "server_config.h"

namespace tier {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;         // the provider misbehaved / the job failed
constexpr int kExitUsage = 2;          // bad flags, a plugin that cannot load or open
constexpr int kExitInterrupted = 130;  // SIGINT/SIGTERM stopped a replay (partial report)

// The namespace a replay (or gc) works in: CheckpointNamespace(--namespace, profile, bytes scale).
std::string NamespaceFor(const ServerConfig& config, const ModelProfile& profile);

// --check: exercise one provider through every ABI operation.
int RunCheckCommand(const ServerConfig& config);
// replay: a workload through the Host (catalog, admission, pressure) and the provider; prints the
// report.
int RunReplayCommand(const ServerConfig& config, const ReplayConfig& replay);
// compare-policies: the same workload under each policy at each cold size (fresh cold
// directories under --cold-kv-dir), one table; the restore cost is modelled unless
// --restore-cost measured. Main thread.
int RunComparePoliciesCommand(const ServerConfig& config, const ReplayConfig& replay,
                              const CompareConfig& compare);

}  // namespace tier
