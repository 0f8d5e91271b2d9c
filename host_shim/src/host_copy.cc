#include "host_copy.h"

#include <tier/check.h>
#include <tier/device/host_arena.h>

namespace tier {

Result<std::unique_ptr<HostCopy>> HostCopy::Allocate(device::HostArena* arena,
                                                     std::span<const uint64_t> segment_bytes) {
  std::unique_ptr<HostCopy> copy(new HostCopy());
  uint64_t total = 0;
  for (uint64_t bytes : segment_bytes) {
    copy->offsets_.push_back(total);
    copy->sizes_.push_back(bytes);
    total += (bytes + kSegmentAlignmentBytes - 1) / kSegmentAlignmentBytes * kSegmentAlignmentBytes;
  }
  if (total == 0) total = kSegmentAlignmentBytes;
  auto extent = arena->Allocate(total);
  if (!extent.ok()) {
    return extent.status().Annotate("host arena");
  }
  copy->arena_ = arena;
  copy->data_ = extent.value().data;
  copy->extent_bytes_ = extent.value().bytes;
  copy->extent_reserved_ = extent.value().reserved_bytes;
  return copy;
}

HostCopy::~HostCopy() {
  if (arena_ != nullptr) {
    const Status released = arena_->Release({data_, extent_bytes_, extent_reserved_});
    TIER_CHECK(released.ok());  // an extent this copy owns is always releasable
  }
}

}  // namespace tier
