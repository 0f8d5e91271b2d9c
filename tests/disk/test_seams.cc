#include "test_seams.h"

#include <cstring>

namespace tier::disk::test {

void FaultyFileOps::Fail(FsOp op, int nth, int err) {
  std::lock_guard lock(mu_);
  rules_.push_back({op, calls_[op] + nth, err});
}

int FaultyFileOps::calls(FsOp op) const {
  std::lock_guard lock(mu_);
  auto it = calls_.find(op);
  return it == calls_.end() ? 0 : it->second;
}

int FaultyFileOps::Check(FsOp op) {
  std::lock_guard lock(mu_);
  const int n = ++calls_[op];
  for (const Rule& r : rules_) {
    if (r.op == op && r.nth == n) return r.err == 0 ? 1 : -r.err;
  }
  return 0;
}

int FaultyFileOps::OpenAt(int dirfd, const char* name, int flags, mode_t mode) {
  const std::string n = name;
  if (n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0 && n[0] != '.') {
    if (const int e = Check(FsOp::kOpenTemp); e < 0) return e;
  }
  return real_.OpenAt(dirfd, name, flags, mode);
}

int64_t FaultyFileOps::PRead(int fd, void* buf, uint64_t len, uint64_t offset) {
  if (const int e = Check(FsOp::kPRead); e < 0) return e;
  return real_.PRead(fd, buf, len, offset);
}

int64_t FaultyFileOps::PWrite(int fd, const void* buf, uint64_t len, uint64_t offset) {
  const int e = Check(FsOp::kPWrite);
  if (e < 0) return e;
  if (e == 1 && len >= 8192) return real_.PWrite(fd, buf, len / 2 / 4096 * 4096, offset);  // short
  return real_.PWrite(fd, buf, len, offset);
}

int FaultyFileOps::FDataSync(int fd) {
  if (const int e = Check(FsOp::kFDataSync); e < 0) return e;
  return real_.FDataSync(fd);
}

void FaultyFileOps::HoldNextDirSync() {
  std::lock_guard lock(mu_);
  hold_next_dir_sync_ = true;
  dir_sync_held_ = dir_sync_released_ = false;
}

bool FaultyFileOps::WaitDirSyncHeld(int timeout_ms) {
  std::unique_lock lock(mu_);
  return held_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                           [&] { return dir_sync_held_; });
}

void FaultyFileOps::ReleaseDirSync() {
  std::lock_guard lock(mu_);
  dir_sync_released_ = true;
  held_cv_.notify_all();
}

int FaultyFileOps::FSyncDir(int dirfd) {
  if (const int e = Check(FsOp::kFSyncDir); e < 0) return e;
  {
    std::unique_lock lock(mu_);
    if (hold_next_dir_sync_) {
      hold_next_dir_sync_ = false;
      dir_sync_held_ = true;
      held_cv_.notify_all();
      held_cv_.wait_for(lock, std::chrono::seconds(60), [&] { return dir_sync_released_; });
    }
  }
  return real_.FSyncDir(dirfd);
}

int FaultyFileOps::RenameNoReplace(int dirfd, const char* from, const char* to) {
  if (const int e = Check(FsOp::kRename); e < 0) return e;
  return real_.RenameNoReplace(dirfd, from, to);
}

int FaultyFileOps::UnlinkAt(int dirfd, const char* name, int flags) {
  if (const int e = Check(FsOp::kUnlink); e < 0) return e;
  return real_.UnlinkAt(dirfd, name, flags);
}

int FaultyFileOps::FTruncate(int fd, uint64_t length) {
  if (const int e = Check(FsOp::kFTruncate); e < 0) return e;
  return real_.FTruncate(fd, length);
}

int FaultyFileOps::FStatFs(int fd, struct statfs* out) {
  const int rc = real_.FStatFs(fd, out);
  std::lock_guard lock(mu_);
  if (rc == 0 && reported_free_bytes_ >= 0) {
    const uint64_t block_bytes = out->f_frsize != 0 ? out->f_frsize : out->f_bsize;
    out->f_bavail = out->f_bfree = static_cast<uint64_t>(reported_free_bytes_) / block_bytes;
  }
  return rc;
}

void FaultyFileOps::ReportFreeBytes(uint64_t free_bytes) {
  std::lock_guard lock(mu_);
  reported_free_bytes_ = static_cast<int64_t>(free_bytes);
}

int FaultyFileOps::FAllocate(int fd, uint64_t length) {
  if (const int e = Check(FsOp::kFAllocate); e < 0) return e;
  return FileOps::FAllocate(fd, length);
}

void FaultyBackend::Fail(IoKind kind, int nth, int64_t result) {
  std::lock_guard lock(mu_);
  rules_.push_back({kind, (kind == IoKind::kRead ? reads_ : writes_) + nth, result});
}

void FaultyBackend::CloseGate(bool writes) {
  std::lock_guard lock(mu_);
  gate_closed_ = true;
  gate_writes_ = writes;
}

void FaultyBackend::OpenGate() {
  std::deque<IoRequest> held;
  {
    std::lock_guard lock(mu_);
    gate_closed_ = false;
    held.swap(held_);
  }
  for (const IoRequest& r : held) inner_->Submit(r);
}

int FaultyBackend::held_reads() {
  std::lock_guard lock(mu_);
  return static_cast<int>(held_.size());
}

void FaultyBackend::Submit(const IoRequest& request) {
  std::unique_lock lock(mu_);
  const int n = request.kind == IoKind::kRead ? ++reads_ : ++writes_;
  for (const Rule& r : rules_) {
    if (r.kind == request.kind && r.nth == n) {
      // Complete on another thread: `done` must never run inside Submit.
      const int64_t result = r.result;
      failers_.emplace_back([request, result] { request.done(request.ctx, result); });
      return;
    }
  }
  if (gate_closed_ && (request.kind == IoKind::kRead || gate_writes_)) {
    held_.push_back(request);
    return;
  }
  lock.unlock();
  inner_->Submit(request);
}

void FaultyBackend::Shutdown() {
  OpenGate();
  std::deque<std::thread> failers;
  {
    std::lock_guard lock(mu_);
    failers.swap(failers_);
  }
  for (std::thread& t : failers) t.join();
  inner_->Shutdown();
}

}  // namespace tier::disk::test
