#include "page_copy_job.h"

#include <cstring>
#include <string>

namespace tier::device::detail {

Result<PageCopyJob> MakePageCopyJob(CopyDirection direction, const PoolLayout& layout,
                                    const PoolView& pool, std::uint32_t layer,
                                    std::span<const std::uint32_t> page_table, std::byte* segment,
                                    std::uint64_t segment_bytes) {
  const char* op = direction == CopyDirection::kGather ? "gather" : "scatter";
  TIER_RETURN_IF_ERROR(layout.Validate());
  if (layer >= layout.layer_count()) {
    return Status::InvalidArgument(std::string(op) + ": layer " + std::to_string(layer) +
                                   " is outside the layout (" +
                                   std::to_string(layout.layer_count()) + " layers)");
  }
  const std::string where = std::string(op) + " layer " + std::to_string(layer);
  if (pool.plane_base.size() != layout.layer_count()) {
    return Status::InvalidArgument(where + ": pool view has " +
                                   std::to_string(pool.plane_base.size()) + " layers, the layout " +
                                   std::to_string(layout.layer_count()));
  }
  PageCopyJob job;
  job.direction = direction;
  job.layer = layer;
  job.plane_count = layout.plane_count(layer);
  for (std::uint32_t q = 0; q < job.plane_count; ++q) {
    job.plane_base[q] = pool.plane_base[layer][q];
    job.bytes_per_page[q] = layout.plane(layer, q).bytes_per_page;
    if (job.plane_base[q] == nullptr) {
      return Status::InvalidArgument(where + ": pool view has no memory for plane " +
                                     std::to_string(q) + " (" + layout.plane(layer, q).name + ")");
    }
  }
  const std::uint64_t pages = page_table.size();
  if (pages > layout.page_count()) {
    return Status::InvalidArgument(where + ": page table of " + std::to_string(pages) +
                                   " pages is longer than the pool (" +
                                   std::to_string(layout.page_count()) + " pages)");
  }
  const std::uint64_t expected = layout.segment_bytes(layer, pages);
  if (segment_bytes != expected) {
    return Status::InvalidArgument(where + ": segment has " + std::to_string(segment_bytes) +
                                   " bytes, " + std::to_string(pages) + " pages need " +
                                   std::to_string(expected));
  }
  if (expected != 0 && segment == nullptr) return Status::InvalidArgument(where + ": null segment");
  std::vector<std::uint32_t> first_index;  // scatter: where each page id was first seen, +1
  if (direction == CopyDirection::kScatter && pages != 0) {
    first_index.assign(layout.page_count(), 0);
  }
  for (std::uint64_t i = 0; i < pages; ++i) {
    const std::uint32_t id = page_table[i];
    if (id >= layout.page_count()) {
      return Status::InvalidArgument(where + ": page id " + std::to_string(id) + " at index " +
                                     std::to_string(i) + " is outside the pool (page_count " +
                                     std::to_string(layout.page_count()) + ")");
    }
    if (direction == CopyDirection::kScatter) {
      if (first_index[id] != 0) {
        return Status::InvalidArgument(where + ": page id " + std::to_string(id) +
                                       " appears twice in the target page table (indexes " +
                                       std::to_string(first_index[id] - 1) + " and " +
                                       std::to_string(i) + ")");
      }
      first_index[id] = static_cast<std::uint32_t>(i + 1);
    }
  }
  job.page_ids.assign(page_table.begin(), page_table.end());
  job.segment = segment;
  job.segment_bytes = segment_bytes;
  return job;
}

void RunPageCopyOnHost(const PageCopyJob& job) {
  const std::uint64_t pages = job.page_ids.size();
  for (std::uint32_t q = 0; q < job.plane_count; ++q) {
    const std::uint64_t bpp = job.bytes_per_page[q];
    std::byte* run = job.segment + job.segment_plane_offset(q);
    for (std::uint64_t i = 0; i < pages; ++i) {
      std::byte* page = job.plane_base[q] + static_cast<std::uint64_t>(job.page_ids[i]) * bpp;
      if (job.direction == CopyDirection::kGather) {
        std::memcpy(run + i * bpp, page, bpp);
      } else {
        std::memcpy(page, run + i * bpp, bpp);
      }
    }
  }
}

}  // namespace tier::device::detail
