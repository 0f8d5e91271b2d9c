// gc.h -- `tier-host gc`: an operator's command that removes the least recently used checkpoints
// of the namespace from the cold tier until what is stored fits a size. For a shared tier (rados)
// it is how a fleet's pool is kept in bounds; it works on any provider that enumerates.
#pragma once

#include "server_config.h"

namespace tier {

struct GcConfig {
  double keep_gib = 0;   // keep at most this many logical GiB (stored = GiB / --bytes-scale)
  bool dry_run = false;  // list what would go, remove nothing
};

// Registers the gc subcommand's flags on `gc`.
void AddGcFlags(CLI::App& gc, GcConfig& config);
// Enumerates the namespace, orders its checkpoints by last use (the 1.1 times; creation time, then
// 0, when a provider does not record it), removes the oldest until the stored bytes fit. Safe
// against concurrent restores by the provider's contract (an accepted restore completes OK or
// NOT_FOUND, never with wrong bytes). Exit status as tier-host's.
int RunGcCommand(const ServerConfig& config, const GcConfig& gc);

}  // namespace tier
