// The fallback I/O path: a pool of threads doing pread/pwrite (through FileOps). Each thread is one
// slot of the depth; queued requests wait in a ReadsFirstQueue (io_backend.h).
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>
#include "tier/check.h"

#include "io_backend.h"

namespace tier::disk {
namespace {

class ThreadBackend final : public IoBackend {
 public:
  ThreadBackend(uint32_t threads, FileOps* ops) : ops_(ops), depth_(threads) {
    for (uint32_t i = 0; i < threads; ++i) workers_.emplace_back([this] { Run(); });
  }
  ~ThreadBackend() override { Shutdown(); }

  const char* name() const override { return "threads"; }

  void Submit(const IoRequest& request) override {
    {
      std::lock_guard lock(mu_);
      TIER_CHECK(!stopping_);
      queue_.Push(request.kind, request);
    }
    cv_.notify_all();  // a worker that may take it (the write share can keep some idle)
  }

  void Shutdown() override {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

 private:
  void Run() {
    for (;;) {
      IoRequest request;
      IoKind kind;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return (stopping_ && queue_.empty()) || CanStartLocked(); });
        // Drain the queue before stopping: every submitted request completes.
        if (!CanStartLocked()) return;
        request = queue_.Pop(&kind);
        ++(kind == IoKind::kRead ? reads_running_ : writes_running_);
      }
      const int64_t result = Transfer(request);
      {
        std::lock_guard lock(mu_);
        --(kind == IoKind::kRead ? reads_running_ : writes_running_);
      }
      cv_.notify_all();  // the write share may have opened
      request.done(request.ctx, result);
    }
  }

  bool CanStartLocked() const { return queue_.CanPop(depth_, reads_running_, writes_running_); }

  int64_t Transfer(const IoRequest& r) {
    uint64_t done_bytes = 0;
    while (done_bytes < r.length_bytes) {
      char* at = static_cast<char*>(r.buf) + done_bytes;
      const uint64_t left_bytes = r.length_bytes - done_bytes;
      const int64_t n = r.kind == IoKind::kRead
                            ? ops_->PRead(r.fd, at, left_bytes, r.offset_bytes + done_bytes)
                            : ops_->PWrite(r.fd, at, left_bytes, r.offset_bytes + done_bytes);
      if (n < 0) {
        if (n == -EAGAIN) continue;
        return n;
      }
      if (n == 0) break;  // end of file (read) or no progress (write): report the short count
      done_bytes += static_cast<uint64_t>(n);
    }
    return static_cast<int64_t>(done_bytes);
  }

  FileOps* ops_;
  std::mutex mu_;
  std::condition_variable cv_;
  const uint32_t depth_;
  ReadsFirstQueue<IoRequest> queue_;
  uint32_t reads_running_ = 0;
  uint32_t writes_running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace

std::unique_ptr<IoBackend> MakeThreadBackend(uint32_t threads, FileOps* ops) {
  return std::make_unique<ThreadBackend>(threads, ops);
}

int64_t SyncIo(IoBackend* backend, IoRequest request) {
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int64_t result = 0;
  } waiter;
  request.ctx = &waiter;
  request.done = [](void* ctx, int64_t result) {
    auto* w = static_cast<Waiter*>(ctx);
    std::lock_guard lock(w->mu);
    w->result = result;
    w->done = true;
    w->cv.notify_one();  // under the lock: `waiter` dies as soon as the waiter wakes
  };
  backend->Submit(request);
  std::unique_lock lock(waiter.mu);
  waiter.cv.wait(lock, [&] { return waiter.done; });
  return waiter.result;
}

}  // namespace tier::disk
