// io_window.h -- the instance's bound on chunk operations in flight (queue_depth), shared by every
// spill and restore: chunk tasks start in FIFO order as slots free up, on the worker threads.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

#include <tier/provider/work_queue.h>

namespace tier::rados {

using provider::WorkQueue;

class IoWindow {
 public:
  IoWindow(uint32_t depth, WorkQueue* workers) : depth_(depth), workers_(workers) {}

  // Queues `start`; it runs on a worker once a slot is free and must lead to exactly one
  // Release() (when its operation completed, or at once when it decides not to submit one).
  // Any thread.
  void Enqueue(std::function<void()> start);
  // Frees a slot and starts the next queued task. Any thread (librados callbacks included).
  void Release();
  uint32_t depth() const { return depth_; }

 private:
  const uint32_t depth_;
  WorkQueue* const workers_;
  std::mutex mu_;
  std::deque<std::function<void()>> queued_;
  uint32_t inflight_ = 0;
};

}  // namespace tier::rados
