// staging_pool.h -- a bounded pool of 4 KiB-aligned staging buffers, one chunk each, carved from
// one mapping (registered with io_uring as a fixed buffer). The only place spill/restore data is
// copied through: peak staging memory is count * chunk_bytes, whatever the checkpoint size.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace tier::disk {

class StagingPool {
 public:
  // Maps count * buffer_bytes bytes (buffer_bytes a multiple of 4096). Throws std::bad_alloc if
  // the mapping fails (callers are inside the ABI's catch-all).
  StagingPool(uint32_t count, uint32_t buffer_bytes);
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // Takes a buffer, waiting while none is free; returns nullptr once `cancelled()` is true (it
  // is re-checked whenever Wake() or Release() is called). Any thread except codec and I/O
  // threads (they must never wait on the pool).
  char* Acquire(const std::function<bool()>& cancelled);
  // Takes a buffer if one is free, else nullptr. Any thread.
  char* TryAcquire();
  // Returns a buffer taken from this pool. Any thread.
  void Release(char* buffer);
  // Wakes every waiter so it re-checks its cancellation predicate. Any thread.
  void Wake();

  char* base() const { return base_; }
  uint64_t total_bytes() const { return uint64_t{count_} * buffer_bytes_; }
  uint32_t buffer_bytes() const { return buffer_bytes_; }
  uint32_t count() const { return count_; }
  uint32_t free_count();

 private:
  const uint32_t count_;
  const uint32_t buffer_bytes_;
  char* base_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<char*> free_;
};

}  // namespace tier::disk
