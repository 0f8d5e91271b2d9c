#include "tier/device/host_arena.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string>

#include "tier/check.h"

namespace tier::device {
namespace {

constexpr std::uint64_t kPageBytes = 4096;

std::uint64_t RoundUp(std::uint64_t value, std::uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

class AlignedHostAllocator final : public HostAllocator {
 public:
  const char* name() const override { return "aligned"; }
  bool pinned() const override { return false; }
  Result<void*> Allocate(std::uint64_t bytes) override {
    if (bytes == 0) return Status::InvalidArgument("host allocation of 0 bytes");
    void* ptr = nullptr;
    const int rc = posix_memalign(&ptr, kPageBytes, bytes);
    if (rc != 0 || ptr == nullptr) {
      return Status::NoSpace("posix_memalign of " + std::to_string(bytes) +
                             " bytes failed (error " + std::to_string(rc) + ")");
    }
    return ptr;
  }
  void Deallocate(void* ptr, std::uint64_t /*bytes*/) override { std::free(ptr); }
};

}  // namespace

std::shared_ptr<HostAllocator> MakeAlignedHostAllocator() {
  return std::make_shared<AlignedHostAllocator>();
}

Result<std::unique_ptr<HostArena>> HostArena::Create(const HostArenaOptions& options,
                                                     std::shared_ptr<HostAllocator> allocator) {
  if (allocator == nullptr) return Status::InvalidArgument("host arena: no allocator");
  if (options.capacity_bytes == 0) {
    return Status::InvalidArgument("host arena: capacity_bytes is 0");
  }
  if (options.chunk_bytes == 0 || options.chunk_bytes % kPageBytes != 0) {
    return Status::InvalidArgument("host arena: chunk_bytes " +
                                   std::to_string(options.chunk_bytes) +
                                   " is not a positive multiple of 4096");
  }
  const std::uint64_t align = options.alignment_bytes;
  if (align == 0 || (align & (align - 1)) != 0 || align > kPageBytes) {
    return Status::InvalidArgument("host arena: alignment_bytes " + std::to_string(align) +
                                   " is not a power of two <= 4096");
  }
  if (options.reserve_bytes > options.capacity_bytes) {
    return Status::InvalidArgument("host arena: reserve_bytes exceeds capacity_bytes");
  }
  if (options.min_reserve_chunk_bytes % kPageBytes != 0) {
    return Status::InvalidArgument("host arena: min_reserve_chunk_bytes is not a multiple of 4096");
  }
  std::unique_ptr<HostArena> arena(new HostArena(options, std::move(allocator)));
  std::lock_guard<std::mutex> lock(arena->mu_);
  std::uint64_t try_bytes = options.chunk_bytes;
  while (arena->allocated_bytes_ < options.reserve_bytes) {
    const std::uint64_t left = options.capacity_bytes - arena->allocated_bytes_;
    const std::uint64_t bytes = std::min(try_bytes, left / kPageBytes * kPageBytes);
    if (bytes == 0) break;
    Result<std::byte*> chunk = arena->AddChunkLocked(bytes, /*dedicated=*/false);
    if (chunk.ok()) continue;
    if (options.min_reserve_chunk_bytes == 0) return chunk.status();
    // Best effort: half the size, page-rounded, until below the floor; keep what succeeded.
    try_bytes = bytes / 2 / kPageBytes * kPageBytes;
    if (try_bytes < options.min_reserve_chunk_bytes || try_bytes == 0) break;
  }
  return arena;
}

HostArena::~HostArena() {
  std::lock_guard<std::mutex> lock(mu_);
  while (!chunks_.empty()) FreeChunkLocked(chunks_.begin());
}

Result<std::byte*> HostArena::AddChunkLocked(std::uint64_t bytes, bool dedicated) {
  Result<void*> mem = allocator_->Allocate(bytes);
  if (!mem.ok()) {
    return Status::NoSpace("host arena: " + std::string(allocator_->name()) + " chunk of " +
                           std::to_string(bytes) + " bytes: " + mem.status().message());
  }
  auto* base = static_cast<std::byte*>(*mem);
  Chunk chunk;
  chunk.bytes = bytes;
  chunk.dedicated = dedicated;
  if (!dedicated) chunk.free.emplace(0, bytes);
  chunks_.emplace(base, std::move(chunk));
  allocated_bytes_ += bytes;
  return base;
}

void HostArena::FreeChunkLocked(std::map<std::byte*, Chunk>::iterator it) {
  TIER_CHECK(allocated_bytes_ >= it->second.bytes);
  allocated_bytes_ -= it->second.bytes;
  for (const auto& [offset, bytes] : it->second.live) {
    TIER_CHECK(used_bytes_ >= bytes && live_extents_ >= 1);
    used_bytes_ -= bytes;
    --live_extents_;
  }
  allocator_->Deallocate(it->first, it->second.bytes);
  chunks_.erase(it);
}

bool HostArena::TakeFrom(Chunk& chunk, std::uint64_t bytes, std::uint64_t* offset) {
  for (auto it = chunk.free.begin(); it != chunk.free.end(); ++it) {
    if (it->second < bytes) continue;
    *offset = it->first;
    const std::uint64_t rest = it->second - bytes;
    chunk.free.erase(it);
    if (rest != 0) chunk.free.emplace(*offset + bytes, rest);
    chunk.live.emplace(*offset, bytes);
    return true;
  }
  return false;
}

Result<HostExtent> HostArena::Allocate(std::uint64_t bytes) {
  if (bytes == 0) return Status::InvalidArgument("host arena: allocation of 0 bytes");
  if (bytes > options_.capacity_bytes) {
    return Status::NoSpace("host arena: " + std::to_string(bytes) +
                           " bytes exceed the capacity of " +
                           std::to_string(options_.capacity_bytes));
  }
  const std::uint64_t reserved = RoundUp(bytes, options_.alignment_bytes);
  std::lock_guard<std::mutex> lock(mu_);
  auto exhausted = [&]() {
    return Status::NoSpace("host arena: no room for " + std::to_string(bytes) + " bytes (" +
                           std::to_string(used_bytes_) + " used, " +
                           std::to_string(allocated_bytes_) + " allocated, capacity " +
                           std::to_string(options_.capacity_bytes) + ")");
  };
  if (!options_.grow) {
    // Only the chunks reserved at Create(): any one whose free space holds the extent.
    for (auto& [base, chunk] : chunks_) {
      std::uint64_t offset = 0;
      if (!chunk.dedicated && TakeFrom(chunk, reserved, &offset)) {
        used_bytes_ += reserved;
        ++live_extents_;
        return HostExtent{base + offset, bytes, reserved};
      }
    }
    return Status::NoSpace(exhausted().message() + "; the arena does not grow past the " +
                           std::to_string(allocated_bytes_) + " bytes reserved at start");
  }
  if (reserved > options_.chunk_bytes) {
    // Oversize: a dedicated allocation of its own, page-rounded.
    const std::uint64_t chunk_bytes = RoundUp(reserved, kPageBytes);
    if (chunk_bytes > options_.capacity_bytes - allocated_bytes_) return exhausted();
    Result<std::byte*> base = AddChunkLocked(chunk_bytes, /*dedicated=*/true);
    if (!base.ok()) return base.status();
    chunks_.at(*base).live.emplace(0, reserved);
    used_bytes_ += reserved;
    ++live_extents_;
    return HostExtent{*base, bytes, reserved};
  }
  for (auto& [base, chunk] : chunks_) {
    std::uint64_t offset = 0;
    if (!chunk.dedicated && TakeFrom(chunk, reserved, &offset)) {
      used_bytes_ += reserved;
      ++live_extents_;
      return HostExtent{base + offset, bytes, reserved};
    }
  }
  // A new chunk: a full one, or what is left of the bound when that is still enough.
  const std::uint64_t left = (options_.capacity_bytes - allocated_bytes_) / kPageBytes * kPageBytes;
  const std::uint64_t chunk_bytes = std::min(options_.chunk_bytes, left);
  if (chunk_bytes < reserved) return exhausted();
  Result<std::byte*> base = AddChunkLocked(chunk_bytes, /*dedicated=*/false);
  if (!base.ok()) return base.status();
  std::uint64_t offset = 0;
  if (!TakeFrom(chunks_.at(*base), reserved, &offset)) {
    return Status::Internal("host arena: a fresh chunk could not hold the extent");
  }
  used_bytes_ += reserved;
  ++live_extents_;
  return HostExtent{*base + offset, bytes, reserved};
}

Status HostArena::Release(const HostExtent& extent) {
  if (extent.data == nullptr) {
    return Status::InvalidArgument("host arena: release of a null extent");
  }
  std::unique_lock<std::mutex> lock(mu_);
  auto it = chunks_.upper_bound(extent.data);
  if (it == chunks_.begin()) {
    return Status::InvalidArgument("host arena: extent is not from this arena");
  }
  --it;
  Chunk& chunk = it->second;
  const auto offset = static_cast<std::uint64_t>(extent.data - it->first);
  if (offset >= chunk.bytes) {
    return Status::InvalidArgument("host arena: extent is not from this arena");
  }
  auto live = chunk.live.find(offset);
  if (live == chunk.live.end() || live->second != extent.reserved_bytes) {
    return Status::InvalidArgument("host arena: extent at offset " + std::to_string(offset) +
                                   " is not live (released twice, or not from Allocate())");
  }
  chunk.live.erase(live);
  TIER_CHECK(used_bytes_ >= extent.reserved_bytes && live_extents_ >= 1);
  used_bytes_ -= extent.reserved_bytes;
  --live_extents_;
  if (chunk.dedicated) {
    // Returned to the system outside the lock: freeing gigabytes of touched pages takes long, and
    // other threads' Allocate() must not wait for it.
    std::byte* base = it->first;
    const std::uint64_t bytes = chunk.bytes;
    TIER_CHECK(allocated_bytes_ >= bytes);
    allocated_bytes_ -= bytes;
    chunks_.erase(it);
    lock.unlock();
    allocator_->Deallocate(base, bytes);
    return Status::Ok();
  }
  // Insert the range and coalesce with its neighbours.
  std::uint64_t start = offset;
  std::uint64_t bytes = extent.reserved_bytes;
  auto next = chunk.free.lower_bound(start);
  if (next != chunk.free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      bytes += prev->second;
      chunk.free.erase(prev);
    }
  }
  if (next != chunk.free.end() && next->first == offset + extent.reserved_bytes) {
    bytes += next->second;
    chunk.free.erase(next);
  }
  chunk.free.emplace(start, bytes);
  return Status::Ok();
}

std::uint64_t HostArena::Trim() {
  std::lock_guard<std::mutex> lock(mu_);
  std::uint64_t freed = 0;
  for (auto it = chunks_.begin(); it != chunks_.end();) {
    auto current = it++;
    if (current->second.live.empty()) {
      freed += current->second.bytes;
      FreeChunkLocked(current);
    }
  }
  return freed;
}

std::uint64_t HostArena::allocated_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return allocated_bytes_;
}

std::uint64_t HostArena::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_bytes_;
}

std::uint64_t HostArena::live_extents() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_extents_;
}

std::uint64_t HostArena::chunk_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return chunks_.size();
}

}  // namespace tier::device
