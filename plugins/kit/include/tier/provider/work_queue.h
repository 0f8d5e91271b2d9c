// work_queue.h -- a fixed pool of threads running posted tasks in FIFO order. The providers use
// it for their job runners (one spill or restore at a time per thread) and their CPU workers
// (checksums, zstd, completions).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tier::provider {

class WorkQueue {
 public:
  WorkQueue(std::string name, uint32_t threads);
  ~WorkQueue();  // Shutdown()

  // Queues `task`; it runs on one of the pool threads. Tasks must not throw. Any thread.
  void Post(std::function<void()> task);
  // Runs every queued task, then joins the threads. Owner thread only; no Post may race it.
  void Shutdown();
  uint32_t threads() const { return static_cast<uint32_t>(threads_.size()); }

 private:
  void Run();
  std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tier::provider
