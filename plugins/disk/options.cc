#include "options.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>
#include <string_view>

namespace tier::disk {
namespace {

Status Bad(std::string_view key, std::string_view expected, std::string_view got) {
  return Status(TIER_INVALID_ARGUMENT, "disk: option '" + std::string(key) + "': expected " +
                                           std::string(expected) + ", got '" + std::string(got) +
                                           "'");
}

// Parses a decimal integer in [lo, hi] with nothing around it.
bool ParseInt(std::string_view text, int64_t lo, int64_t hi, int64_t* out) {
  if (text.empty()) return false;
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return false;
  if (value < lo || value > hi) return false;
  *out = value;
  return true;
}

bool ParseU64(std::string_view text, uint64_t lo, uint64_t hi, uint64_t* out) {
  if (text.empty() || text[0] == '-' || text[0] == '+') return false;
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return false;
  if (value < lo || value > hi) return false;
  *out = value;
  return true;
}

// Non-negative decimal with an optional fraction ("1", "0.5", "12.25"); no exponent, no sign.
bool ParseDecimal(std::string_view text, double* out) {
  if (text.empty() || text.size() > 64) return false;
  bool dot = false, digit = false;
  for (char c : text) {
    if (c == '.') {
      if (dot) return false;
      dot = true;
    } else if (c >= '0' && c <= '9') {
      digit = true;
    } else {
      return false;
    }
  }
  if (!digit) return false;
  const std::string copy(text);
  char* end = nullptr;
  const double value = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || !std::isfinite(value)) return false;
  *out = value;
  return true;
}

}  // namespace

const char* CompressionName(CompressionMode mode) {
  switch (mode) {
    case CompressionMode::kOff:
      return "off";
    case CompressionMode::kZstd:
      return "zstd";
    case CompressionMode::kAuto:
      return "auto";
  }
  return "?";
}

const char* DirectIoName(DirectIoMode mode) {
  switch (mode) {
    case DirectIoMode::kAuto:
      return "auto";
    case DirectIoMode::kOn:
      return "on";
    case DirectIoMode::kOff:
      return "off";
  }
  return "?";
}

const char* DurabilityName(Durability durability) {
  return durability == Durability::kNone ? "none" : "fdatasync";
}

Result<DiskOptions> ParseOptions(std::span<const tier_option> options) {
  DiskOptions out;
  std::set<std::string, std::less<>> seen;
  bool have_dir = false, have_capacity = false;
  for (const tier_option& option : options) {
    if (option.key == nullptr || option.value == nullptr) {
      return Status(TIER_INVALID_ARGUMENT, "disk: option with a NULL key or value");
    }
    const std::string_view key = option.key;
    const std::string_view value = option.value;
    if (!seen.insert(std::string(key)).second) {
      return Status(TIER_INVALID_ARGUMENT, "disk: option '" + std::string(key) + "' given twice");
    }
    int64_t i = 0;
    uint64_t u = 0;
    if (key == "dir") {
      if (value.empty()) {
        return Status(TIER_INVALID_ARGUMENT,
                      "disk: option 'dir' is empty: the cold tier is off (give a directory on a "
                      "local Linux filesystem to enable it)");
      }
      if (value.size() > 4000 || value.find('\0') != std::string_view::npos) {
        return Bad(key, "a directory path shorter than 4000 bytes", value.substr(0, 64));
      }
      out.dir = std::string(value);
      have_dir = true;
    } else if (key == "capacity_bytes" || key == "capacity_gib") {
      if (have_capacity) {
        return Status(TIER_INVALID_ARGUMENT,
                      "disk: option '" + std::string(key) +
                          "': give one of capacity_bytes and capacity_gib, not both");
      }
      if (key == "capacity_bytes") {
        if (!ParseU64(value, 1, UINT64_MAX >> 1, &u)) {
          return Bad(key, "a decimal byte count in [1, 2^63)", value);
        }
        out.capacity_bytes = u;
      } else {
        double gib = 0;
        if (!ParseDecimal(value, &gib) || !(gib > 0) || gib >= 8.0 * 1024 * 1024 * 1024) {
          return Bad(key, "a positive decimal number of GiB (e.g. 64 or 0.5)", value);
        }
        out.capacity_bytes = static_cast<uint64_t>(std::llround(gib * 1073741824.0));
        if (out.capacity_bytes == 0) return Bad(key, "at least one byte", value);
      }
      have_capacity = true;
    } else if (key == "compression") {
      if (value == "off")
        out.compression = CompressionMode::kOff;
      else if (value == "zstd")
        out.compression = CompressionMode::kZstd;
      else if (value == "auto")
        out.compression = CompressionMode::kAuto;
      else
        return Bad(key, "one of off, zstd, auto", value);
    } else if (key == "zstd_level") {
      if (!ParseInt(value, -7, 19, &i)) return Bad(key, "an integer in [-7, 19]", value);
      out.zstd_level = static_cast<int>(i);
    } else if (key == "direct_io") {
      if (value == "auto")
        out.direct_io = DirectIoMode::kAuto;
      else if (value == "on")
        out.direct_io = DirectIoMode::kOn;
      else if (value == "off")
        out.direct_io = DirectIoMode::kOff;
      else
        return Bad(key, "one of auto, on, off", value);
    } else if (key == "queue_depth") {
      if (!ParseInt(value, 1, 1024, &i)) return Bad(key, "an integer in [1, 1024]", value);
      out.queue_depth = static_cast<uint32_t>(i);
    } else if (key == "io_threads") {
      if (!ParseInt(value, 1, 64, &i)) return Bad(key, "an integer in [1, 64]", value);
      out.io_threads = static_cast<uint32_t>(i);
    } else if (key == "codec_threads") {
      if (!ParseInt(value, 1, 64, &i)) return Bad(key, "an integer in [1, 64]", value);
      out.codec_threads = static_cast<uint32_t>(i);
    } else if (key == "durability") {
      if (value == "none")
        out.durability = Durability::kNone;
      else if (value == "fdatasync")
        out.durability = Durability::kFdatasync;
      else
        return Bad(key, "one of none, fdatasync", value);
    } else if (key == "staging_mib") {
      if (!ParseInt(value, 1, 65536, &i)) return Bad(key, "an integer in [1, 65536]", value);
      out.staging_bytes = static_cast<uint64_t>(i) << 20;
    } else if (key == "allow_foreign_fs") {
      if (value == "0")
        out.allow_foreign_fs = false;
      else if (value == "1")
        out.allow_foreign_fs = true;
      else
        return Bad(key, "0 or 1", value);
    } else if (key == "chunk_kib") {
      if (!ParseInt(value, 64, 65536, &i) || i % 4 != 0) {
        return Bad(key, "a multiple of 4 in [64, 65536]", value);
      }
      out.chunk_bytes = static_cast<uint32_t>(i) << 10;
    } else {
      return Status(TIER_INVALID_ARGUMENT,
                    "disk: unknown option '" + std::string(key).substr(0, 64) +
                        "' (known: dir, capacity_bytes, capacity_gib, compression, zstd_level, "
                        "direct_io, queue_depth, io_threads, codec_threads, durability, "
                        "staging_mib, allow_foreign_fs, chunk_kib)");
    }
  }
  if (!have_dir) {
    return Status(TIER_INVALID_ARGUMENT,
                  "disk: option 'dir' is required (the cold-tier directory)");
  }
  if (!have_capacity) {
    return Status(TIER_INVALID_ARGUMENT,
                  "disk: option 'capacity_bytes' or 'capacity_gib' is required (the byte budget)");
  }
  if (out.staging_bytes < 2ull * out.chunk_bytes) {
    return Status(TIER_INVALID_ARGUMENT,
                  "disk: option 'staging_mib': must hold at least two chunks of chunk_kib=" +
                      std::to_string(out.chunk_bytes >> 10) + " (" +
                      std::to_string(out.staging_bytes >> 20) + " MiB given)");
  }
  return out;
}

}  // namespace tier::disk
