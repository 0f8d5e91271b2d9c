// releaser.h -- gives memory back off the scheduler thread.
//
// Freeing a large Host copy returns a dedicated arena chunk to the system (munmap of gigabytes of
// touched pages: hundreds of milliseconds). The Host hands its Host copies to this thread to be
// destroyed, so no scheduler call waits for the kernel to free memory. Bounded: one thread, and
// the Host drains it before its arena goes.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "host_copy.h"

namespace tier {

class Releaser {
 public:
  Releaser();
  ~Releaser();  // destroys everything still queued, then stops
  Releaser(const Releaser&) = delete;
  Releaser& operator=(const Releaser&) = delete;

  // A shared_ptr whose last owner hands the copy to this thread. Any thread.
  std::shared_ptr<HostCopy> Own(std::unique_ptr<HostCopy> copy);
  // Blocks until everything handed over so far is destroyed. Owner's thread.
  void Drain();

 private:
  void Run();
  std::mutex mutex_;
  std::condition_variable wake_, drained_;
  std::deque<HostCopy*> queue_;  // guarded by mutex_
  bool busy_ = false, stopping_ = false;
  std::thread thread_;
};

}  // namespace tier
