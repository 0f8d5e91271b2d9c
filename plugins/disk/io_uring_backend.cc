// The primary I/O path: one io_uring, up to queue_depth requests in flight, one completion thread.
// Staging memory is registered as a fixed buffer when the kernel allows it. Requests past the depth
// wait in a ReadsFirstQueue (io_backend.h): restores' reads go before spills' writes.
#include <liburing.h>
#include <sys/uio.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include "tier/check.h"

#include "errno_status.h"
#include "io_backend.h"

namespace tier::disk {
namespace {

struct Op {
  IoRequest request;
  uint64_t done_bytes = 0;
};

class IoUringBackend final : public IoBackend {
 public:
  explicit IoUringBackend(uint32_t queue_depth) : queue_depth_(queue_depth) {}
  ~IoUringBackend() override {
    Shutdown();
    if (ring_ready_) io_uring_queue_exit(&ring_);
  }

  bool Init(std::string* why) {
    const int rc = io_uring_queue_init(queue_depth_ + 1, &ring_, 0);  // +1 for the stop NOP
    if (rc < 0) {
      *why = "io_uring_queue_init: " + Status::ErrnoText(-rc);
      return false;
    }
    ring_ready_ = true;
    reaper_ = std::thread([this] { Reap(); });
    return true;
  }

  const char* name() const override { return "io_uring"; }

  void RegisterBuffer(void* base, uint64_t bytes) override {
    iovec iov{base, bytes};
    if (io_uring_register_buffers(&ring_, &iov, 1) == 0) {
      fixed_base_ = static_cast<char*>(base);
      fixed_bytes_ = bytes;
    }
  }

  bool has_fixed_buffer() const { return fixed_base_ != nullptr; }

  void Submit(const IoRequest& request) override {
    Op* op = new Op{request, 0};
    std::lock_guard lock(mu_);
    TIER_CHECK(!stopping_);
    pending_.Push(request.kind, op);
    if (StartPendingLocked()) SubmitLocked();
  }

  void Shutdown() override {
    std::unique_lock lock(mu_);
    if (!ring_ready_ || stopped_) return;
    stopping_ = true;
    idle_cv_.wait(lock, [&] { return inflight() == 0 && pending_.empty(); });
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    TIER_CHECK(sqe != nullptr);  // nothing in flight: the ring has room
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data(sqe, nullptr);  // the stop token
    SubmitLocked();
    lock.unlock();
    reaper_.join();
    stopped_ = true;
  }

 private:
  uint32_t inflight() const { return reads_inflight_ + writes_inflight_; }

  // Preps every queued request allowed to start now; true if it prepped any.
  bool StartPendingLocked() {
    bool any = false;
    while (pending_.CanPop(queue_depth_, reads_inflight_, writes_inflight_)) {
      IoKind kind;
      PrepLocked(pending_.Pop(&kind));
      any = true;
    }
    return any;
  }

  void PrepLocked(Op* op) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    TIER_CHECK(sqe != nullptr);  // inflight() < queue_depth_ keeps the SQ from filling up
    IoRequest& r = op->request;
    char* buf = static_cast<char*>(r.buf) + op->done_bytes;
    const unsigned length_bytes = static_cast<unsigned>(r.length_bytes - op->done_bytes);
    const uint64_t offset_bytes = r.offset_bytes + op->done_bytes;
    const bool fixed = fixed_base_ != nullptr && buf >= fixed_base_ &&
                       buf + length_bytes <= fixed_base_ + fixed_bytes_;
    if (r.kind == IoKind::kRead) {
      if (fixed)
        io_uring_prep_read_fixed(sqe, r.fd, buf, length_bytes, offset_bytes, 0);
      else
        io_uring_prep_read(sqe, r.fd, buf, length_bytes, offset_bytes);
    } else {
      if (fixed)
        io_uring_prep_write_fixed(sqe, r.fd, buf, length_bytes, offset_bytes, 0);
      else
        io_uring_prep_write(sqe, r.fd, buf, length_bytes, offset_bytes);
    }
    io_uring_sqe_set_data(sqe, op);
    ++(r.kind == IoKind::kRead ? reads_inflight_ : writes_inflight_);
  }

  void SubmitLocked() {
    for (;;) {
      const int rc = io_uring_submit(&ring_);
      if (rc >= 0 || (rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)) return;
    }
  }

  void Reap() {
    for (;;) {
      io_uring_cqe* cqe = nullptr;
      const int rc = io_uring_wait_cqe(&ring_, &cqe);
      if (rc < 0) {
        if (rc == -EINTR || rc == -EAGAIN) continue;
        // Cannot happen with a valid ring; fail loudly rather than hang.
        __builtin_trap();
      }
      Op* op = static_cast<Op*>(io_uring_cqe_get_data(cqe));
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      if (op == nullptr) return;  // stop token
      Finish(op, res);
    }
  }

  void Finish(Op* op, int res) {
    // Take the lock before touching `op`: Submit wrote it under the lock, and this acquisition is
    // what orders those writes before our reads (the kernel's SQ->CQ ordering is invisible to
    // the language's memory model and to ThreadSanitizer).
    IoRequest finished;
    int64_t result = 0;
    {
      std::lock_guard lock(mu_);
      bool again = false;
      if (res == -EAGAIN || res == -EINTR) {
        again = true;
      } else if (res < 0) {
        result = res;
      } else if (res == 0) {
        result = static_cast<int64_t>(op->done_bytes);  // EOF or no progress: short count
      } else {
        op->done_bytes += static_cast<uint64_t>(res);
        if (op->done_bytes < op->request.length_bytes)
          again = true;
        else
          result = static_cast<int64_t>(op->done_bytes);
      }
      --(op->request.kind == IoKind::kRead ? reads_inflight_ : writes_inflight_);
      if (again) PrepLocked(op);  // continue a partial transfer
      StartPendingLocked();
      SubmitLocked();
      if (again) return;
      finished = op->request;
      delete op;
      if (inflight() == 0 && pending_.empty()) idle_cv_.notify_all();
    }
    // No backend lock held: the callback may Submit again. Shutdown() is only called once every
    // submitter is done (the provider drains its jobs first), so nothing races it from here.
    finished.done(finished.ctx, result);
  }

  const uint32_t queue_depth_;
  io_uring ring_{};
  bool ring_ready_ = false;
  std::thread reaper_;
  std::mutex mu_;
  std::condition_variable idle_cv_;
  ReadsFirstQueue<Op*> pending_;
  uint32_t reads_inflight_ = 0;
  uint32_t writes_inflight_ = 0;
  bool stopping_ = false;
  bool stopped_ = false;
  char* fixed_base_ = nullptr;
  uint64_t fixed_bytes_ = 0;
};

}  // namespace

std::unique_ptr<IoBackend> MakeIoUringBackend(uint32_t queue_depth, std::string* why) {
  auto backend = std::make_unique<IoUringBackend>(queue_depth);
  if (!backend->Init(why)) return nullptr;
  return backend;
}

}  // namespace tier::disk
