#include "staging_pool.h"

#include <sys/mman.h>

#include <new>
#include "tier/check.h"

namespace tier::disk {

StagingPool::StagingPool(uint32_t count, uint32_t buffer_bytes)
    : count_(count), buffer_bytes_(buffer_bytes) {
  TIER_CHECK(count > 0 && buffer_bytes % 4096 == 0);
  void* p =
      ::mmap(nullptr, total_bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  base_ = static_cast<char*>(p);
  free_.reserve(count);
  for (uint32_t i = count; i-- > 0;) free_.push_back(base_ + uint64_t{i} * buffer_bytes);
}

StagingPool::~StagingPool() {
  TIER_CHECK(free_.size() == count_);  // every buffer came back
  ::munmap(base_, total_bytes());
}

char* StagingPool::Acquire(const std::function<bool()>& cancelled) {
  std::unique_lock lock(mu_);
  for (;;) {
    if (cancelled()) return nullptr;
    if (!free_.empty()) {
      char* b = free_.back();
      free_.pop_back();
      return b;
    }
    cv_.wait(lock);
  }
}

char* StagingPool::TryAcquire() {
  std::lock_guard lock(mu_);
  if (free_.empty()) return nullptr;
  char* b = free_.back();
  free_.pop_back();
  return b;
}

void StagingPool::Release(char* buffer) {
  TIER_CHECK(buffer >= base_ && buffer < base_ + total_bytes());
  TIER_CHECK((buffer - base_) % buffer_bytes_ == 0);
  {
    std::lock_guard lock(mu_);
    free_.push_back(buffer);
    TIER_CHECK(free_.size() <= count_);
  }
  cv_.notify_one();
}

void StagingPool::Wake() {
  { std::lock_guard lock(mu_); }
  cv_.notify_all();
}

uint32_t StagingPool::free_count() {
  std::lock_guard lock(mu_);
  return static_cast<uint32_t>(free_.size());
}

}  // namespace tier::disk
