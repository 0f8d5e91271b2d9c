#include "codec.h"

#include <zstd.h>

#include <memory>

namespace tier::rados {
namespace {

struct CCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

}  // namespace

uint64_t CompressBound(uint64_t bytes) {
  return ZSTD_compressBound(bytes);
}

uint64_t Compress(std::span<const uint8_t> src, std::span<uint8_t> dst, int level) {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxFree> cctx(ZSTD_createCCtx());
  if (!cctx) return 0;
  const size_t n =
      ZSTD_compressCCtx(cctx.get(), dst.data(), dst.size(), src.data(), src.size(), level);
  if (ZSTD_isError(n) || n >= src.size()) return 0;
  return n;
}

bool Decompress(std::span<const uint8_t> frame, std::span<uint8_t> dst) {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx(ZSTD_createDCtx());
  if (!dctx) return false;
  const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
  if (size != dst.size()) return false;
  const size_t n =
      ZSTD_decompressDCtx(dctx.get(), dst.data(), dst.size(), frame.data(), frame.size());
  return !ZSTD_isError(n) && n == dst.size();
}

}  // namespace tier::rados
