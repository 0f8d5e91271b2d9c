#include <tier/host/format.h>

#include <cstdio>

namespace tier {

std::string FormatBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 3) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.2f %s", value, kUnits[unit]);
  return buffer;
}

std::string FormatDurationNs(uint64_t ns) {
  char buffer[32];
  if (ns < 1000000ull) {
    std::snprintf(buffer, sizeof(buffer), "%.0f us", static_cast<double>(ns) / 1e3);
  } else if (ns < 1000000000ull) {
    std::snprintf(buffer, sizeof(buffer), "%.1f ms", static_cast<double>(ns) / 1e6);
  } else if (ns < 60000000000ull) {
    std::snprintf(buffer, sizeof(buffer), "%.2f s", static_cast<double>(ns) / 1e9);
  } else {
    const uint64_t s = ns / 1000000000ull;
    std::snprintf(buffer, sizeof(buffer), "%llum %02llus", static_cast<unsigned long long>(s / 60),
                  static_cast<unsigned long long>(s % 60));
  }
  return buffer;
}

}  // namespace tier
