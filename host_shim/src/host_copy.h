// host_copy.h -- a checkpoint's bytes in the Host tier: one extent of the host arena (pinned
// memory on the CUDA path, page-aligned memory otherwise), every segment at a 4 KiB-aligned
// offset so the disk provider can move it with O_DIRECT and the GPU with DMA, without a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <tier/status.h>

namespace tier::device {
class HostArena;
}

namespace tier {

// Owns its extent and returns it to the arena on destruction. One thread at a time.
class HostCopy {
 public:
  // Every segment starts at a multiple of this from a page-aligned extent: the most a provider's
  // tier_info.buffer_alignment may ask for (the Host refuses a provider that asks for more).
  static constexpr uint64_t kSegmentAlignmentBytes = 4096;
  // Allocates room for segments of `segment_bytes`; RESOURCE (NO_SPACE) when the arena is full.
  // The arena must outlive the copy.
  static Result<std::unique_ptr<HostCopy>> Allocate(device::HostArena* arena,
                                                    std::span<const uint64_t> segment_bytes);
  ~HostCopy();
  HostCopy(const HostCopy&) = delete;
  HostCopy& operator=(const HostCopy&) = delete;

  size_t segment_count() const { return offsets_.size(); }
  std::span<std::byte> segment(size_t i) { return {data_ + offsets_[i], sizes_[i]}; }
  std::span<const std::byte> segment(size_t i) const { return {data_ + offsets_[i], sizes_[i]}; }

 private:
  HostCopy() = default;
  device::HostArena* arena_ = nullptr;
  std::byte* data_ = nullptr;
  uint64_t extent_bytes_ = 0;
  uint64_t extent_reserved_ = 0;
  std::vector<uint64_t> offsets_;
  std::vector<uint64_t> sizes_;
};

}  // namespace tier
