// segment_buffers.h -- the host memory a checkpoint's segments live in during a run: one
// anonymous mapping per segment (page-aligned like the pinned Host buffers a server hands the
// provider, or offset by `misalign` bytes to exercise the provider's staging path), faulted in
// before anything is timed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <tier/status.h>
#include "checkpoint_shape.h"
#include "data_kinds.h"
#include "tier_provider.h"

namespace tier::bench {

class SegmentBuffers {
 public:
  // Maps and faults in one buffer per segment of `shape`. RESOURCE (NO_SPACE) when memory runs out.
  static Result<SegmentBuffers> Allocate(const CheckpointShape& shape, uint64_t misalign);
  SegmentBuffers() = default;
  ~SegmentBuffers();
  SegmentBuffers(SegmentBuffers&& other) noexcept;
  SegmentBuffers& operator=(SegmentBuffers&& other) noexcept;
  SegmentBuffers(const SegmentBuffers&) = delete;
  SegmentBuffers& operator=(const SegmentBuffers&) = delete;

  size_t size() const { return segments_.size(); }
  std::span<std::byte> segment(size_t i) const { return segments_[i]; }
  // The ABI's segment table over these buffers (kinds and indexes from the shape).
  std::vector<tier_segment> Table(const CheckpointShape& shape) const;

  // Fills every segment with its bytes of `kind` (segment i from FillSegment(kind, seed, i)).
  // Uses up to `threads` threads.
  void Fill(DataKind kind, uint64_t seed, unsigned threads);
  // Stamps a poison word every 4 KiB and at each segment's end, so that a restore that leaves a
  // page unwritten cannot pass as byte-exact against the previous round's identical bytes.
  void Poison();
  // Index of the first segment that differs from FillSegment, with the offset; -1 when all match.
  int64_t FirstMismatch(DataKind kind, uint64_t seed, unsigned threads,
                        uint64_t* offset = nullptr) const;
  // Index of the first segment whose bytes differ from `expected`'s (same shape); -1 when equal.
  int64_t FirstDifference(const SegmentBuffers& expected) const;
  uint64_t total_bytes() const;

 private:
  struct Mapping {
    void* base = nullptr;
    size_t bytes = 0;
  };
  void Release();
  std::vector<Mapping> mappings_;
  std::vector<std::span<std::byte>> segments_;
};

}  // namespace tier::bench
