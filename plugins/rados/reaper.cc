#include "reaper.h"

#include <cerrno>
#include <chrono>

#include <tier/status.h>

namespace tier::rados {

void Reaper::Remove(std::vector<std::string> oids) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    for (std::string& oid : oids) queued_.push_back(std::move(oid));
  }
  Pump();
}

void Reaper::Pump() {
  for (;;) {
    std::string oid;
    {
      std::lock_guard lock(mu_);
      if (stopped_ || queued_.empty() || inflight_ >= kMaxInflight) return;
      oid = std::move(queued_.front());
      queued_.pop_front();
      ++inflight_;
    }
    rados_write_op_t op = rados_create_write_op();
    int rc = -ENOMEM;
    if (op != nullptr) {
      rados_write_op_remove(op);
      rc = aio_->Write(oid, op, LIBRADOS_OPERATION_FULL_FORCE,
                       [this, oid](int result) { Done(oid, result); });
    }
    if (rc < 0) Finish(oid, rc);  // not submitted: account for it and go on with the next
  }
}

void Reaper::Done(const std::string& oid, int rc) {
  Finish(oid, rc);
  // From a librados callback: submitting is non-blocking (our window is far below the client's
  // throttle).
  Pump();
}

void Reaper::Finish(const std::string& oid, int rc) {
  bool log_failure = false;
  {
    std::lock_guard lock(mu_);
    --inflight_;
    if (rc == 0 || rc == -ENOENT) {
      ++removed_;
    } else {
      log_failure = failed_++ % 1000 == 0;  // the first of each thousand
    }
    cv_.notify_all();
  }
  if (log_failure) {
    log_(TIER_LOG_WARN, "rados: could not remove '" + oid + "': " + Status::ErrnoText(-rc) +
                            " (the sweep removes it later)");
  }
}

void Reaper::Stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  queued_.clear();
  cv_.notify_all();
}

bool Reaper::WaitIdle(uint64_t timeout_ns) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, std::chrono::nanoseconds(timeout_ns),
                      [&] { return inflight_ == 0 && queued_.empty(); });
}

uint64_t Reaper::removed() const {
  std::lock_guard lock(mu_);
  return removed_;
}

uint64_t Reaper::failed() const {
  std::lock_guard lock(mu_);
  return failed_;
}

}  // namespace tier::rados
