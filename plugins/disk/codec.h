// codec.h -- checksums and compression for one chunk at a time (the per-segment choice of codec is
// compression_policy.h).
// Per-thread zstd contexts and shuffle scratch are created lazily and live as long as the thread.
#pragma once

#include <cstdint>
#include <span>

#include "format.h"

namespace tier::disk {

// XXH3-64 of `bytes` with `seed` (a chunk's checksum is seeded with format.h's ChunkSeed). Any
// thread.
uint64_t Checksum(std::span<const uint8_t> bytes, uint64_t seed = 0);

// Compresses `src` into `dst` as one zstd frame; returns the frame length, or 0 when it does not
// fit in dst (the caller then stores the chunk raw). Any thread.
uint64_t CompressChunk(std::span<const uint8_t> src, std::span<uint8_t> dst, int level);

// Decompresses one frame into exactly dst.size() bytes; false if the frame is malformed or its
// length differs. Never writes outside dst. Any thread.
bool DecompressChunk(std::span<const uint8_t> frame, std::span<uint8_t> dst);

// The same for any zstd codec of format.h: a shuffle codec compresses the byte planes of `src`
// (byte_shuffle into per-thread scratch) and unshuffles after decompressing. Any thread.
uint64_t CompressChunkAs(uint32_t codec, std::span<const uint8_t> src, std::span<uint8_t> dst,
                         int level);
bool DecompressChunkAs(uint32_t codec, std::span<const uint8_t> frame, std::span<uint8_t> dst);

// Measures single-thread zstd decompression speed on a synthetic 256 KiB block (bytes per
// second), to seed the restore estimate at open. About a millisecond. Any thread.
double ProbeDecompressBytesPerSecond(int level);

}  // namespace tier::disk
