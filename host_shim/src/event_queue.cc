#include "event_queue.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>

namespace tier {

EventQueue::EventQueue() : fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

EventQueue::~EventQueue() {
  if (fd_ >= 0) ::close(fd_);
}

void EventQueue::Post(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    work_.push_back(std::move(work));
  }
  posted_.notify_all();
  if (fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(fd_, &one, sizeof(one));  // EAGAIN: already set
  }
}

std::vector<std::function<void()>> EventQueue::Drain() {
  std::vector<std::function<void()>> out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    out.reserve(work_.size());
    for (auto& w : work_) out.push_back(std::move(w));
    work_.clear();
  }
  if (fd_ >= 0) {
    uint64_t value = 0;
    [[maybe_unused]] const ssize_t n = ::read(fd_, &value, sizeof(value));  // EAGAIN: not set
  }
  return out;
}

bool EventQueue::Wait(uint64_t timeout_ns) {
  std::unique_lock<std::mutex> lock(mutex_);
  return posted_.wait_for(lock, std::chrono::nanoseconds(timeout_ns),
                          [&] { return !work_.empty(); });
}

size_t EventQueue::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return work_.size();
}

}  // namespace tier
