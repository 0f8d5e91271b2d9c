#include <tier/host/log.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

namespace tier {
namespace {

std::atomic<int> g_level{TIER_LOG_INFO};
std::mutex g_mutex;
LogSink g_sink;  // guarded by g_mutex

}  // namespace

std::string EscapeForLog(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  auto hex = [&](unsigned char c) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 0xf];
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      hex(c);
    } else if (c == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      hex(c);  // a C1 control in UTF-8 (U+0080..U+009F: NEL, CSI, ...)
      hex(static_cast<unsigned char>(text[++i]));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

void SetLogLevel(tier_log_level level) {
  g_level.store(level);
}
tier_log_level GetLogLevel() {
  return g_level.load();
}

bool ParseLogLevel(std::string_view text, tier_log_level* level) {
  static constexpr std::pair<std::string_view, tier_log_level> kLevels[] = {
      {"debug", TIER_LOG_DEBUG},
      {"info", TIER_LOG_INFO},
      {"warn", TIER_LOG_WARN},
      {"error", TIER_LOG_ERROR}};
  for (const auto& [name, value] : kLevels) {
    if (text == name) {
      *level = value;
      return true;
    }
  }
  return false;
}

const char* LogLevelName(tier_log_level level) {
  switch (level) {
    case TIER_LOG_DEBUG:
      return "debug";
    case TIER_LOG_INFO:
      return "info";
    case TIER_LOG_WARN:
      return "warn";
    case TIER_LOG_ERROR:
      return "error";
    default:
      return "log";
  }
}

void SetLogSink(LogSink sink) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_sink = std::move(sink);
}

void Log(tier_log_level level, std::string_view message) {
  if (level < g_level.load()) return;
  std::string line = "tier: ";
  line += LogLevelName(level);
  line += ": ";
  line += EscapeForLog(message);
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_sink) {
    g_sink(level, line);
    return;
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace tier
