#include "tier/device/transfer_engine.h"

#include <string>

#include "page_copy_job.h"
#include "tier/shuffle/byte_shuffle.h"

namespace tier::device {
namespace {

constexpr std::uint64_t kPlaneAlignBytes = 256;

std::uint64_t AlignUp(std::uint64_t value) {
  return (value + kPlaneAlignBytes - 1) / kPlaneAlignBytes * kPlaneAlignBytes;
}

}  // namespace

Result<DevicePool> TransferEngine::AllocatePool(const PoolLayout& layout) {
  TIER_RETURN_IF_ERROR(layout.Validate());
  std::vector<std::array<std::uint64_t, kMaxPlanesPerLayer>> offsets(layout.layer_count());
  std::uint64_t total = 0;
  for (std::uint32_t l = 0; l < layout.layer_count(); ++l) {
    for (std::uint32_t q = 0; q < layout.plane_count(l); ++q) {
      offsets[l][q] = total;
      total = AlignUp(total + layout.plane_pool_bytes(l, q));
    }
  }
  Result<DeviceBuffer> memory = AllocateDevice(total);
  if (!memory.ok()) return memory.status();
  DevicePool pool;
  pool.layout = layout;
  pool.view.plane_base.assign(layout.layer_count(), {});
  for (std::uint32_t l = 0; l < layout.layer_count(); ++l) {
    for (std::uint32_t q = 0; q < layout.plane_count(l); ++q) {
      pool.view.plane_base[l][q] = memory->data() + offsets[l][q];
    }
  }
  pool.memory = std::move(memory).value();
  return pool;
}

Result<Transfer> TransferEngine::Gather(const PoolLayout& layout, const PoolView& pool,
                                        std::uint32_t layer,
                                        std::span<const std::uint32_t> page_table,
                                        std::span<std::byte> segment) {
  Result<detail::PageCopyJob> job =
      detail::MakePageCopyJob(detail::CopyDirection::kGather, layout, pool, layer, page_table,
                              segment.data(), segment.size());
  if (!job.ok()) return job.status();
  if (job->page_ids.empty()) return Transfer();
  return SubmitPageCopy(std::move(job).value());
}

Result<Transfer> TransferEngine::Scatter(const PoolLayout& layout, const PoolView& pool,
                                         std::uint32_t layer, std::span<const std::byte> segment,
                                         std::span<const std::uint32_t> page_table) {
  // The job's segment pointer is only read from on a scatter.
  Result<detail::PageCopyJob> job =
      detail::MakePageCopyJob(detail::CopyDirection::kScatter, layout, pool, layer, page_table,
                              const_cast<std::byte*>(segment.data()), segment.size());
  if (!job.ok()) return job.status();
  if (job->page_ids.empty()) return Transfer();
  return SubmitPageCopy(std::move(job).value());
}

Result<Transfer> TransferEngine::ByteShuffle(void* device_dst, const void* device_src,
                                             std::uint64_t bytes, std::uint32_t element_bytes,
                                             bool inverse) {
  TIER_RETURN_IF_ERROR(shuffle::CheckByteShuffleArgs(device_src, device_dst, bytes, element_bytes));
  if (bytes == 0) return Transfer();
  return SubmitByteShuffle(device_dst, device_src, bytes, element_bytes, inverse);
}

}  // namespace tier::device
