// codec.h -- zstd for chunk payloads (a chunk's tag is format.h's PieceTag). Per-thread zstd
// contexts live as long as the thread. Any thread.
#pragma once

#include <cstdint>
#include <span>

#include "format.h"

namespace tier::rados {

// Upper bound of a compressed chunk of `bytes`.
uint64_t CompressBound(uint64_t bytes);
// One zstd frame of `src` into `dst`; its length, or 0 when it does not fit or saves nothing.
uint64_t Compress(std::span<const uint8_t> src, std::span<uint8_t> dst, int level);
// Decompresses one frame into exactly dst.size() bytes; false when malformed or of another length.
bool Decompress(std::span<const uint8_t> frame, std::span<uint8_t> dst);

}  // namespace tier::rados
