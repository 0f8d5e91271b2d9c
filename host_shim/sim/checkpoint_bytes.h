// checkpoint_bytes.h -- deterministic segment contents derived from a checkpoint's key, so every
// copy between tiers and through a provider can be verified byte for byte without keeping a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include <tier/host/identity.h>

#include "tier_provider.h"

namespace tier::sim {

// Fills `out` with the bytes of segment (kind, index) of checkpoint `key`. Pure; any thread.
void FillSegmentBytes(const tier_key& key, tier_segment_kind kind, uint32_t index,
                      std::span<std::byte> out);
// True when `data` holds exactly what FillSegmentBytes would write.
bool SegmentBytesMatch(const tier_key& key, tier_segment_kind kind, uint32_t index,
                       std::span<const std::byte> data);

}  // namespace tier::sim
