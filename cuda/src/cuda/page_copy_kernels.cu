// Gather/scatter of whole pages between the pool and the staging buffer. One block per (page,
// plane); 16-byte loads and stores when source, destination and size allow, bytes otherwise.
#include <cstdint>

#include "kernels.h"

namespace tier::device::detail {
namespace {

constexpr unsigned kThreadsPerBlock = 256;

__device__ __forceinline__ void CopyBytes(unsigned char* dst, const unsigned char* src,
                                          std::uint64_t bytes) {
  const std::uintptr_t misaligned = reinterpret_cast<std::uintptr_t>(dst) |
                                    reinterpret_cast<std::uintptr_t>(src) |
                                    static_cast<std::uintptr_t>(bytes);
  if ((misaligned & 15u) == 0) {
    const uint4* s = reinterpret_cast<const uint4*>(src);
    uint4* d = reinterpret_cast<uint4*>(dst);
    const std::uint64_t words = bytes / 16;
    for (std::uint64_t k = threadIdx.x; k < words; k += blockDim.x) d[k] = s[k];
  } else {
    for (std::uint64_t k = threadIdx.x; k < bytes; k += blockDim.x) dst[k] = src[k];
  }
}

template <bool kToStaging>
__global__ void __launch_bounds__(kThreadsPerBlock)
    PageStageKernel(const __grid_constant__ PageCopyParams params) {
  const std::uint32_t i = blockIdx.x;  // staging slot
  const std::uint32_t q = blockIdx.y;  // plane
  if (i >= params.page_count || q >= params.plane_count) return;
  unsigned char* pool = PoolPage(params, q, i);
  unsigned char* stage = StagingPage(params, q, i);
  if constexpr (kToStaging) {
    CopyBytes(stage, pool, params.bytes_per_page[q]);
  } else {
    CopyBytes(pool, stage, params.bytes_per_page[q]);
  }
}

template <bool kToStaging>
cudaError_t Launch(const PageCopyParams& params, cudaStream_t stream) {
  if (params.page_count == 0 || params.page_count > kMaxPagesPerLaunch || params.plane_count == 0 ||
      params.plane_count > kMaxPlanesPerLayer) {
    return cudaErrorInvalidValue;
  }
  (void)cudaGetLastError();  // a stale error (e.g. cudaErrorNotReady of a poll) is not ours
  const dim3 grid(params.page_count, params.plane_count);
  PageStageKernel<kToStaging><<<grid, kThreadsPerBlock, 0, stream>>>(params);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchGatherStage(const PageCopyParams& params, cudaStream_t stream) {
  return Launch<true>(params, stream);
}

cudaError_t LaunchScatterStage(const PageCopyParams& params, cudaStream_t stream) {
  return Launch<false>(params, stream);
}

cudaError_t CheckPageCopyKernelImages() {
  cudaFuncAttributes attributes;
  cudaError_t error = cudaFuncGetAttributes(&attributes, PageStageKernel<true>);
  if (error != cudaSuccess) return error;
  return cudaFuncGetAttributes(&attributes, PageStageKernel<false>);
}

}  // namespace tier::device::detail
