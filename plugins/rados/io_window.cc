#include "io_window.h"

namespace tier::rados {

void IoWindow::Enqueue(std::function<void()> start) {
  {
    std::lock_guard lock(mu_);
    if (inflight_ >= depth_) {
      queued_.push_back(std::move(start));
      return;
    }
    ++inflight_;
  }
  workers_->Post(std::move(start));
}

void IoWindow::Release() {
  std::function<void()> next;
  {
    std::lock_guard lock(mu_);
    if (queued_.empty()) {
      --inflight_;
      return;
    }
    next = std::move(queued_.front());
    queued_.pop_front();
  }
  workers_->Post(std::move(next));
}

}  // namespace tier::rados
