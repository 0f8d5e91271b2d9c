#include "server_config.h"

#include <CLI/CLI.hpp>

namespace tier {

void AddServerFlags(CLI::App& app, ServerConfig& config) {
  app.add_option("--tier-plugin", config.tier_plugin,
                 "Tier provider to load: a path to a .so, or a short name (null, disk) looked up "
                 "in $TIER_PLUGIN_PATH, <prefix>/lib/tier and the build tree")
      ->type_name("PATH");
  app.add_option("--tier-opt", config.tier_opts,
                 "Option handed to the provider's open, KEY=VALUE (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  app.add_option("--namespace", config.namespace_id,
                 "Model/layout fingerprint; checkpoints of another namespace are never served")
      ->capture_default_str();
  app.add_option("--log-level", config.log_level, "debug, info, warn or error")
      ->capture_default_str()
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  app.add_flag(
      "--check", config.check,
      "Load and open the provider, print its name, version and negotiated ABI, then "
      "spill/stat/restore/remove one small multi-segment checkpoint and compare the bytes");
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

}  // namespace tier
