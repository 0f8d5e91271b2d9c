// reaper.h -- removes objects in the background (chunks of removed or failed spills, leases),
// at most kMaxInflight removes at a time, each a write op sent with FULL_FORCE so that it goes
// through on a full pool. What it cannot remove (the cluster is down, the instance closes) is left
// to the sweep, which finds it by the rule in README.md.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "aio.h"
#include "tier_provider.h"

namespace tier::rados {

class Reaper {
 public:
  static constexpr uint32_t kMaxInflight = 32;
  using Logger = std::function<void(tier_log_level, const std::string&)>;

  Reaper(Aio* aio, Logger log) : aio_(aio), log_(std::move(log)) {}

  // Queues `oids` for removal (ENOENT counts as removed). Any thread.
  void Remove(std::vector<std::string> oids);
  // Stops starting removes and drops the queue (close). Any thread.
  void Stop();
  // Waits until no remove is queued or in flight, or timeout_ns passed; true when idle.
  bool WaitIdle(uint64_t timeout_ns);
  uint64_t removed() const;
  uint64_t failed() const;

 private:
  void Pump();                                // starts queued removes up to kMaxInflight; takes mu_
  void Done(const std::string& oid, int rc);  // a remove completed (librados callback)
  void Finish(const std::string& oid, int rc);  // counts it; takes mu_

  Aio* const aio_;
  const Logger log_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queued_;
  uint32_t inflight_ = 0;
  bool stopped_ = false;
  uint64_t removed_ = 0, failed_ = 0;
};

}  // namespace tier::rados
