#include "tier/shuffle/byte_shuffle.h"

#include <cstring>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tier::shuffle {
namespace {

// Scalar reference loops; E is the element size in bytes. They handle elements [first, n).
template <std::uint32_t E>
void ShuffleScalar(const unsigned char* src, unsigned char* dst, std::uint64_t first,
                   std::uint64_t n) {
  for (std::uint64_t i = first; i < n; ++i) {
    for (std::uint32_t b = 0; b < E; ++b) dst[b * n + i] = src[i * E + b];
  }
}

template <std::uint32_t E>
void UnshuffleScalar(const unsigned char* src, unsigned char* dst, std::uint64_t first,
                     std::uint64_t n) {
  for (std::uint64_t i = first; i < n; ++i) {
    for (std::uint32_t b = 0; b < E; ++b) dst[i * E + b] = src[b * n + i];
  }
}

#if defined(__SSE2__)
// SSE2 (every x86-64): 16 elements per step, unaligned loads and stores; returns the elements done.
inline __m128i Load(const unsigned char* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline void Store(unsigned char* p, __m128i v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v);
}

std::uint64_t Shuffle2Sse2(const unsigned char* src, unsigned char* dst, std::uint64_t n) {
  const __m128i low = _mm_set1_epi16(0x00FF);
  std::uint64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i a = Load(src + 2 * i);
    const __m128i b = Load(src + 2 * i + 16);
    Store(dst + i, _mm_packus_epi16(_mm_and_si128(a, low), _mm_and_si128(b, low)));
    Store(dst + n + i, _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8)));
  }
  return i;
}

std::uint64_t Unshuffle2Sse2(const unsigned char* src, unsigned char* dst, std::uint64_t n) {
  std::uint64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i lo = Load(src + i);
    const __m128i hi = Load(src + n + i);
    Store(dst + 2 * i, _mm_unpacklo_epi8(lo, hi));
    Store(dst + 2 * i + 16, _mm_unpackhi_epi8(lo, hi));
  }
  return i;
}

std::uint64_t Shuffle4Sse2(const unsigned char* src, unsigned char* dst, std::uint64_t n) {
  const __m128i low = _mm_set1_epi32(0xFF);
  std::uint64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i v[4] = {Load(src + 4 * i), Load(src + 4 * i + 16), Load(src + 4 * i + 32),
                          Load(src + 4 * i + 48)};
    for (int b = 0; b < 4; ++b) {
      __m128i x[4];
      for (int k = 0; k < 4; ++k) {
        // Byte b of each 32-bit lane, as a 32-bit value <= 255 (two 16-bit lanes: value, 0).
        x[k] = _mm_and_si128(_mm_srli_epi32(v[k], 8 * b), low);
      }
      const __m128i p01 = _mm_packus_epi16(x[0], x[1]);  // 16-bit lanes holding bytes of e0..e7
      const __m128i p23 = _mm_packus_epi16(x[2], x[3]);  // e8..e15
      Store(dst + static_cast<std::uint64_t>(b) * n + i, _mm_packus_epi16(p01, p23));
    }
  }
  return i;
}

std::uint64_t Unshuffle4Sse2(const unsigned char* src, unsigned char* dst, std::uint64_t n) {
  std::uint64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i p0 = Load(src + i);
    const __m128i p1 = Load(src + n + i);
    const __m128i p2 = Load(src + 2 * n + i);
    const __m128i p3 = Load(src + 3 * n + i);
    const __m128i t01lo = _mm_unpacklo_epi8(p0, p1);  // e0..e7 as (b0, b1)
    const __m128i t01hi = _mm_unpackhi_epi8(p0, p1);  // e8..e15
    const __m128i t23lo = _mm_unpacklo_epi8(p2, p3);
    const __m128i t23hi = _mm_unpackhi_epi8(p2, p3);
    Store(dst + 4 * i, _mm_unpacklo_epi16(t01lo, t23lo));
    Store(dst + 4 * i + 16, _mm_unpackhi_epi16(t01lo, t23lo));
    Store(dst + 4 * i + 32, _mm_unpacklo_epi16(t01hi, t23hi));
    Store(dst + 4 * i + 48, _mm_unpackhi_epi16(t01hi, t23hi));
  }
  return i;
}
#else
std::uint64_t Shuffle2Sse2(const unsigned char*, unsigned char*, std::uint64_t) {
  return 0;
}
std::uint64_t Unshuffle2Sse2(const unsigned char*, unsigned char*, std::uint64_t) {
  return 0;
}
std::uint64_t Shuffle4Sse2(const unsigned char*, unsigned char*, std::uint64_t) {
  return 0;
}
std::uint64_t Unshuffle4Sse2(const unsigned char*, unsigned char*, std::uint64_t) {
  return 0;
}
#endif

Status Run(std::span<const std::byte> src, std::span<std::byte> dst, std::uint32_t element_bytes,
           bool inverse) {
  if (src.size() != dst.size()) {
    return Status::InvalidArgument("byte shuffle: src has " + std::to_string(src.size()) +
                                   " bytes but dst " + std::to_string(dst.size()));
  }
  TIER_RETURN_IF_ERROR(CheckByteShuffleArgs(src.data(), dst.data(), src.size(), element_bytes));
  if (src.empty()) return Status::Ok();
  const auto* s = reinterpret_cast<const unsigned char*>(src.data());
  auto* d = reinterpret_cast<unsigned char*>(dst.data());
  const std::uint64_t n = src.size() / element_bytes;
  const std::uint64_t tail = src.size() % element_bytes;
  if (element_bytes == 2) {
    if (inverse) {
      UnshuffleScalar<2>(s, d, Unshuffle2Sse2(s, d, n), n);
    } else {
      ShuffleScalar<2>(s, d, Shuffle2Sse2(s, d, n), n);
    }
  } else {
    if (inverse) {
      UnshuffleScalar<4>(s, d, Unshuffle4Sse2(s, d, n), n);
    } else {
      ShuffleScalar<4>(s, d, Shuffle4Sse2(s, d, n), n);
    }
  }
  if (tail != 0) std::memcpy(d + n * element_bytes, s + n * element_bytes, tail);
  return Status::Ok();
}

}  // namespace

Status CheckByteShuffleArgs(const void* src, const void* dst, std::uint64_t bytes,
                            std::uint32_t element_bytes) {
  if (element_bytes != 2 && element_bytes != 4) {
    return Status::InvalidArgument("byte shuffle: element_bytes " + std::to_string(element_bytes) +
                                   " is not 2 or 4");
  }
  if (bytes == 0) return Status::Ok();
  if (src == nullptr || dst == nullptr) return Status::InvalidArgument("byte shuffle: null buffer");
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  if (s < d + bytes && d < s + bytes) {
    return Status::InvalidArgument("byte shuffle: src and dst overlap");
  }
  return Status::Ok();
}

Status ByteShuffle(std::span<const std::byte> src, std::span<std::byte> dst,
                   std::uint32_t element_bytes) {
  return Run(src, dst, element_bytes, /*inverse=*/false);
}

Status ByteUnshuffle(std::span<const std::byte> src, std::span<std::byte> dst,
                     std::uint32_t element_bytes) {
  return Run(src, dst, element_bytes, /*inverse=*/true);
}

}  // namespace tier::shuffle
