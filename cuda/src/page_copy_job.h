// page_copy_job.h (internal) -- one validated gather or scatter of one layer, engine-neutral.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tier/device/pool_layout.h"
#include "tier/device/transfer_engine.h"
#include "tier/status.h"

namespace tier::device::detail {

enum class CopyDirection : std::uint8_t { kGather, kScatter };

struct PageCopyJob {
  CopyDirection direction = CopyDirection::kGather;
  std::uint32_t layer = 0;
  std::uint32_t plane_count = 0;
  std::array<std::byte*, kMaxPlanesPerLayer> plane_base{};         // device memory
  std::array<std::uint64_t, kMaxPlanesPerLayer> bytes_per_page{};  // per plane
  std::vector<std::uint32_t> page_ids;                             // the page table, copied
  std::byte* segment = nullptr;  // host memory, plane-major (pool_layout.h)
  std::uint64_t segment_bytes = 0;

  std::uint64_t layer_page_bytes() const {
    std::uint64_t bytes = 0;
    for (std::uint32_t q = 0; q < plane_count; ++q) bytes += bytes_per_page[q];
    return bytes;
  }
  // Offset of plane q in the segment (page_ids.size() pages).
  std::uint64_t segment_plane_offset(std::uint32_t q) const {
    std::uint64_t prefix = 0;
    for (std::uint32_t p = 0; p < q; ++p) prefix += bytes_per_page[p];
    return prefix * page_ids.size();
  }
};

// Checks everything a gather/scatter request can get wrong and builds the job: layout valid, view
// shaped like the layout with non-null planes, layer in range, segment of exactly the right size,
// page table no longer than the pool, ids in range, and (scatter) no id twice; INVALID_ARGUMENT
// naming the layer, index and id otherwise. Any thread.
Result<PageCopyJob> MakePageCopyJob(CopyDirection direction, const PoolLayout& layout,
                                    const PoolView& pool, std::uint32_t layer,
                                    std::span<const std::uint32_t> page_table, std::byte* segment,
                                    std::uint64_t segment_bytes);

// The reference: runs the job on host memory with plain memcpy, page by page. Any thread.
void RunPageCopyOnHost(const PageCopyJob& job);

}  // namespace tier::device::detail
