// Option parsing, one table row per option: its key, what a valid value looks like (the range the
// refusal message names) and its parser. ParseOptions walks the given options through the table,
// then checks what spans options (required keys, staging against chunk size).
#include "options.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string_view>

#include <tier/provider/option_text.h>

namespace tier::disk {
namespace {

// What the rows fill in, plus what the cross-option checks need to know.
struct Parsed {
  DiskOptions options;
  bool have_dir = false;  // dir or dirs
  bool have_capacity = false;
};

// One option. `parse` stores the value or returns the refusal; integer rows keep their range in
// [lo, hi] (and `multiple`), and `expected` says it in words for the message.
struct OptionRow {
  std::string_view key;
  std::string_view expected;
  Status (*parse)(const OptionRow& row, std::string_view value, Parsed* out);
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t multiple = 1;
};

Status Bad(std::string_view key, std::string_view expected, std::string_view got) {
  return Status(TIER_INVALID_ARGUMENT, "disk: option '" + std::string(key) + "': expected " +
                                           std::string(expected) + ", got '" + std::string(got) +
                                           "'");
}

Status Bad(const OptionRow& row, std::string_view got) {
  return Bad(row.key, row.expected, got);
}

// A decimal integer in [row.lo, row.hi], a multiple of row.multiple, with nothing around it.
bool ParseInt(const OptionRow& row, std::string_view text, int64_t* out) {
  return provider::ParseInteger(text, row.lo, row.hi, out) && *out % row.multiple == 0;
}

// A decimal byte count in [1, 2^63) without a sign.
bool ParseByteCount(std::string_view text, uint64_t* out_bytes) {
  return provider::ParseUnsigned(text, 1, UINT64_MAX >> 1, out_bytes);
}

// Stores an integer option, scaled by 2^shift (staging_mib: 20, chunk_kib: 10).
template <typename T>
Status SetInt(const OptionRow& row, std::string_view value, T* field, int shift = 0) {
  int64_t parsed = 0;
  if (!ParseInt(row, value, &parsed)) return Bad(row, value);
  *field = static_cast<T>(static_cast<uint64_t>(parsed) << shift);
  return Status::Ok();
}

template <typename T>
struct Named {
  std::string_view name;
  T value;
};

// Stores the value whose name is `value`.
template <typename T, size_t N>
Status SetNamed(const OptionRow& row, std::string_view value, const Named<T> (&names)[N],
                T* field) {
  for (const Named<T>& n : names) {
    if (n.name == value) {
      *field = n.value;
      return Status::Ok();
    }
  }
  return Bad(row, value);
}

constexpr Named<CompressionMode> kCompressionNames[] = {{"off", CompressionMode::kOff},
                                                        {"zstd", CompressionMode::kZstd},
                                                        {"auto", CompressionMode::kAuto}};
constexpr Named<DirectIoMode> kDirectIoNames[] = {
    {"auto", DirectIoMode::kAuto}, {"on", DirectIoMode::kOn}, {"off", DirectIoMode::kOff}};
constexpr Named<Durability> kDurabilityNames[] = {{"none", Durability::kNone},
                                                  {"fdatasync", Durability::kFdatasync}};
constexpr Named<bool> kFlagNames[] = {{"0", false}, {"1", true}};

// dir and dirs set the same list: whichever comes second is refused.
Status ClaimDirs(const OptionRow& row, Parsed* out) {
  if (out->have_dir) {
    return Status(TIER_INVALID_ARGUMENT, "disk: option '" + std::string(row.key) +
                                             "': give one of dir and dirs, not both");
  }
  out->have_dir = true;
  return Status::Ok();
}

// One path of dir or dirs: non-empty, shorter than 4000 bytes, no NUL.
Status CheckPath(const OptionRow& row, std::string_view path) {
  if (path.size() > 4000 || path.find('\0') != std::string_view::npos) {
    return Bad(row, path.substr(0, 64));
  }
  return Status::Ok();
}

// The path without repeated or trailing slashes: two spellings of one path are one directory (a
// duplicate is refused here; other aliases, such as a symlinked parent, at open by device/inode).
std::string NormalizedPath(std::string_view path) {
  std::string out;
  for (char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/') continue;
    out.push_back(c);
  }
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

Status ParseDir(const OptionRow& row, std::string_view value, Parsed* out) {
  TIER_RETURN_IF_ERROR(ClaimDirs(row, out));
  if (value.empty()) {
    return Status(TIER_INVALID_ARGUMENT,
                  "disk: option 'dir' is empty: the cold tier is off (give a directory on a "
                  "local Linux filesystem to enable it)");
  }
  TIER_RETURN_IF_ERROR(CheckPath(row, value));
  out->options.dirs = {std::string(value)};
  return Status::Ok();
}

// "A,B,C": one directory per device, in the order given; no empty element, no path twice.
Status ParseDirs(const OptionRow& row, std::string_view value, Parsed* out) {
  TIER_RETURN_IF_ERROR(ClaimDirs(row, out));
  if (value.empty()) {
    return Status(TIER_INVALID_ARGUMENT,
                  "disk: option 'dirs' is empty: the cold tier is off (give comma-separated "
                  "directories, one per device)");
  }
  std::vector<std::string> dirs;
  std::set<std::string, std::less<>> seen;
  size_t at = 0;
  while (at <= value.size()) {
    const size_t comma = std::min(value.find(',', at), value.size());
    const std::string_view path = value.substr(at, comma - at);
    const std::string position = "directory " + std::to_string(dirs.size() + 1);
    if (path.empty()) {
      return Status(TIER_INVALID_ARGUMENT, "disk: option 'dirs': " + position +
                                               " is empty (a stray comma in '" +
                                               std::string(value.substr(0, 256)) + "'?)");
    }
    TIER_RETURN_IF_ERROR(CheckPath(row, path));
    if (!seen.insert(NormalizedPath(path)).second) {
      return Status(TIER_INVALID_ARGUMENT, "disk: option 'dirs': '" + std::string(path) +
                                               "' is given twice (one directory per device)");
    }
    if (dirs.size() == kMaxDirs) {
      return Status(TIER_INVALID_ARGUMENT,
                    "disk: option 'dirs': more than " + std::to_string(kMaxDirs) + " directories");
    }
    dirs.emplace_back(path);
    at = comma + 1;
  }
  out->options.dirs = std::move(dirs);
  return Status::Ok();
}

// capacity_bytes and capacity_gib set the same budget: whichever comes second is refused.
Status ClaimCapacity(const OptionRow& row, Parsed* out) {
  if (out->have_capacity) {
    return Status(TIER_INVALID_ARGUMENT,
                  "disk: option '" + std::string(row.key) +
                      "': give one of capacity_bytes and capacity_gib, not both");
  }
  out->have_capacity = true;
  return Status::Ok();
}

Status ParseCapacityBytes(const OptionRow& row, std::string_view value, Parsed* out) {
  TIER_RETURN_IF_ERROR(ClaimCapacity(row, out));
  if (!ParseByteCount(value, &out->options.capacity_bytes)) return Bad(row, value);
  return Status::Ok();
}

Status ParseCapacityGib(const OptionRow& row, std::string_view value, Parsed* out) {
  TIER_RETURN_IF_ERROR(ClaimCapacity(row, out));
  double gib = 0;
  if (!provider::ParseDecimal(value, &gib) || !(gib > 0) || gib >= 8.0 * 1024 * 1024 * 1024) {
    return Bad(row, value);
  }
  out->options.capacity_bytes = static_cast<uint64_t>(std::llround(gib * 1073741824.0));
  if (out->options.capacity_bytes == 0) return Bad(row.key, "at least one byte", value);
  return Status::Ok();
}

// The options, in the order the README lists them.
const OptionRow kRows[] = {
    {"dir", "a directory path shorter than 4000 bytes", ParseDir},
    {"dirs", "comma-separated directory paths, each shorter than 4000 bytes", ParseDirs},
    {"capacity_bytes", "a decimal byte count in [1, 2^63)", ParseCapacityBytes},
    {"capacity_gib", "a positive decimal number of GiB (e.g. 64 or 0.5)", ParseCapacityGib},
    {"compression", "one of off, zstd, auto",
     [](const OptionRow& row, std::string_view v, Parsed* out) {
       return SetNamed(row, v, kCompressionNames, &out->options.compression);
     }},
    {"zstd_level", "an integer in [-7, 19]",
     [](const OptionRow& row, std::string_view v, Parsed* out) {
       return SetInt(row, v, &out->options.zstd_level);
     },
     -7, 19},
    {"direct_io", "one of auto, on, off",
     [](const OptionRow& row, std::string_view v, Parsed* out) {
       return SetNamed(row, v, kDirectIoNames, &out->options.direct_io);
     }},
    {"queue_depth", "an integer in [1, 1024]",
     [](const OptionRow& row, std::string_view v, Parsed* out) {
       return SetInt(row, v, &out->options.queue_depth);
     },
     1, 1024},
    {"io_threads", "an integer in [1, 64]",
     [](const OptionRow& row, std::string_view v, Parsed* out) {
       return SetInt(row, v, &out->options.io_threads);
     },
     1, 64},
    {"codec_threads", "an integer in [1, 64]",
     [](const OptionRow& row, std::string_view v, Parsed* out) {
       return SetInt(row, v, &out->options.codec_threads);
     },
     1, 64},
    {"durability", "one of none, fdatasync",
     [](const OptionRow& row, std::string_view v, Parsed* out) {
       return SetNamed(row, v, kDurabilityNames, &out->options.durability);
     }},
    {"staging_mib", "an integer in [1, 65536]",
     [](const OptionRow& row, std::string_view v, Parsed* out) {
       return SetInt(row, v, &out->options.staging_bytes, 20);
     },
     1, 65536},
    {"allow_foreign_fs", "0 or 1",
     [](const OptionRow& row, std::string_view v, Parsed* out) {
       return SetNamed(row, v, kFlagNames, &out->options.allow_foreign_fs);
     }},
    {"chunk_kib", "a multiple of 4 in [64, 65536]",
     [](const OptionRow& row, std::string_view v, Parsed* out) {
       return SetInt(row, v, &out->options.chunk_bytes, 10);
     },
     64, 65536, 4},
};

const OptionRow* FindRow(std::string_view key) {
  for (const OptionRow& row : kRows) {
    if (row.key == key) return &row;
  }
  return nullptr;
}

Status UnknownOption(std::string_view key) {
  std::string known;
  for (const OptionRow& row : kRows) known += (known.empty() ? "" : ", ") + std::string(row.key);
  return Status(TIER_INVALID_ARGUMENT, "disk: unknown option '" + std::string(key).substr(0, 64) +
                                           "' (known: " + known + ")");
}

// What no single row can check: the required keys, and staging against the chunk size.
Status CheckAcrossOptions(const Parsed& parsed) {
  if (!parsed.have_dir) {
    return Status(TIER_INVALID_ARGUMENT,
                  "disk: option 'dir' (or 'dirs') is required (the cold-tier directory)");
  }
  if (!parsed.have_capacity) {
    return Status(TIER_INVALID_ARGUMENT,
                  "disk: option 'capacity_bytes' or 'capacity_gib' is required (the byte budget)");
  }
  const DiskOptions& o = parsed.options;
  if (o.staging_bytes < 2ull * o.chunk_bytes) {
    return Status(TIER_INVALID_ARGUMENT,
                  "disk: option 'staging_mib': must hold at least two chunks of chunk_kib=" +
                      std::to_string(o.chunk_bytes >> 10) + " (" +
                      std::to_string(o.staging_bytes >> 20) + " MiB given)");
  }
  return Status::Ok();
}

}  // namespace

const char* CompressionName(CompressionMode mode) {
  for (const auto& n : kCompressionNames) {
    if (n.value == mode) return n.name.data();
  }
  return "?";
}

const char* DirectIoName(DirectIoMode mode) {
  for (const auto& n : kDirectIoNames) {
    if (n.value == mode) return n.name.data();
  }
  return "?";
}

const char* DurabilityName(Durability durability) {
  for (const auto& n : kDurabilityNames) {
    if (n.value == durability) return n.name.data();
  }
  return "?";
}

Result<DiskOptions> ParseOptions(std::span<const tier_option> options) {
  Parsed parsed;
  std::set<std::string, std::less<>> seen;
  for (const tier_option& option : options) {
    if (option.key == nullptr || option.value == nullptr) {
      return Status(TIER_INVALID_ARGUMENT, "disk: option with a NULL key or value");
    }
    const std::string_view key = option.key;
    if (!seen.insert(std::string(key)).second) {
      return Status(TIER_INVALID_ARGUMENT, "disk: option '" + std::string(key) + "' given twice");
    }
    const OptionRow* row = FindRow(key);
    if (row == nullptr) return UnknownOption(key);
    TIER_RETURN_IF_ERROR(row->parse(*row, option.value, &parsed));
  }
  TIER_RETURN_IF_ERROR(CheckAcrossOptions(parsed));
  parsed.options.dir = parsed.options.dirs.front();
  return parsed.options;
}

}  // namespace tier::disk
