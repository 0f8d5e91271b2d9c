// aio.h -- every asynchronous librados operation of an instance goes through one Aio: it owns the
// completion, runs the caller's `done` exactly once on the librados finisher thread with none of
// our locks held, releases the completion and the read/write op afterwards, and can cancel what
// is in flight (close, and the deadline of a synchronous wait).
//
// Buffers an operation reads into or out of must outlive it: callers keep them in `keepalive`
// (released after `done` ran) or in state that `done` owns.
#pragma once

#include <rados/librados.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tier::rados {

class Aio {
 public:
  using Done = std::function<void(int rc)>;  // rc: the operation's return value (0 or -errno)

  explicit Aio(rados_ioctx_t io) : io_(io) {}
  ~Aio();  // CancelAll + WaitIdle (unbounded: librados always completes a cancelled op)

  // Submits `op` (ownership passes here, also on failure). On success returns 0, sets *id and
  // `done` runs once later; on failure returns -errno and `done` never runs. Any thread.
  int Read(const std::string& oid, rados_read_op_t op, int flags, Done done,
           std::shared_ptr<void> keepalive = nullptr, uint64_t* id = nullptr);
  int Write(const std::string& oid, rados_write_op_t op, int flags, Done done,
            std::shared_ptr<void> keepalive = nullptr, uint64_t* id = nullptr);

  // Runs one operation and waits for it until `deadline_ns` (CLOCK_MONOTONIC); past it the
  // operation is cancelled and -ETIMEDOUT returned. Buffers the op uses must be in `keepalive`
  // (a cancelled op may complete after this returns). Any thread except a librados callback.
  int ReadSync(const std::string& oid, rados_read_op_t op, int flags, uint64_t deadline_ns,
               std::shared_ptr<void> keepalive = nullptr);
  int WriteSync(const std::string& oid, rados_write_op_t op, int flags, uint64_t deadline_ns,
                std::shared_ptr<void> keepalive = nullptr);

  // Cancels one operation (no-op when it already completed) or all in flight; their `done` still
  // runs (with -ECANCELED). Any thread except a librados callback.
  void Cancel(uint64_t id);
  void CancelAll();
  // Waits until nothing is in flight or `timeout_ns` passed; true when idle. Any thread.
  bool WaitIdle(uint64_t timeout_ns);
  uint64_t inflight() const;

  static uint64_t NowNs();  // CLOCK_MONOTONIC

 private:
  struct Op;
  static void Trampoline(rados_completion_t completion, void* arg);
  int Submit(const std::string& oid, rados_read_op_t read_op, rados_write_op_t write_op, int flags,
             Done done, std::shared_ptr<void> keepalive, uint64_t* id);
  int RunSync(const std::string& oid, rados_read_op_t read_op, rados_write_op_t write_op, int flags,
              uint64_t deadline_ns, std::shared_ptr<void> keepalive);

  rados_ioctx_t io_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<uint64_t, Op*> ops_;  // submitted, callback not started (cancellable)
  uint64_t running_ = 0;                   // submitted, callback not finished
  uint64_t next_id_ = 1;
};

}  // namespace tier::rados
