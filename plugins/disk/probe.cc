// The open-time probe: chooses the I/O path (io_uring or threads, O_DIRECT or buffered) by
// actually writing and reading a few MiB in the tier directory, and seeds the restore estimate
// with the measured read bandwidth. Falls back loudly: every refused path is logged.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "job.h"

namespace tier::disk {
namespace {

constexpr uint32_t kProbeBlocks = 16;  // in flight at once: enough to see bandwidth, not latency
constexpr uint64_t kProbeBlockBytes = 1u << 20;

struct Batch {
  std::mutex mu;
  std::condition_variable cv;
  uint32_t left = 0;
  int64_t error = 0;  // first negative result or short count marker
};

// Runs one I/O of `length_bytes` per buffer, buffers[i] at i * length_bytes, in parallel, and
// waits. Returns 0 or the first error (-errno, -EIO for a short transfer).
int64_t RunBatch(IoBackend* backend, IoKind kind, int fd, const std::vector<char*>& buffers,
                 uint64_t length_bytes) {
  Batch batch;
  batch.left = static_cast<uint32_t>(buffers.size());
  struct Ctx {
    Batch* batch;
    uint64_t length_bytes;
  };
  std::vector<Ctx> ctx(buffers.size(), Ctx{&batch, length_bytes});
  for (size_t i = 0; i < buffers.size(); ++i) {
    backend->Submit(IoRequest{kind, fd, buffers[i], length_bytes, i * length_bytes,
                              [](void* c, int64_t result) {
                                auto* x = static_cast<Ctx*>(c);
                                std::lock_guard lock(x->batch->mu);
                                if (result < 0 && x->batch->error == 0) x->batch->error = result;
                                if (result >= 0 &&
                                    static_cast<uint64_t>(result) != x->length_bytes &&
                                    x->batch->error == 0) {
                                  x->batch->error = -EIO;
                                }
                                if (--x->batch->left == 0) x->batch->cv.notify_all();
                              },
                              &ctx[i]});
  }
  std::unique_lock lock(batch.mu);
  batch.cv.wait(lock, [&] { return batch.left == 0; });
  return batch.error;
}

}  // namespace

Status DiskProvider::RunProbe(IoBackend* backend, bool direct, double* read_bytes_per_second,
                              bool* direct_refused) {
  *direct_refused = false;
  const std::string name = ".probe-" + std::to_string(::getpid()) + ".tmp";
  const int dir_fd = dirs_.front()->handle.dir_fd;  // the probe runs in the first directory
  ops_->UnlinkAt(dir_fd, name.c_str(), 0);
  const int fd = ops_->OpenAt(
      dir_fd, name.c_str(),
      O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | (direct ? O_DIRECT : 0), 0600);
  if (fd < 0) {
    *direct_refused = direct && fd == -EINVAL;
    return ErrnoStatus(-fd, std::string("probe: open with") + (direct ? "" : "out") + " O_DIRECT");
  }
  const uint64_t block_bytes = std::min<uint64_t>(kProbeBlockBytes, options_.chunk_bytes);
  const uint32_t blocks = std::min<uint32_t>({kProbeBlocks, pool_->count(), options_.queue_depth});
  std::vector<char*> buffers;
  for (uint32_t i = 0; i < blocks; ++i) {
    buffers.push_back(pool_->TryAcquire());
    for (uint64_t j = 0; j < block_bytes; ++j)
      buffers.back()[j] = static_cast<char>((i * 131 + j * 7) & 0xff);
  }
  Status status;
  int64_t rc = RunBatch(backend, IoKind::kWrite, fd, buffers, block_bytes);
  if (rc < 0) {
    *direct_refused = direct && rc == -EINVAL;
    status = ErrnoStatus(static_cast<int>(-rc), "probe: write");
  }
  if (status.ok()) {
    for (char* b : buffers) std::memset(b, 0, block_bytes);
    const auto t0 = std::chrono::steady_clock::now();
    rc = RunBatch(backend, IoKind::kRead, fd, buffers, block_bytes);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rc < 0) {
      *direct_refused = direct && rc == -EINVAL;
      status = ErrnoStatus(static_cast<int>(-rc), "probe: read");
    } else {
      for (uint32_t i = 0; i < blocks && status.ok(); ++i) {
        for (uint64_t j = 0; j < block_bytes; ++j) {
          if (buffers[i][j] != static_cast<char>((i * 131 + j * 7) & 0xff)) {
            status = Status(TIER_IO_ERROR, "disk: probe: read back different bytes");
            break;
          }
        }
      }
      *read_bytes_per_second = seconds > 0 ? blocks * block_bytes / seconds : 1e9;
    }
  }
  for (char* b : buffers) pool_->Release(b);
  ops_->Close(fd);
  ops_->UnlinkAt(dir_fd, name.c_str(), 0);
  return status;
}

// The probe ran in the first directory. Another directory on a filesystem without O_DIRECT
// (tmpfs among disks) is read and written buffered: the same aligned I/Os, through the page cache.
Status DiskProvider::CheckDirectPerDirectory() {
  for (size_t i = 0; i < dirs_.size(); ++i) {
    TierDir& dir = *dirs_[i];
    dir.direct = io_path_.direct;
    if (!io_path_.direct || i == 0) continue;
    const std::string name = ".probe-" + std::to_string(::getpid()) + ".tmp";
    const int dir_fd = dir.handle.dir_fd;
    ops_->UnlinkAt(dir_fd, name.c_str(), 0);
    const int fd = ops_->OpenAt(
        dir_fd, name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_DIRECT, 0600);
    if (fd >= 0) {
      ops_->Close(fd);
      ops_->UnlinkAt(dir_fd, name.c_str(), 0);
    } else if (fd == -EINVAL) {
      if (options_.direct_io == DirectIoMode::kOn) {
        return Status(TIER_UNSUPPORTED,
                      "disk: option 'direct_io=on' but O_DIRECT does not work in '" + dir.path +
                          "' (" + dir.handle.fs_name + ")");
      }
      dir.direct = false;
      Log(TIER_LOG_WARN, "disk: O_DIRECT does not work in '" + dir.path + "' (" +
                             dir.handle.fs_name + "): its files are read and written buffered");
    }
  }
  return Status::Ok();
}

void DiskProvider::UseIoPath(std::unique_ptr<IoBackend> backend, bool direct,
                             double read_bytes_per_second, const std::string& failures) {
  io_path_.io_uring = std::string(backend->name()) == "io_uring";
  io_path_.direct = direct;
  io_path_.label = io_path_.io_uring
                       ? (direct ? TIER_IO_PATH_IO_URING_DIRECT : TIER_IO_PATH_IO_URING_BUFFERED)
                       : (direct ? TIER_IO_PATH_THREADS_DIRECT : TIER_IO_PATH_THREADS_BUFFERED);
  // Buffered reads of a file just written come from the page cache: do not believe them.
  io_path_.probe_read_bytes_per_second =
      direct ? read_bytes_per_second : std::min(read_bytes_per_second, 1e9);
  backend_ = std::move(backend);
  if (!failures.empty()) {
    Log(TIER_LOG_WARN, "disk: fell back to " + std::string(io_path_.label) + " after: " + failures);
  }
}

// A full filesystem says nothing about the I/O path. Refusing to open would make every checkpoint
// already stored here unreachable after a restart on a full disk; open instead on the buffered
// path (it works on every local filesystem), untested: restores work, spills answer NO_SPACE until
// space is freed, and the next open probes again.
void DiskProvider::UseUnprobedPathOnFullFilesystem(const std::string& failures) {
  std::string why;
  backend_ = seams_.disable_io_uring ? nullptr : MakeIoUringBackend(options_.queue_depth, &why);
  if (backend_) backend_->RegisterBuffer(pool_->base(), pool_->total_bytes());
  if (!backend_) backend_ = MakeThreadBackend(options_.io_threads, ops_);
  io_path_.io_uring = std::string(backend_->name()) == "io_uring";
  io_path_.direct = false;
  io_path_.label =
      io_path_.io_uring ? TIER_IO_PATH_IO_URING_BUFFERED : TIER_IO_PATH_THREADS_BUFFERED;
  io_path_.probe_read_bytes_per_second = 0.5e9;  // a guess until restores measure it
  dirs_.front()->filesystem_full.store(true);
  Log(TIER_LOG_WARN, "disk: the filesystem of '" + dirs_.front()->path + "' is full (" + failures +
                         "); using " + io_path_.label +
                         " without a probe; spills answer no_space until space is freed");
}

Status DiskProvider::SelectIoPath() {
  std::string uring_why;
  std::unique_ptr<IoBackend> uring;
  if (seams_.disable_io_uring) {
    uring_why = "disabled by the caller";
  } else {
    uring = MakeIoUringBackend(options_.queue_depth, &uring_why);
  }
  if (uring)
    uring->RegisterBuffer(pool_->base(), pool_->total_bytes());
  else
    Log(TIER_LOG_WARN, "disk: io_uring unavailable (" + uring_why + "); using a thread pool");

  bool direct_refused_by_fs = false;
  bool only_no_space = true;  // every probe failed for lack of space, none for the path itself
  std::string failures;
  for (int use_uring = uring ? 1 : 0; use_uring >= 0; --use_uring) {
    std::unique_ptr<IoBackend> backend =
        use_uring ? std::move(uring) : MakeThreadBackend(options_.io_threads, ops_);
    for (int direct = 1; direct >= 0; --direct) {
      if (direct && (options_.direct_io == DirectIoMode::kOff || direct_refused_by_fs)) continue;
      if (!direct && options_.direct_io == DirectIoMode::kOn) continue;
      double read_bytes_per_second = 0;
      bool direct_refused = false;
      const Status status =
          RunProbe(backend.get(), direct != 0, &read_bytes_per_second, &direct_refused);
      if (status.ok()) {
        UseIoPath(std::move(backend), direct != 0, read_bytes_per_second, failures);
        return Status::Ok();
      }
      direct_refused_by_fs |= direct_refused;
      only_no_space &= status.code() == TIER_NO_SPACE;
      failures += std::string(failures.empty() ? "" : "; ") + (use_uring ? "io_uring" : "threads") +
                  (direct ? "+O_DIRECT: " : "+buffered: ") + status.message();
    }
    backend->Shutdown();
  }
  if (only_no_space && !failures.empty() && options_.direct_io != DirectIoMode::kOn) {
    UseUnprobedPathOnFullFilesystem(failures);
    return Status::Ok();
  }
  if (options_.direct_io == DirectIoMode::kOn) {
    return Status(TIER_UNSUPPORTED, "disk: option 'direct_io=on' but O_DIRECT does not work in '" +
                                        options_.dir + "' (" + failures + ")");
  }
  return Status(TIER_IO_ERROR, "disk: no working I/O path in '" + options_.dir + "': " + failures);
}

}  // namespace tier::disk
