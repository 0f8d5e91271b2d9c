#include "flag_ranges.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <tier/host/log.h>

namespace tier {
namespace {

std::string Plain(double value) {
  char text[64];
  if (value == std::floor(value) && std::fabs(value) < 1e18) {
    std::snprintf(text, sizeof(text), "%.0f", value);
  } else {
    std::snprintf(text, sizeof(text), "%.12g", value);
  }
  return text;
}

// "'TEXT' is not a whole number of MiB from 0 to 17179869184 (0 B to 16 PiB)" and the like.
std::string Refusal(const std::string& text, const std::string& what, const std::string& range) {
  return "'" + EscapeForLog(text) + "' is not " + what + " " + range;
}

std::string RangeText(const std::string& min, const std::string& max, double min_bytes,
                      double max_bytes) {
  std::string range = "from " + min + " to " + max;
  if (max_bytes > 0)
    range += " (" + ReadableBytes(min_bytes) + " to " + ReadableBytes(max_bytes) + ")";
  return range;
}

}  // namespace

bool ParseWhole(const std::string& text, uint64_t* value) {
  if (text.empty() || text.size() > 20 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  errno = 0;
  char* end = nullptr;
  const unsigned long long parsed = std::strtoull(text.c_str(), &end, 10);
  if (errno == ERANGE || end != text.c_str() + text.size()) return false;
  *value = parsed;
  return true;
}

bool ParseNumber(const std::string& text, double* value) {
  // Digits, one point, an exponent: what strtod reads as decimal (no hex, inf, nan, spaces).
  if (text.empty() || text.find_first_not_of("0123456789.eE+-") != std::string::npos) return false;
  errno = 0;
  char* end = nullptr;
  const double parsed = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(parsed)) return false;
  *value = parsed;
  return true;
}

std::string ReadableBytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  size_t unit = 0;
  while (unit + 1 < std::size(kUnits) && bytes >= 1024) {
    bytes /= 1024;
    ++unit;
  }
  char text[64];
  if (bytes == std::floor(bytes)) {
    std::snprintf(text, sizeof(text), "%.0f %s", bytes, kUnits[unit]);
  } else {
    std::snprintf(text, sizeof(text), "%.3g %s", bytes, kUnits[unit]);
  }
  return text;
}

CLI::Validator WholeInRange(uint64_t min, uint64_t max, const std::string& unit_name,
                            uint64_t unit_bytes) {
  const double unit = static_cast<double>(unit_bytes);
  const std::string range =
      RangeText(std::to_string(min), std::to_string(max), static_cast<double>(min) * unit,
                static_cast<double>(max) * unit);
  const std::string what = unit_name.empty() ? "a whole number" : "a whole number of " + unit_name;
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        uint64_t value = 0;
        if (ParseWhole(text, &value) && value >= min && value <= max) return {};
        return Refusal(text, what, range);
      },
      unit_name.empty() ? range : unit_name + " " + range);
}

CLI::Validator NumberInRange(double min, double max, const std::string& unit, double unit_bytes) {
  const std::string range = RangeText(Plain(min), Plain(max), min * unit_bytes, max * unit_bytes);
  const std::string what = unit.empty() ? "a number" : "a number of " + unit;
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double value = 0;
        if (ParseNumber(text, &value) && value >= min && value <= max) return {};
        return Refusal(text, what, range);
      },
      unit.empty() ? range : unit + " " + range);
}

}  // namespace tier
