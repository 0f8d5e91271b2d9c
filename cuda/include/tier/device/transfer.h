// transfer.h -- the handle of one asynchronous transfer (copy, gather, scatter, shuffle).
//
// An engine returns a Transfer when it has queued the work; the work runs in submission order on
// the engine's dedicated stream (CUDA) or worker thread (CPU). The caller keeps every buffer the
// transfer reads or writes alive and unchanged until IsDone() is true or Wait() has returned.
//
// A handle never lets its work outlive it: copies of a Transfer share one transfer, and the last
// of them to be destroyed (or assigned over) waits for the work to finish, as std::jthread joins
// and as the future std::async returns does. So a caller that returns early on an error, with
// handles in locals declared after the buffers they use, cannot free a buffer under queued work.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "tier/status.h"

namespace tier::device {

// What an engine implements behind a Transfer. Thread-safe: any thread, any number of times.
class Completion {
 public:
  virtual ~Completion() = default;
  // Blocks until the transfer has finished; returns its outcome.
  virtual Status Wait() = 0;
  // True once the transfer has finished, successfully or not; never blocks.
  virtual bool IsDone() = 0;
  // Makes later work on `native_stream` (a cudaStream_t; on the CPU engine a CpuStream's
  // handle()) wait for this transfer without blocking the host; for any other handle the CPU
  // engine blocks until done instead.
  virtual Status MakeStreamWait(void* native_stream) = 0;
};

class Transfer {
 public:
  // An empty transfer: nothing to do, already complete and ok.
  Transfer() = default;
  // Takes a share of `completion` (an engine calls this when it has queued the work).
  Transfer(std::shared_ptr<Completion> completion, std::uint64_t bytes)
      : pending_(completion ? std::make_shared<Pending>(std::move(completion)) : nullptr),
        bytes_(bytes) {}

  // Blocks until complete; returns the outcome (the same on every call). Any thread.
  Status Wait() const { return pending_ ? pending_->completion->Wait() : Status::Ok(); }
  // Polls without blocking. Any thread.
  bool IsDone() const { return pending_ ? pending_->completion->IsDone() : true; }
  // Orders later work on a CUDA stream of the caller's after this transfer. Any thread.
  Status MakeStreamWait(void* native_stream) const {
    return pending_ ? pending_->completion->MakeStreamWait(native_stream) : Status::Ok();
  }
  // Bytes the transfer moves between host and device memory (0 for an empty one).
  std::uint64_t bytes() const { return bytes_; }

 private:
  // The work, shared by the copies of one Transfer; the last copy's release waits for it (its
  // outcome stays with Wait(), which a caller who cares has called).
  struct Pending {
    explicit Pending(std::shared_ptr<Completion> c) : completion(std::move(c)) {}
    ~Pending() { completion->Wait().IgnoreError(); }
    Pending(const Pending&) = delete;
    Pending& operator=(const Pending&) = delete;
    const std::shared_ptr<Completion> completion;
  };

  std::shared_ptr<Pending> pending_;
  std::uint64_t bytes_ = 0;
};

}  // namespace tier::device
