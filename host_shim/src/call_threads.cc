#include "call_threads.h"

#include <tier/check.h>

namespace tier {

CallThreads::CallThreads(uint32_t parallel_threads, size_t max_queued) : max_queued_(max_queued) {
  TIER_CHECK(parallel_threads >= 1 && max_queued >= 1);
  threads_.emplace_back([this] { Work(&serial_); });
  for (uint32_t i = 0; i < parallel_threads; ++i)
    threads_.emplace_back([this] { Work(&parallel_); });
}

CallThreads::~CallThreads() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void CallThreads::Abandon() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.detach();
  }
}

bool CallThreads::RunSerial(std::function<void()> job) {
  return Run(&serial_, std::move(job));
}

bool CallThreads::RunParallel(std::function<void()> job) {
  return Run(&parallel_, std::move(job));
}

bool CallThreads::Run(Lane* lane, std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (lane->jobs.size() >= max_queued_) return false;
    lane->jobs.push_back(std::move(job));
  }
  wake_.notify_all();
  return true;
}

size_t CallThreads::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return serial_.jobs.size() + serial_.running + parallel_.jobs.size() + parallel_.running;
}

void CallThreads::Work(Lane* lane) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !lane->jobs.empty(); });
    if (lane->jobs.empty()) return;  // stopping, nothing left
    std::function<void()> job = std::move(lane->jobs.front());
    lane->jobs.pop_front();
    ++lane->running;
    lock.unlock();
    job();
    lock.lock();
    --lane->running;
  }
}

}  // namespace tier
