// io_backend.h -- asynchronous positional reads and writes. Two implementations: io_uring
// (io_uring_backend.cc) and a pread/pwrite thread pool (thread_backend.cc). Tests wrap a backend
// to inject faults (see Seams in disk_provider.h).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>

#include "file_ops.h"

namespace tier::disk {

enum class IoKind : uint8_t { kRead, kWrite };

struct IoRequest {
  IoKind kind = IoKind::kRead;
  int fd = -1;
  void* buf = nullptr;  // borrowed until `done` runs
  uint64_t length_bytes = 0;
  uint64_t offset_bytes = 0;
  // Runs exactly once on a backend thread, never inside Submit: `result` is the byte count
  // transferred (== length_bytes, or less when a read hit end of file or a write made no progress)
  // or -errno. It must not block on other I/O.
  void (*done)(void* ctx, int64_t result) = nullptr;
  void* ctx = nullptr;
};

class IoBackend {
 public:
  virtual ~IoBackend() = default;
  // Short name for logs ("io_uring", "threads"). Any thread.
  virtual const char* name() const = 0;
  // Queues one request; never blocks on the device (requests past the queue depth wait in a FIFO
  // inside the backend). Partial transfers are continued internally. Any thread, including a
  // `done` callback.
  virtual void Submit(const IoRequest& request) = 0;
  // Declares [base, base+bytes) as long-lived I/O memory (io_uring registers it as a fixed
  // buffer). Optional; call before the first Submit. Owner thread only.
  virtual void RegisterBuffer(void* /*base*/, uint64_t /*bytes*/) {}
  // Waits until every submitted request has completed, then stops the backend threads. Owner
  // thread only, once, with no Submit racing it.
  virtual void Shutdown() = 0;
};

// Reads first: a read is a restore, a user waiting; a write is a spill, housekeeping. Both backends
// start queued reads before queued writes, and while any read is queued or in flight, writes hold
// at most WriteSlotsWhileReading(depth) of the queue depth (a quarter, at least one). Writes never
// starve: that share is never zero, so a spill keeps completing under any read load, at worst
// ~depth/share times slower than alone.
inline uint32_t WriteSlotsWhileReading(uint32_t depth) {
  return depth >= 8 ? depth / 4 : 1;
}

// The queue both backends keep past their depth, in that order. Not thread-safe (the backend's
// lock guards it).
template <typename T>
class ReadsFirstQueue {
 public:
  void Push(IoKind kind, T item) { (kind == IoKind::kRead ? reads_ : writes_).push_back(item); }
  bool empty() const { return reads_.empty() && writes_.empty(); }
  // Whether a request may start with `reads_inflight` + `writes_inflight` of `depth` in use.
  bool CanPop(uint32_t depth, uint32_t reads_inflight, uint32_t writes_inflight) const {
    if (reads_inflight + writes_inflight >= depth) return false;
    if (!reads_.empty()) return true;
    if (writes_.empty()) return false;
    return reads_inflight == 0 || writes_inflight < WriteSlotsWhileReading(depth);
  }
  // Takes the request that may start next (CanPop must be true); sets `*kind`.
  T Pop(IoKind* kind) {
    std::deque<T>& from = reads_.empty() ? writes_ : reads_;
    *kind = reads_.empty() ? IoKind::kWrite : IoKind::kRead;
    T item = from.front();
    from.pop_front();
    return item;
  }

 private:
  std::deque<T> reads_;
  std::deque<T> writes_;
};

// Creates an io_uring backend with `queue_depth` requests in flight, or returns nullptr with
// `*why` set (io_uring absent, blocked by seccomp, out of memlock...).
std::unique_ptr<IoBackend> MakeIoUringBackend(uint32_t queue_depth, std::string* why);

// Creates a thread-pool backend: `threads` workers doing pread/pwrite through `ops` (borrowed,
// must outlive the backend).
std::unique_ptr<IoBackend> MakeThreadBackend(uint32_t threads, FileOps* ops);

// Submits `request` (its done/ctx ignored) and waits for the result. Any thread except a backend
// thread.
int64_t SyncIo(IoBackend* backend, IoRequest request);

}  // namespace tier::disk
