// options.h -- the disk provider's key=value options (see README.md for the table). Parsing is a
// pure function: no file system access, no side effects.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "errno_status.h"
#include "tier_provider.h"

namespace tier::disk {

enum class CompressionMode { kOff, kZstd, kAuto };
enum class DirectIoMode { kAuto, kOn, kOff };
enum class Durability { kNone, kFdatasync };

struct DiskOptions {
  // The cold-tier directories, one per device: `dir=PATH` gives one, `dirs=A,B,...` several (at
  // most kMaxDirs). Every checkpoint lives whole in one of them.
  std::vector<std::string> dirs;
  std::string dir;              // dirs[0], for messages that name the tier by one path
  uint64_t capacity_bytes = 0;  // required (capacity_bytes or capacity_gib)
  CompressionMode compression = CompressionMode::kAuto;
  int zstd_level = 1;  // [-7, 19]
  DirectIoMode direct_io = DirectIoMode::kAuto;
  uint32_t queue_depth = 16;   // [1, 1024] I/Os in flight
  uint32_t io_threads = 4;     // [1, 64] thread-pool fallback workers
  uint32_t codec_threads = 2;  // [1, 64] checksum/zstd workers
  Durability durability = Durability::kFdatasync;
  uint64_t staging_bytes = 64ull << 20;  // staging_mib, >= 2 chunks
  bool allow_foreign_fs = false;
  uint32_t chunk_bytes = 1u << 20;  // chunk_kib: [64, 65536] KiB, multiple of 4 KiB

  uint32_t staging_buffers() const { return static_cast<uint32_t>(staging_bytes / chunk_bytes); }
};

inline constexpr size_t kMaxDirs = 64;

// Parses `options`. Unknown keys, duplicates, malformed values and missing required keys give
// TIER_INVALID_ARGUMENT with a message naming the option. Pure; any thread.
Result<DiskOptions> ParseOptions(std::span<const tier_option> options);

const char* CompressionName(CompressionMode mode);
const char* DirectIoName(DirectIoMode mode);
const char* DurabilityName(Durability durability);

}  // namespace tier::disk
