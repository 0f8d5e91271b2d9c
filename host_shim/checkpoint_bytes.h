// checkpoint_bytes.h -- deterministic segment contents derived from a checkpoint's key, so every
// copy between tiers and through a provider can be verified byte for byte without keeping a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "tier_provider.h"

namespace tier {

// A 32-byte key from any text (two XXH3-128 digests with different seeds). Deterministic.
tier_key KeyFromText(std::string_view text);
// Lowercase hex of the first `bytes` bytes (for logs; never an identity).
std::string KeyHex(const tier_key& key, size_t bytes = 8);

// Fills `out` with the bytes of segment (kind, index) of checkpoint `key`. Pure; any thread.
void FillSegmentBytes(const tier_key& key, tier_segment_kind kind, uint32_t index,
                      std::span<std::byte> out);
// True when `data` holds exactly what FillSegmentBytes would write.
bool SegmentBytesMatch(const tier_key& key, tier_segment_kind kind, uint32_t index,
                       std::span<const std::byte> data);

}  // namespace tier
