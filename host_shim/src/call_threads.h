// call_threads.h -- the threads provider calls run on, so the scheduler thread never waits for one.
//
// Two lanes: a serial one (one thread) for the calls that change the tier -- spill and restore
// submissions, removes -- so they reach the provider in the order the scheduler made them, and a
// parallel one (`threads` threads) for the calls that only look: plan_restore, stat, probe. A
// provider call that never returns holds its thread forever; later calls queue behind it and meet
// their deadlines (cold_tier.h). Bounded: at most `max_queued` jobs wait per lane.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tier {

class CallThreads {
 public:
  CallThreads(uint32_t parallel_threads, size_t max_queued);
  // Stops the threads once their queues are empty (they must not be stuck: see Abandon()).
  ~CallThreads();
  CallThreads(const CallThreads&) = delete;
  CallThreads& operator=(const CallThreads&) = delete;

  // Queues `job` on a lane; false when the lane's queue is full (the job is dropped). Any thread.
  bool RunSerial(std::function<void()> job);
  bool RunParallel(std::function<void()> job);
  // Jobs queued or running. Any thread.
  size_t pending() const;
  // For a provider that never returned: the threads are detached, never joined. The object must
  // then be leaked (its threads still use it). Owner's thread.
  void Abandon();

 private:
  struct Lane {
    std::deque<std::function<void()>> jobs;
    size_t running = 0;
  };
  bool Run(Lane* lane, std::function<void()> job);
  void Work(Lane* lane);

  const size_t max_queued_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  Lane serial_, parallel_;  // guarded by mutex_
  bool stopping_ = false;   // guarded by mutex_
  std::vector<std::thread> threads_;
};

}  // namespace tier
