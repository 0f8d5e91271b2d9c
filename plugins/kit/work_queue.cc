#include <tier/provider/work_queue.h>

#include <pthread.h>

#include <tier/check.h>

namespace tier::provider {

WorkQueue::WorkQueue(std::string name, uint32_t threads) : name_(std::move(name)) {
  TIER_CHECK(threads > 0);
  for (uint32_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { Run(); });
    const std::string thread_name = (name_ + std::to_string(i)).substr(0, 15);
    pthread_setname_np(threads_.back().native_handle(), thread_name.c_str());
  }
}

WorkQueue::~WorkQueue() {
  Shutdown();
}

void WorkQueue::Post(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    TIER_CHECK(!stopping_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void WorkQueue::Shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void WorkQueue::Run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace tier::provider
