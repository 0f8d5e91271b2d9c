#include "codec.h"

#include <xxhash.h>
#if TIER_HAVE_XXH3_DISPATCH
#include <xxh_x86dispatch.h>  // XXH3_* become xxHash's AVX2/AVX-512 dispatcher: see CMakeLists.txt
#endif
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "tier/shuffle/byte_shuffle.h"

namespace tier::disk {
namespace {

struct Contexts {
  ZSTD_CCtx* cctx = nullptr;
  ZSTD_DCtx* dctx = nullptr;
  std::vector<uint8_t> scratch;  // byte planes of one chunk (shuffle codecs)
  ~Contexts() {
    ZSTD_freeCCtx(cctx);
    ZSTD_freeDCtx(dctx);
  }
};

Contexts& ThreadContexts() {
  thread_local Contexts contexts;
  return contexts;
}

std::span<uint8_t> Scratch(uint64_t bytes) {
  std::vector<uint8_t>& scratch = ThreadContexts().scratch;
  if (scratch.size() < bytes) scratch.resize(bytes);
  return std::span(scratch).first(bytes);
}

// One zstd frame of `planes` (byte planes one after the other), flushed at every plane
// boundary: each zstd block then holds one plane and gets its own literal statistics (the
// exponent plane of BF16 compresses only when its blocks do not mix it with the mantissas).
// Returns the frame length, or 0 when it does not fit in dst.
uint64_t CompressPlanes(std::span<const uint8_t> planes, uint32_t element_bytes,
                        std::span<uint8_t> dst, int level) {
  Contexts& c = ThreadContexts();
  if (c.cctx == nullptr) c.cctx = ZSTD_createCCtx();
  if (c.cctx == nullptr || dst.empty()) return 0;
  if (ZSTD_isError(ZSTD_CCtx_reset(c.cctx, ZSTD_reset_session_and_parameters)) ||
      ZSTD_isError(ZSTD_CCtx_setParameter(c.cctx, ZSTD_c_compressionLevel, level)) ||
      ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(c.cctx, planes.size()))) {
    return 0;
  }
  const uint64_t plane_bytes = planes.size() / element_bytes;
  ZSTD_outBuffer out{dst.data(), dst.size(), 0};
  for (uint32_t b = 0; b < element_bytes; ++b) {
    const uint64_t begin_bytes = uint64_t{b} * plane_bytes;
    const uint64_t end_bytes =
        b + 1 == element_bytes ? planes.size() : begin_bytes + plane_bytes;  // the tail: last plane
    ZSTD_inBuffer in{planes.data() + begin_bytes, end_bytes - begin_bytes, 0};
    const ZSTD_EndDirective mode = b + 1 == element_bytes ? ZSTD_e_end : ZSTD_e_flush;
    for (;;) {
      const size_t left = ZSTD_compressStream2(c.cctx, &out, &in, mode);
      if (ZSTD_isError(left)) return 0;
      if (left == 0 && in.pos == in.size) break;
      if (out.pos == out.size) return 0;  // does not fit
    }
  }
  return out.pos;
}

}  // namespace

uint64_t Checksum(std::span<const uint8_t> bytes, uint64_t seed) {
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), seed);
}

uint64_t CompressChunk(std::span<const uint8_t> src, std::span<uint8_t> dst, int level) {
  Contexts& c = ThreadContexts();
  if (c.cctx == nullptr) c.cctx = ZSTD_createCCtx();
  if (c.cctx == nullptr || dst.empty()) return 0;
  const size_t n = ZSTD_compressCCtx(c.cctx, dst.data(), dst.size(), src.data(), src.size(), level);
  return ZSTD_isError(n) ? 0 : n;
}

bool DecompressChunk(std::span<const uint8_t> frame, std::span<uint8_t> dst) {
  Contexts& c = ThreadContexts();
  if (c.dctx == nullptr) c.dctx = ZSTD_createDCtx();
  if (c.dctx == nullptr) return false;
  const size_t n = ZSTD_decompressDCtx(c.dctx, dst.data(), dst.size(), frame.data(), frame.size());
  return !ZSTD_isError(n) && n == dst.size();
}

uint64_t CompressChunkAs(uint32_t codec, std::span<const uint8_t> src, std::span<uint8_t> dst,
                         int level) {
  const uint32_t element_bytes = ShuffleElementBytes(codec);
  if (element_bytes == 0) return CompressChunk(src, dst, level);
  std::span<uint8_t> planes = Scratch(src.size());
  if (!shuffle::ByteShuffle(std::as_bytes(src), std::as_writable_bytes(planes), element_bytes)
           .ok()) {
    return 0;
  }
  return CompressPlanes(planes, element_bytes, dst, level);
}

bool DecompressChunkAs(uint32_t codec, std::span<const uint8_t> frame, std::span<uint8_t> dst) {
  const uint32_t element_bytes = ShuffleElementBytes(codec);
  if (element_bytes == 0) return DecompressChunk(frame, dst);
  std::span<uint8_t> planes = Scratch(dst.size());
  return DecompressChunk(frame, planes) &&
         shuffle::ByteUnshuffle(std::as_bytes(planes), std::as_writable_bytes(dst), element_bytes)
             .ok();
}

double ProbeDecompressBytesPerSecond(int level) {
  // Half-compressible data: small integers in FP32-like words.
  std::vector<uint8_t> src(256 << 10);
  std::mt19937 rng(12345);
  for (size_t i = 0; i < src.size(); ++i) src[i] = (i % 4 < 2) ? static_cast<uint8_t>(rng()) : 0x3f;
  std::vector<uint8_t> frame(ZSTD_compressBound(src.size()));
  const uint64_t n = CompressChunk(src, frame, level);
  if (n == 0) return 1e9;
  std::vector<uint8_t> dst(src.size());
  const auto t0 = std::chrono::steady_clock::now();
  bool ok = true;
  for (int i = 0; i < 4; ++i) ok = ok && DecompressChunk(std::span(frame).first(n), dst);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!ok || s <= 0) return 1e9;
  return std::clamp(4.0 * src.size() / s, 1e8, 2e10);
}

}  // namespace tier::disk
