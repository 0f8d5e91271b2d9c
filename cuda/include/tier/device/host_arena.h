// host_arena.h -- the Host tier's memory: pinned (on the CUDA path) page-aligned chunks, carved
// into extents for segments, with a hard bound on bytes.
//
// Pinned memory is allocated chunk by chunk (default 256 MiB) instead of in one huge allocation,
// which is known to fail on some systems (WSL2, small RLIMIT_MEMLOCK, fragmented IOMMU space).
// Chunks are allocated on demand up to capacity_bytes and kept until Trim() or destruction; an
// extent larger than a chunk gets a dedicated allocation of its own size, freed on release.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "tier/status.h"

namespace tier::device {

// Source of host memory for an arena: cudaHostAlloc (pinned) on the CUDA path, posix_memalign on
// the CPU path. Implementations are thread-safe: any thread may allocate and deallocate.
class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  // "cuda_pinned" or "aligned". Any thread.
  virtual const char* name() const = 0;
  // True when the memory is page-locked and the DMA engines can reach it directly. Any thread.
  virtual bool pinned() const = 0;
  // At least 4096-byte aligned memory of `bytes` > 0 bytes, uninitialized; NO_SPACE when the
  // memory is not there, INVALID_ARGUMENT for 0 bytes. Any thread.
  virtual Result<void*> Allocate(std::uint64_t bytes) = 0;
  // Frees what Allocate() returned, with the same `bytes`. Any thread.
  virtual void Deallocate(void* ptr, std::uint64_t bytes) = 0;
};

// posix_memalign'ed, 4096-byte aligned, not pinned: the CPU path's allocator. Any thread.
std::shared_ptr<HostAllocator> MakeAlignedHostAllocator();

struct HostArenaOptions {
  std::uint64_t capacity_bytes = 0;          // bound on all chunks together (> 0)
  std::uint64_t chunk_bytes = 256ull << 20;  // one allocation (multiple of 4096)
  std::uint64_t alignment_bytes = 4096;      // extent start alignment (power of two <= 4096)
  std::uint64_t reserve_bytes = 0;           // allocated at Create(), rounded up to chunks
  // 0: a chunk of the reserve the allocator refuses fails Create(). > 0: the reserve is best
  // effort -- a refused chunk is tried again at half its size, down to this many bytes, and the
  // arena keeps what succeeded (allocated_bytes() says how much; 0 is possible).
  std::uint64_t min_reserve_chunk_bytes = 0;
  // false: after Create() the arena never calls the allocator (no pinning on a thread that must
  // not block, no retry of a pin that failed); extents come only from the reserved chunks, and one
  // that fits in no chunk's free space is NO_SPACE.
  bool grow = true;
};

// A piece of the arena: `bytes` usable bytes at `data`. A plain value; release it exactly once.
struct HostExtent {
  std::byte* data = nullptr;
  std::uint64_t bytes = 0;           // what was asked for
  std::uint64_t reserved_bytes = 0;  // what it occupies (rounded up to alignment)
};

class HostArena {
 public:
  // Creates the arena and allocates reserve_bytes up front. Any thread.
  static Result<std::unique_ptr<HostArena>> Create(const HostArenaOptions& options,
                                                   std::shared_ptr<HostAllocator> allocator);
  // Frees every chunk. The owner must have released all extents and completed every transfer
  // that uses them; extents still live are freed with it (used_bytes() says how many bytes).
  ~HostArena();
  HostArena(const HostArena&) = delete;
  HostArena& operator=(const HostArena&) = delete;

  // An extent of `bytes` > 0, or NO_SPACE when the bound or the allocator refuses.
  // Thread-safe: any thread.
  Result<HostExtent> Allocate(std::uint64_t bytes);
  // Returns an extent to the arena; refuses (INVALID_ARGUMENT) one it did not hand out or one
  // already released. Thread-safe: any thread.
  Status Release(const HostExtent& extent);
  // Frees chunks with no live extent; returns the bytes given back. Thread-safe: any thread.
  std::uint64_t Trim();

  // Counters; thread-safe: any thread.
  std::uint64_t capacity_bytes() const { return options_.capacity_bytes; }
  std::uint64_t chunk_bytes() const { return options_.chunk_bytes; }
  std::uint64_t allocated_bytes() const;  // bytes of all chunks held
  std::uint64_t used_bytes() const;       // reserved_bytes of all live extents
  std::uint64_t live_extents() const;
  std::uint64_t chunk_count() const;
  bool pinned() const { return allocator_->pinned(); }
  const char* allocator_name() const { return allocator_->name(); }

 private:
  struct Chunk {
    std::uint64_t bytes = 0;
    bool dedicated = false;                       // one oversize extent, freed on release
    std::map<std::uint64_t, std::uint64_t> free;  // offset -> bytes, coalesced
    std::map<std::uint64_t, std::uint64_t> live;  // offset -> reserved bytes of live extents
  };

  HostArena(const HostArenaOptions& options, std::shared_ptr<HostAllocator> allocator)
      : options_(options), allocator_(std::move(allocator)) {}
  Result<std::byte*> AddChunkLocked(std::uint64_t bytes, bool dedicated);
  static bool TakeFrom(Chunk& chunk, std::uint64_t bytes, std::uint64_t* offset);
  void FreeChunkLocked(std::map<std::byte*, Chunk>::iterator it);

  const HostArenaOptions options_;
  const std::shared_ptr<HostAllocator> allocator_;
  mutable std::mutex mu_;
  std::map<std::byte*, Chunk> chunks_;  // by base address
  std::uint64_t allocated_bytes_ = 0;
  std::uint64_t used_bytes_ = 0;
  std::uint64_t live_extents_ = 0;
};

}  // namespace tier::device
