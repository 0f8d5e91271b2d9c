#include "host_memory.h"

#include <tier/check.h>

#include <utility>
#include <vector>

namespace tier {

HostMemory::HostMemory(std::unique_ptr<device::HostArena> arena) : arena_(std::move(arena)) {
  TIER_CHECK(arena_ != nullptr);
}

Result<std::shared_ptr<HostCopy>> HostMemory::NewHostCopy(const CheckpointEntry& entry) {
  std::vector<uint64_t> sizes;
  for (const SegmentSpec& s : entry.segments) sizes.push_back(s.physical_bytes);
  return Allocate(sizes, /*drain_and_retry=*/true);
}

Result<std::shared_ptr<HostCopy>> HostMemory::NewKvScratch(const CheckpointEntry& entry) {
  std::vector<uint64_t> sizes;
  for (uint32_t i = 0; i < entry.kv_segments; ++i)
    sizes.push_back(entry.segments[i].physical_bytes);
  return Allocate(sizes, /*drain_and_retry=*/false);
}

void HostMemory::FreeAll() {
  releaser_.reset();
}

Result<std::shared_ptr<HostCopy>> HostMemory::Allocate(std::span<const uint64_t> segment_bytes,
                                                       bool drain_and_retry) {
  TIER_CHECK_MSG(releaser_ != nullptr, "a Host copy allocated after HostMemory::FreeAll");
  auto copy = HostCopy::Allocate(arena_.get(), segment_bytes);
  if (!copy.ok() && drain_and_retry) {
    // Copies let go of are freed on the releaser's thread: wait for those queued or being freed
    // (returns at once when none) and try again: a release that finished after the failed
    // allocation has freed memory too.
    releaser_->Drain();
    copy = HostCopy::Allocate(arena_.get(), segment_bytes);
  }
  if (!copy.ok()) return copy.status();
  return releaser_->Own(std::move(copy).value());
}

}  // namespace tier
