// codec.h -- checksums and zstd for one chunk at a time, and the per-segment `auto` decision.
// Per-thread zstd contexts are created lazily and live as long as the calling thread.
#pragma once

#include <cstdint>
#include <span>

namespace tier::disk {

// XXH3-64 of `bytes` (chunk checksum). Any thread.
uint64_t Checksum(std::span<const uint8_t> bytes);

// Compresses `src` into `dst` as one zstd frame; returns the frame length, or 0 when it does not
// fit in dst (the caller then stores the chunk raw). Any thread.
uint64_t CompressChunk(std::span<const uint8_t> src, std::span<uint8_t> dst, int level);

// Decompresses one frame into exactly dst.size() bytes; false if the frame is malformed or its
// length differs. Never writes outside dst. Any thread.
bool DecompressChunk(std::span<const uint8_t> frame, std::span<uint8_t> dst);

// `auto`: compresses up to three 64 KiB samples (start, middle, end) of a segment and answers
// true when zstd saves at least 10% on them. Any thread.
bool CompressionPays(std::span<const uint8_t> segment, int level);

// Measures single-thread zstd decompression speed on a synthetic 256 KiB block (bytes per
// second), to seed the restore estimate at open. About a millisecond. Any thread.
double ProbeDecompressBytesPerSecond(int level);

}  // namespace tier::disk
