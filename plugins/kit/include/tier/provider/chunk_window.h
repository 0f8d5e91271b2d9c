// chunk_window.h -- the window of one job's chunk operations in flight: how many are outstanding
// and the first error any of them met. The job's runner thread begins operations and waits; the
// threads that finish them (I/O completions, codec workers, librados callbacks) only Fail and
// End. End is the last touch of the window: the runner may destroy it as soon as End returns and
// the count reads zero. Header-only.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <utility>

#include "tier/status.h"

namespace tier::provider {

struct ChunkWindow {
  std::mutex mu;
  std::condition_variable cv;
  uint32_t outstanding = 0;  // guarded by mu
  Status first_error;        // guarded by mu
  std::atomic<bool> failed{false};

  // `n` more operations in flight. Runner thread.
  void Begin(uint32_t n = 1) {
    std::lock_guard lock(mu);
    outstanding += n;
  }
  // Keeps the first error; later ones are dropped. Any thread.
  void Fail(Status status) {
    std::lock_guard lock(mu);
    if (first_error.ok()) first_error = std::move(status);
    failed.store(true);
  }
  // One operation finished. Last touch of the window. Any thread.
  void End() {
    std::lock_guard lock(mu);
    --outstanding;
    cv.notify_all();
  }
  // Waits until fewer than `limit` operations are in flight. Runner thread.
  void WaitBelow(uint32_t limit) {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return outstanding < limit; });
  }
  void WaitIdle() { WaitBelow(1); }
  // Waits up to `timeout_ns` for every operation to finish; true when none is left.
  bool WaitIdleFor(uint64_t timeout_ns) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::nanoseconds(timeout_ns),
                       [&] { return outstanding == 0; });
  }
  Status error() {
    std::lock_guard lock(mu);
    return first_error;
  }
};

}  // namespace tier::provider
