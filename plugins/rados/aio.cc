#include "aio.h"

#include <time.h>

#include <cerrno>
#include <chrono>

#include <tier/check.h>

namespace tier::rados {

struct Aio::Op {
  Aio* aio = nullptr;
  uint64_t id = 0;
  rados_completion_t completion = nullptr;
  rados_read_op_t read_op = nullptr;
  rados_write_op_t write_op = nullptr;
  Done done;
  std::shared_ptr<void> keepalive;
  uint32_t cancel_refs = 0;  // a Cancel is using `completion` (guarded by Aio::mu_)
};

uint64_t Aio::NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

Aio::~Aio() {
  CancelAll();
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return running_ == 0; });
}

void Aio::Trampoline(rados_completion_t completion, void* arg) {
  Op* op = static_cast<Op*>(arg);
  Aio* aio = op->aio;
  const int rc = rados_aio_get_return_value(completion);
  {
    // Out of the table first, so no Cancel starts on a completion about to be released; wait for
    // one that already started.
    std::unique_lock lock(aio->mu_);
    aio->ops_.erase(op->id);
    aio->cv_.wait(lock, [&] { return op->cancel_refs == 0; });
  }
  if (op->done) op->done(rc);
  rados_aio_release(op->completion);
  if (op->read_op != nullptr) rados_release_read_op(op->read_op);
  if (op->write_op != nullptr) rados_release_write_op(op->write_op);
  op->done = nullptr;
  op->keepalive.reset();
  delete op;
  std::lock_guard lock(aio->mu_);
  --aio->running_;
  aio->cv_.notify_all();  // the last touch of `aio`
}

int Aio::Submit(const std::string& oid, rados_read_op_t read_op, rados_write_op_t write_op,
                int flags, Done done, std::shared_ptr<void> keepalive, uint64_t* id) {
  auto* op = new Op;
  op->aio = this;
  op->read_op = read_op;
  op->write_op = write_op;
  op->done = std::move(done);
  op->keepalive = std::move(keepalive);
  int rc = rados_aio_create_completion2(op, &Aio::Trampoline, &op->completion);
  if (rc < 0) {
    if (read_op != nullptr) rados_release_read_op(read_op);
    if (write_op != nullptr) rados_release_write_op(write_op);
    delete op;
    return rc;
  }
  {
    // Registered before submission: the callback may run before operate returns.
    std::lock_guard lock(mu_);
    op->id = next_id_++;
    ops_.emplace(op->id, op);
    ++running_;
    if (id != nullptr) *id = op->id;
  }
  rc = read_op != nullptr
           ? rados_aio_read_op_operate(read_op, io_, op->completion, oid.c_str(), flags)
           : rados_aio_write_op_operate(write_op, io_, op->completion, oid.c_str(), nullptr, flags);
  if (rc < 0) {
    // Not submitted: the callback never runs.
    {
      std::lock_guard lock(mu_);
      ops_.erase(op->id);
      --running_;
      cv_.notify_all();
    }
    rados_aio_release(op->completion);
    if (read_op != nullptr) rados_release_read_op(read_op);
    if (write_op != nullptr) rados_release_write_op(write_op);
    delete op;
  }
  return rc;
}

int Aio::Read(const std::string& oid, rados_read_op_t op, int flags, Done done,
              std::shared_ptr<void> keepalive, uint64_t* id) {
  TIER_CHECK(op != nullptr);
  return Submit(oid, op, nullptr, flags, std::move(done), std::move(keepalive), id);
}

int Aio::Write(const std::string& oid, rados_write_op_t op, int flags, Done done,
               std::shared_ptr<void> keepalive, uint64_t* id) {
  TIER_CHECK(op != nullptr);
  return Submit(oid, nullptr, op, flags, std::move(done), std::move(keepalive), id);
}

namespace {

struct SyncState {
  std::mutex mu;
  std::condition_variable cv;
  bool fired = false;
  int rc = 0;
};

}  // namespace

int Aio::RunSync(const std::string& oid, rados_read_op_t read_op, rados_write_op_t write_op,
                 int flags, uint64_t deadline_ns, std::shared_ptr<void> keepalive) {
  auto state = std::make_shared<SyncState>();
  Done done = [state](int rc) {
    std::lock_guard lock(state->mu);
    state->rc = rc;
    state->fired = true;
    state->cv.notify_all();
  };
  uint64_t id = 0;
  const int rc = Submit(oid, read_op, write_op, flags, std::move(done), std::move(keepalive), &id);
  if (rc < 0) return rc;
  auto wait_until = [&](uint64_t until_ns) {
    std::unique_lock lock(state->mu);
    while (!state->fired) {
      const uint64_t now = NowNs();
      if (now >= until_ns) return false;
      state->cv.wait_for(lock, std::chrono::nanoseconds(until_ns - now));
    }
    return true;
  };
  if (wait_until(deadline_ns)) return state->rc;
  Cancel(id);
  // A cancelled operation completes promptly; the answer is a timeout either way.
  wait_until(NowNs() + 2'000'000'000ull);
  return -ETIMEDOUT;
}

int Aio::ReadSync(const std::string& oid, rados_read_op_t op, int flags, uint64_t deadline_ns,
                  std::shared_ptr<void> keepalive) {
  return RunSync(oid, op, nullptr, flags, deadline_ns, std::move(keepalive));
}

int Aio::WriteSync(const std::string& oid, rados_write_op_t op, int flags, uint64_t deadline_ns,
                   std::shared_ptr<void> keepalive) {
  return RunSync(oid, nullptr, op, flags, deadline_ns, std::move(keepalive));
}

void Aio::Cancel(uint64_t id) {
  Op* op = nullptr;
  {
    std::lock_guard lock(mu_);
    auto it = ops_.find(id);
    if (it == ops_.end()) return;
    op = it->second;
    ++op->cancel_refs;
  }
  rados_aio_cancel(io_, op->completion);
  std::lock_guard lock(mu_);
  --op->cancel_refs;
  cv_.notify_all();
}

void Aio::CancelAll() {
  std::vector<uint64_t> ids;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, op] : ops_) ids.push_back(id);
  }
  for (uint64_t id : ids) Cancel(id);
}

bool Aio::WaitIdle(uint64_t timeout_ns) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, std::chrono::nanoseconds(timeout_ns), [&] { return running_ == 0; });
}

uint64_t Aio::inflight() const {
  std::lock_guard lock(mu_);
  return running_;
}

}  // namespace tier::rados
