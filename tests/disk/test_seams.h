// test_seams.h -- replacements for the provider's seams: a FileOps that injects errors at chosen
// calls, and an I/O backend wrapper that injects errors, short transfers, or holds reads at a gate.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "file_ops.h"
#include "io_backend.h"

namespace tier::disk::test {

enum class FsOp {
  kOpenTemp,
  kFDataSync,
  kFSyncDir,
  kRename,
  kUnlink,
  kFTruncate,
  kPWrite,
  kPRead,
  kFAllocate
};

// Wraps PosixFileOps. Fail(op, nth, err): the nth call (1-based, counted from now) of `op` fails
// with -err; err == 0 with kPWrite means a short write (half the bytes). Thread-safe.
class FaultyFileOps final : public FileOps {
 public:
  void Fail(FsOp op, int nth, int err);
  int calls(FsOp op) const;
  // The next directory fsync waits (before syncing) until ReleaseDirSync(); WaitDirSyncHeld
  // returns once a call is waiting (false after `timeout_ms`).
  void HoldNextDirSync();
  bool WaitDirSyncHeld(int timeout_ms);
  void ReleaseDirSync();

  int OpenAt(int dirfd, const char* name, int flags, mode_t mode) override;
  int Close(int fd) override { return real_.Close(fd); }
  int64_t PRead(int fd, void* buf, uint64_t len, uint64_t offset) override;
  int64_t PWrite(int fd, const void* buf, uint64_t len, uint64_t offset) override;
  int FDataSync(int fd) override;
  int FSyncDir(int dirfd) override;
  int RenameNoReplace(int dirfd, const char* from, const char* to) override;
  int UnlinkAt(int dirfd, const char* name, int flags) override;
  int MkdirAt(int dirfd, const char* name, mode_t mode) override {
    return real_.MkdirAt(dirfd, name, mode);
  }
  int FTruncate(int fd, uint64_t length) override;
  int FStat(int fd, struct stat* out) override { return real_.FStat(fd, out); }
  // With ReportFreeBytes(n), fstatfs says n bytes are free (as a full filesystem would).
  int FStatFs(int fd, struct statfs* out) override;
  void ReportFreeBytes(uint64_t free_bytes);
  int FAllocate(int fd, uint64_t length) override;
  int ListDir(int dirfd, std::vector<std::string>* names) override {
    return real_.ListDir(dirfd, names);
  }
  int LockExclusive(int fd) override { return real_.LockExclusive(fd); }

 private:
  // Returns the injected error for this call of `op`, 0 for none, 1 for "short".
  int Check(FsOp op);
  PosixFileOps real_;
  mutable std::mutex mu_;
  struct Rule {
    FsOp op;
    int nth;
    int err;
  };
  std::vector<Rule> rules_;
  std::map<FsOp, int> calls_;
  int64_t reported_free_bytes_ = -1;  // -1: the real value
  std::condition_variable held_cv_;
  bool hold_next_dir_sync_ = false, dir_sync_held_ = false, dir_sync_released_ = false;
};

// Wraps a backend. Reads or writes can fail (nth, -errno or a short count) or be held at a gate.
class FaultyBackend final : public IoBackend {
 public:
  explicit FaultyBackend(std::unique_ptr<IoBackend> inner) : inner_(std::move(inner)) {}
  ~FaultyBackend() override { Shutdown(); }

  // The nth (1-based, from now) request of `kind` completes with `result` without touching the
  // file (a negative errno, or a byte count smaller than asked for a short transfer).
  void Fail(IoKind kind, int nth, int64_t result);
  // While closed, reads (and writes too when `writes`) are held, not submitted, until OpenGate().
  void CloseGate(bool writes = false);
  void OpenGate();
  int held_reads();

  const char* name() const override { return inner_->name(); }
  void Submit(const IoRequest& request) override;
  void RegisterBuffer(void* base, uint64_t bytes) override { inner_->RegisterBuffer(base, bytes); }
  void Shutdown() override;

 private:
  std::unique_ptr<IoBackend> inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  struct Rule {
    IoKind kind;
    int nth;
    int64_t result;
  };
  std::vector<Rule> rules_;
  int reads_ = 0, writes_ = 0;
  bool gate_closed_ = false;
  bool gate_writes_ = false;
  std::deque<IoRequest> held_;
  std::deque<std::thread> failers_;
};

// Forwards to a FaultyBackend the test owns (so the test may touch it after the provider closed).
class ForwardingBackend final : public IoBackend {
 public:
  explicit ForwardingBackend(std::shared_ptr<FaultyBackend> target) : target_(std::move(target)) {}
  const char* name() const override { return target_->name(); }
  void Submit(const IoRequest& request) override { target_->Submit(request); }
  void RegisterBuffer(void* base, uint64_t bytes) override { target_->RegisterBuffer(base, bytes); }
  void Shutdown() override { target_->Shutdown(); }

 private:
  std::shared_ptr<FaultyBackend> target_;
};

// A wrap_backend seam: the chosen backend is wrapped by a FaultyBackend stored in `*out`.
inline std::function<std::unique_ptr<IoBackend>(std::unique_ptr<IoBackend>)> WrapWith(
    std::shared_ptr<FaultyBackend>* out) {
  return [out](std::unique_ptr<IoBackend> inner) -> std::unique_ptr<IoBackend> {
    *out = std::make_shared<FaultyBackend>(std::move(inner));
    return std::make_unique<ForwardingBackend>(*out);
  };
}

}  // namespace tier::disk::test
