// event_queue.h -- where completions from other threads wait for the scheduler thread.
//
// Provider threads, the provider's own completion threads and the Host's provider-call threads
// only ever Post() a closure here; the scheduler thread runs them in Poll() (Drain()), so the
// catalog is touched by one thread only. An eventfd becomes readable while closures wait.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

namespace tier {

class EventQueue {
 public:
  EventQueue();
  ~EventQueue();
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  // Queues `work` for the scheduler thread. Any thread; never blocks for long.
  void Post(std::function<void()> work);
  // Everything posted so far, in order; resets the eventfd. Scheduler thread.
  std::vector<std::function<void()>> Drain();
  // Waits until something is posted or `timeout_ns` passes; true when something waits.
  // Any thread.
  bool Wait(uint64_t timeout_ns);
  size_t size() const;
  int fd() const { return fd_; }

 private:
  mutable std::mutex mutex_;
  std::condition_variable posted_;
  std::deque<std::function<void()>> work_;  // guarded by mutex_
  int fd_ = -1;                             // eventfd, -1 when the kernel refused one
};

}  // namespace tier
