#include "codec.h"

#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

namespace tier::disk {
namespace {

struct Contexts {
  ZSTD_CCtx* cctx = nullptr;
  ZSTD_DCtx* dctx = nullptr;
  ~Contexts() {
    ZSTD_freeCCtx(cctx);
    ZSTD_freeDCtx(dctx);
  }
};

Contexts& ThreadContexts() {
  thread_local Contexts contexts;
  return contexts;
}

constexpr uint64_t kSampleBytes = 64 << 10;

}  // namespace

uint64_t Checksum(std::span<const uint8_t> bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
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

bool CompressionPays(std::span<const uint8_t> segment, int level) {
  if (segment.size() < 4096) return false;  // cannot save a 4 KiB block
  std::vector<uint64_t> starts;
  if (segment.size() <= 3 * kSampleBytes) {
    starts.push_back(0);
  } else {
    starts = {0, segment.size() / 2 - kSampleBytes / 2, segment.size() - kSampleBytes};
  }
  std::vector<uint8_t> out(ZSTD_compressBound(kSampleBytes * 3));
  uint64_t sampled = 0, compressed = 0;
  for (uint64_t start : starts) {
    const uint64_t len = std::min<uint64_t>(
        segment.size() <= 3 * kSampleBytes ? segment.size() : kSampleBytes, segment.size() - start);
    const uint64_t n = CompressChunk(segment.subspan(start, len), out, level);
    sampled += len;
    compressed += n == 0 ? len : n;
  }
  return compressed * 10 <= sampled * 9;
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
