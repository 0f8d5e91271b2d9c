// host_memory.h -- the Host tier's pinned memory: the arena every Host copy is carved from and the
// releaser that frees them off the scheduler thread.
//
// Owns: the HostArena (pinned on the CUDA path, page-aligned otherwise) and the Releaser (its
// thread). Borrows nothing. Every Host copy it hands out is a shared_ptr whose last owner hands the
// copy to the releaser; the arena outlives them all (FreeAll before the arena goes).
//
// Threads: the Host's scheduler thread calls every method (the one that opened the Host); the
// last owner of a copy may drop it on any thread (Releaser::Own). No lock of its own beyond the
// releaser's.
#pragma once

#include <tier/device/host_arena.h>
#include <tier/status.h>

#include <cstdint>
#include <memory>
#include <span>

#include "catalog.h"
#include "host_copy.h"
#include "releaser.h"

namespace tier {

class HostMemory {
 public:
  explicit HostMemory(std::unique_ptr<device::HostArena> arena);
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;

  // Room in the arena for the entry's segments, owned by the releaser. When the arena is full but
  // copies let go are still being freed, waits for them (frees only return extents to the arena's
  // one chunk: microseconds) and tries once more. NO_SPACE otherwise.
  Result<std::shared_ptr<HostCopy>> NewHostCopy(const CheckpointEntry& entry);
  // Room for a gather of the entry's KV segments alone (verify_held_pages); one try.
  Result<std::shared_ptr<HostCopy>> NewKvScratch(const CheckpointEntry& entry);
  // Destroys every copy let go of so far and stops the releaser's thread; no copy may be made
  // after. The arena stays until this object goes.
  void FreeAll();

  uint64_t capacity_bytes() const { return arena_->capacity_bytes(); }
  uint64_t used_bytes() const { return arena_->used_bytes(); }

 private:
  Result<std::shared_ptr<HostCopy>> Allocate(std::span<const uint64_t> segment_bytes,
                                             bool drain_and_retry);

  std::unique_ptr<device::HostArena> arena_;
  std::unique_ptr<Releaser> releaser_ = std::make_unique<Releaser>();  // frees Host copies
};

}  // namespace tier
