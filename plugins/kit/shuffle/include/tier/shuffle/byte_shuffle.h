// tier/shuffle/byte_shuffle.h -- byte-plane shuffle for BF16/FP16 (2-byte) and FP32 (4-byte) data,
// and its inverse, on the CPU. A leaf library (tier::shuffle: no dependency but the header-only
// tier::abi) shared by the disk provider's shuffle codecs and the device side, whose CUDA engine
// offers the same transform on device memory (TransferEngine::byte_shuffle) with identical bytes.
//
// For n = bytes / element_bytes elements:   dst[b * n + i] = src[i * element_bytes + b]
// for every byte b < element_bytes and element i < n; the last bytes % element_bytes bytes are
// copied unchanged to the end. Grouping the exponent bytes of many values together lets zstd find
// their repetition (measured in the README, "Byte-plane shuffle": it pays for BF16 and FP32, not
// for INT8).
//
// Pure functions on caller-owned memory: any thread, no allocation. src and dst must not overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "tier/status.h"

namespace tier::shuffle {

// Ok for element_bytes 2 and 4 with src.size() == dst.size() and no overlap; else the reason.
Status CheckByteShuffleArgs(const void* src, const void* dst, std::uint64_t bytes,
                            std::uint32_t element_bytes);

// Writes the byte planes of `src` into `dst` (same size). Any thread.
Status ByteShuffle(std::span<const std::byte> src, std::span<std::byte> dst,
                   std::uint32_t element_bytes);

// Inverse of ByteShuffle: ByteUnshuffle(ByteShuffle(x)) == x. Any thread.
Status ByteUnshuffle(std::span<const std::byte> src, std::span<std::byte> dst,
                     std::uint32_t element_bytes);

}  // namespace tier::shuffle
