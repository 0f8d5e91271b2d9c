// codec.h -- per-chunk checksums and zstd. The checksum of a chunk is XXH3-64 over the first 88
// bytes of its chunk header (the binding: key, spill id, segment, chunk index, offset, lengths,
// codec) followed by its logical bytes, so a chunk verifies only in its own place of its own
// spill. Per-thread zstd contexts live as long as the thread. Any thread.
#pragma once

#include <cstdint>
#include <span>

#include "format.h"

namespace tier::rados {

// The checksum of `binding` (its checksum field ignored) over `logical`.
uint64_t ChunkChecksum(const ChunkBinding& binding, std::span<const uint8_t> logical);

// Upper bound of a compressed chunk of `bytes`.
uint64_t CompressBound(uint64_t bytes);
// One zstd frame of `src` into `dst`; its length, or 0 when it does not fit or saves nothing.
uint64_t Compress(std::span<const uint8_t> src, std::span<uint8_t> dst, int level);
// Decompresses one frame into exactly dst.size() bytes; false when malformed or of another length.
bool Decompress(std::span<const uint8_t> frame, std::span<uint8_t> dst);

}  // namespace tier::rados
