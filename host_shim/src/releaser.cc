#include "releaser.h"

namespace tier {

Releaser::Releaser() : thread_([this] { Run(); }) {}

Releaser::~Releaser() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::shared_ptr<HostCopy> Releaser::Own(std::unique_ptr<HostCopy> copy) {
  return std::shared_ptr<HostCopy>(copy.release(), [this](HostCopy* c) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(c);
    }
    wake_.notify_all();
  });
}

void Releaser::Drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  drained_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void Releaser::Run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left
    HostCopy* copy = queue_.front();
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    delete copy;  // the arena frees a dedicated chunk here, off the scheduler thread
    lock.lock();
    busy_ = false;
    if (queue_.empty()) drained_.notify_all();
  }
}

}  // namespace tier
