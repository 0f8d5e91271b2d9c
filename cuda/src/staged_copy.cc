#include "staged_copy.h"

#include <algorithm>
#include <cstring>

#include "tier/check.h"

namespace tier::device::detail {

std::uint32_t PagesPerStage(const PageCopyJob& job, std::uint64_t staging_bytes) {
  const std::uint64_t layer_page_bytes = job.layer_page_bytes();
  if (layer_page_bytes == 0) return 0;
  return static_cast<std::uint32_t>(
      std::min<std::uint64_t>(kMaxPagesPerLaunch, staging_bytes / layer_page_bytes));
}

void MakeStage(const PageCopyJob& job, std::uint32_t first, std::uint32_t count,
               unsigned char* staging, PageCopyParams* params,
               PlaneRun (&runs)[kMaxPlanesPerLayer]) {
  TIER_CHECK_MSG(count >= 1 && count <= kMaxPagesPerLaunch, "stage of %u pages", count);
  TIER_CHECK_MSG(static_cast<std::uint64_t>(first) + count <= job.page_ids.size(),
                 "stage [%u, %u + %u) of a %zu-page table", first, first, count,
                 job.page_ids.size());
  TIER_CHECK(job.plane_count >= 1 && job.plane_count <= kMaxPlanesPerLayer);
  std::memset(params, 0, sizeof(*params));
  params->staging = staging;
  params->plane_count = job.plane_count;
  params->page_count = count;
  const std::uint64_t table_pages = job.page_ids.size();
  std::uint64_t prefix = 0;  // bytes per page of the planes before q
  for (std::uint32_t q = 0; q < job.plane_count; ++q) {
    const std::uint64_t bpp = job.bytes_per_page[q];
    params->plane_base[q] = reinterpret_cast<unsigned char*>(job.plane_base[q]);
    params->bytes_per_page[q] = bpp;
    params->staging_offset[q] = prefix * count;
    runs[q].segment_offset = prefix * table_pages + static_cast<std::uint64_t>(first) * bpp;
    runs[q].staging_offset = prefix * count;
    runs[q].bytes = bpp * count;
    prefix += bpp;
  }
  std::copy_n(job.page_ids.begin() + first, count, params->page_ids);
}

void GatherStageOnHost(const PageCopyParams& params) {
  for (std::uint32_t q = 0; q < params.plane_count; ++q) {
    for (std::uint32_t i = 0; i < params.page_count; ++i) {
      std::memcpy(StagingPage(params, q, i), PoolPage(params, q, i), params.bytes_per_page[q]);
    }
  }
}

void ScatterStageOnHost(const PageCopyParams& params) {
  for (std::uint32_t q = 0; q < params.plane_count; ++q) {
    for (std::uint32_t i = 0; i < params.page_count; ++i) {
      std::memcpy(PoolPage(params, q, i), StagingPage(params, q, i), params.bytes_per_page[q]);
    }
  }
}

}  // namespace tier::device::detail
