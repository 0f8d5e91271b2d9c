// page_copy_params.h (internal) -- one launch of the gather/scatter kernel: up to
// kMaxPagesPerLaunch pages of one layer moved between the pool and a staging buffer that holds
// them plane-major. Shared by the CUDA kernels and the CPU engine's staged mode, so the address
// arithmetic the GPU runs is the one the CPU tests exercise. C++17, no std::span: nvcc reads it.
#pragma once

#include <cstdint>

#include "tier/device/limits.h"

#if defined(__CUDACC__)
#define TIER_HOST_DEVICE __host__ __device__
#else
#define TIER_HOST_DEVICE
#endif

namespace tier::device::detail {

// Chosen so that PageCopyParams stays under the classic 4 KiB kernel-parameter limit.
inline constexpr std::uint32_t kMaxPagesPerLaunch = 896;

struct PageCopyParams {
  unsigned char* plane_base[kMaxPlanesPerLayer];     // pool plane arrays (device memory)
  std::uint64_t bytes_per_page[kMaxPlanesPerLayer];  // per plane
  std::uint64_t staging_offset[kMaxPlanesPerLayer];  // plane q's run in the staging buffer
  unsigned char* staging;                            // device memory (host on the CPU)
  std::uint32_t plane_count;
  std::uint32_t page_count;                    // pages in this launch
  std::uint32_t page_ids[kMaxPagesPerLaunch];  // pool page of staging slot i
};
static_assert(sizeof(PageCopyParams) <= 4000, "kernel parameters must stay under 4 KiB");

// Pool address of plane q of the page in staging slot i.
TIER_HOST_DEVICE inline unsigned char* PoolPage(const PageCopyParams& p, std::uint32_t q,
                                                std::uint32_t i) {
  return p.plane_base[q] + static_cast<std::uint64_t>(p.page_ids[i]) * p.bytes_per_page[q];
}

// Staging address of plane q of staging slot i (plane-major within the launch).
TIER_HOST_DEVICE inline unsigned char* StagingPage(const PageCopyParams& p, std::uint32_t q,
                                                   std::uint32_t i) {
  return p.staging + p.staging_offset[q] + static_cast<std::uint64_t>(i) * p.bytes_per_page[q];
}

}  // namespace tier::device::detail
