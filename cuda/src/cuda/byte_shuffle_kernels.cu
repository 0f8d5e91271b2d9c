// Byte-plane shuffle and its inverse on device memory; the same bytes as tier::shuffle's
// ByteShuffle (plugins/kit/shuffle/byte_shuffle.cc):
// dst[b * n + i] = src[i * E + b], the bytes % E tail copied unchanged to the end.
#include <algorithm>
#include <cstdint>

#include "kernels.h"

namespace tier::device::detail {

cudaError_t CheckPageCopyKernelImages();  // page_copy_kernels.cu

namespace {

constexpr unsigned kThreadsPerBlock = 256;
constexpr std::uint64_t kMaxBlocks = 65536;

template <int E, bool kInverse>
__global__ void __launch_bounds__(kThreadsPerBlock)
    ByteShuffleKernel(unsigned char* __restrict__ dst, const unsigned char* __restrict__ src,
                      std::uint64_t n, std::uint32_t tail) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
#pragma unroll
    for (int b = 0; b < E; ++b) {
      if constexpr (kInverse) {
        dst[i * E + b] = src[b * n + i];
      } else {
        dst[b * n + i] = src[i * E + b];
      }
    }
  }
  if (blockIdx.x == 0 && threadIdx.x < tail) dst[n * E + threadIdx.x] = src[n * E + threadIdx.x];
}

template <int E, bool kInverse>
cudaError_t Launch(void* dst, const void* src, std::uint64_t bytes, cudaStream_t stream) {
  const std::uint64_t n = bytes / E;
  const auto tail = static_cast<std::uint32_t>(bytes % E);
  const std::uint64_t blocks = std::min<std::uint64_t>(
      kMaxBlocks, std::max<std::uint64_t>(1, (n + kThreadsPerBlock - 1) / kThreadsPerBlock));
  ByteShuffleKernel<E, kInverse><<<static_cast<unsigned>(blocks), kThreadsPerBlock, 0, stream>>>(
      static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), n, tail);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchByteShuffle(void* dst, const void* src, std::uint64_t bytes,
                              std::uint32_t element_bytes, bool inverse, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  (void)cudaGetLastError();  // a stale error is not ours
  if (element_bytes == 2) {
    return inverse ? Launch<2, true>(dst, src, bytes, stream)
                   : Launch<2, false>(dst, src, bytes, stream);
  }
  if (element_bytes == 4) {
    return inverse ? Launch<4, true>(dst, src, bytes, stream)
                   : Launch<4, false>(dst, src, bytes, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t CheckKernelImages() {
  cudaFuncAttributes attributes;
  cudaError_t error = cudaFuncGetAttributes(&attributes, ByteShuffleKernel<2, false>);
  if (error == cudaSuccess) error = cudaFuncGetAttributes(&attributes, ByteShuffleKernel<2, true>);
  if (error == cudaSuccess) error = cudaFuncGetAttributes(&attributes, ByteShuffleKernel<4, false>);
  if (error == cudaSuccess) error = cudaFuncGetAttributes(&attributes, ByteShuffleKernel<4, true>);
  if (error == cudaSuccess) error = CheckPageCopyKernelImages();
  return error;
}

}  // namespace tier::device::detail
