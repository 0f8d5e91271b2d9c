// server_config.h -- the server flags of tier-host (what a real server would take on its command
// line) and how they turn into a provider to load and its options.
#pragma once

#include <string>
#include <vector>

#include "provider_instance.h"
#include "status.h"

namespace CLI {
class App;
}

namespace tier {

struct ServerConfig {
  std::string tier_plugin;             // --tier-plugin PATH|null|disk ("" = chosen from the flags)
  std::vector<std::string> tier_opts;  // --tier-opt KEY=VALUE, in order
  std::string namespace_id = "tier-host";
  std::string log_level = "info";
  bool check = false;
};

// Registers the server flags on `app` (writing into `config`).
void AddServerFlags(CLI::App& app, ServerConfig& config);

// Splits every --tier-opt at its first '='. INVALID_ARGUMENT naming the bad value otherwise.
Result<ProviderOptions> ParseTierOpts(const std::vector<std::string>& tier_opts);

}  // namespace tier
