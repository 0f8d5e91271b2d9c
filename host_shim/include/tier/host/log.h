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
// Writes "tier: <level>: <message>" if level passes the filter, the message escaped by
// EscapeForLog (so a value from a user or a provider cannot start a line of its own). Any
// thread; lines never interleave.
void Log(tier_log_level level, std::string_view message);
// `text` with every control character shown: \n, \r, \t, a backslash as \\, other C0 controls,
// DEL and UTF-8 C1 controls as \xNN per byte; everything else (UTF-8 included) unchanged. Pure.
std::string EscapeForLog(std::string_view text);

const char* LogLevelName(tier_log_level level);

}  // namespace tier
