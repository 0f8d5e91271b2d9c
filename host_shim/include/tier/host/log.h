// log.h -- the host's log: one line per event on stderr (or a test's sink), with a level filter.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "tier_provider.h"

namespace tier {

using LogSink = std::function<void(tier_log_level level, std::string_view line)>;

// Sets the lowest level written (default TIER_LOG_INFO). Any thread.
void SetLogLevel(tier_log_level level);
tier_log_level GetLogLevel();
// Parses "debug", "info", "warn", "error"; false on anything else.
bool ParseLogLevel(std::string_view text, tier_log_level* level);
// Replaces where lines go (nullptr restores stderr). Not thread-safe against concurrent Log().
void SetLogSink(LogSink sink);
// Writes "tier: <level>: <message>" if level passes the filter. Any thread; lines never interleave.
void Log(tier_log_level level, std::string_view message);

const char* LogLevelName(tier_log_level level);

}  // namespace tier
