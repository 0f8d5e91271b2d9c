// byte_shuffle.h -- byte-plane shuffle for BF16/FP16 (2-byte) and FP32 (4-byte) data, and its
// inverse, on the CPU. The CUDA engine offers the same transform on device memory
// (TransferEngine::byte_shuffle) with identical bytes.
//
// For n = bytes / element_bytes elements:   dst[b * n + i] = src[i * element_bytes + b]
// for every byte b < element_bytes and element i < n; the last bytes % element_bytes bytes are
// copied unchanged to the end. Grouping the exponent bytes of many values together lets zstd find
// their repetition (measured in the README, "Byte-plane shuffle": it pays for BF16 and FP32, not
// for INT8).
//
// Pure functions on caller-owned memory: any thread, no allocation. src and dst must not overlap.
#ifndef TIER_DEVICE_BYTE_SHUFFLE_H
#define TIER_DEVICE_BYTE_SHUFFLE_H

#include <cstddef>
#include <cstdint>
#include <span>

#include "tier/device/status.h"

namespace tier::device {

// Ok for element_bytes 2 and 4 with src.size() == dst.size() and no overlap; else the reason.
Status check_byte_shuffle_args(const void* src, const void* dst, std::uint64_t bytes,
                               std::uint32_t element_bytes);

// Writes the byte planes of `src` into `dst` (same size). Any thread.
Status byte_shuffle(std::span<const std::byte> src, std::span<std::byte> dst,
                    std::uint32_t element_bytes);

// Inverse of byte_shuffle: byte_unshuffle(byte_shuffle(x)) == x. Any thread.
Status byte_unshuffle(std::span<const std::byte> src, std::span<std::byte> dst,
                      std::uint32_t element_bytes);

}  // namespace tier::device

#endif  // TIER_DEVICE_BYTE_SHUFFLE_H
