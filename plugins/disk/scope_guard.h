// scope_guard.h -- runs a cleanup when a scope ends, normally or through an exception, unless it
// was dismissed: how the spill and restore steps give back what they hold (a descriptor, a
// temporary file, a reservation, a pin) without a chain of `if (status.ok())`. Owner thread only.
#pragma once

#include <utility>

namespace tier::disk {

template <typename F>
class [[nodiscard]] ScopeGuard {
 public:
  explicit ScopeGuard(F cleanup) : cleanup_(std::move(cleanup)) {}
  ~ScopeGuard() {
    if (armed_) cleanup_();
  }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

  // The cleanup will not run.
  void Dismiss() { armed_ = false; }
  // Runs the cleanup now (once), instead of at the end of the scope.
  void RunNow() {
    if (armed_) cleanup_();
    armed_ = false;
  }

 private:
  F cleanup_;
  bool armed_ = true;
};

}  // namespace tier::disk
