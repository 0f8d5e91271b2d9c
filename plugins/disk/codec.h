// codec.h -- checksums and compression for one chunk at a time, and the per-segment codec choice.
// Per-thread zstd contexts and shuffle scratch are created lazily and live as long as the thread.
#pragma once

#include <cstdint>
#include <span>

#include "format.h"

namespace tier::disk {

// XXH3-64 of `bytes` (chunk checksum). Any thread.
uint64_t Checksum(std::span<const uint8_t> bytes);

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

struct CodecChoice {
  uint32_t codec = kCodecRaw;
  double sample_ratio = 1.0;  // sampled bytes / compressed bytes, for the best zstd codec
  double decompress_bps = 0;  // that codec's samples decompressed (and unshuffled), one thread
  const char* reason = "";    // why raw, or "" when compressed
};

// A segment's codec, from up to three 64 KiB samples (start, middle, end): each is compressed with
// zstd alone and over its 2- and 4-byte planes, and the smallest wins. With `require_gain`, raw
// unless it saves at least 10%; with `min_decompress_bps` > 0, raw unless the winner's samples
// decompress at least that fast on one thread (so that restoring it is not slower than reading it
// raw). Segments under 4 KiB are raw (nothing to save). Any thread; ~1-2 ms per segment.
CodecChoice ChooseCodec(std::span<const uint8_t> segment, int level, bool require_gain,
                        double min_decompress_bps);

// Measures single-thread zstd decompression speed on a synthetic 256 KiB block (bytes per
// second), to seed the restore estimate at open. About a millisecond. Any thread.
double ProbeDecompressBytesPerSecond(int level);

}  // namespace tier::disk
