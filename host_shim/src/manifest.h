// manifest.h -- what a checkpoint's TIER_SEGMENT_MANIFEST holds: its full identity and what the
// catalog needs to re-adopt it after a restart without reading its data. JSON, versioned.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <tier/status.h>
#include "tier_provider.h"

namespace tier {

struct Manifest {
  uint32_t version = 1;
  std::string namespace_id;
  uint64_t tokens = 0;
  std::vector<uint64_t> blocks;
  bool shared_prefix = false;
  bool has_parent = false;
  tier_key parent_key{};
  uint64_t logical_bytes = 0;
  uint64_t bytes_scale = 1;
};

std::vector<std::byte> EncodeManifest(const Manifest& manifest);
// INVALID_ARGUMENT (with what is wrong) for anything that is not a version-1 manifest.
Result<Manifest> DecodeManifest(std::span<const std::byte> bytes);

}  // namespace tier
