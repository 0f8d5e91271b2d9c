// job.h -- internal: one accepted spill or restore, what it ends with, and the window of chunk
// operations a job has in flight. Shared by disk_provider.cc, spill.cc, restore.cc and
// recovery.cc only.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "disk_provider.h"
#include "tier/provider/chunk_window.h"

namespace tier::disk {

struct DiskProvider::Job {
  enum class Type { kSpill, kRestore };
  Type type = Type::kSpill;
  KeyBytes key{};
  std::vector<tier_segment> segments;  // the caller's table; data borrowed until completion
  tier_done_fn done = nullptr;
  void* user_data = nullptr;
  uint64_t accepted_ns = 0;
  uint64_t worst_case_bytes = 0;  // spill: the budget reserved at acceptance
  uint32_t dir = 0;               // spill: the directory chosen at acceptance (restore: entry's)
  std::shared_ptr<Entry> entry;   // restore: pinned until completion
  int fd = -1;                    // restore: opened at acceptance, so a remove cannot break it
};

// How a job ended: what its completion reports (byte counts only when ok).
struct DiskProvider::JobOutcome {
  Status status;
  uint64_t logical_bytes = 0;
  uint64_t stored_bytes = 0;
  bool logged = false;  // the failure has had its log line already (a file set aside)
};

// Counts a job's chunk operations in flight and keeps the first error (plugins/kit), and the CPU
// time its chunks spent decompressing. The runner waits on it; I/O and codec threads only signal
// it (End must be the last touch of the window).
struct DiskProvider::ChunkWindow : provider::ChunkWindow {
  std::atomic<uint64_t> decompress_cpu_ns{0};
};

// Aligned heap buffer for headers (not from the staging pool: a header may exceed one chunk).
struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<uint8_t, AlignedFree>;
AlignedBuffer AllocateAligned(uint64_t bytes);        // zeroed; throws std::bad_alloc
AlignedBuffer AllocateAlignedOrNull(uint64_t bytes);  // the same; nullptr when out of memory

// Runs `task` on `queue`, or here when it cannot be queued (out of memory): a chunk's work is
// never dropped, so its window always drains. Runner thread.
void PostOrRun(WorkQueue* queue, std::function<void()> task);

bool IsBlockAligned(const void* p);

// A file's modification time, and the wall clock now, in Unix nanoseconds. Any thread.
uint64_t ModificationUnixNs(const struct stat& st);
uint64_t RealtimeUnixNs();

// Opens an existing checkpoint file for reading without ever blocking: a FIFO or device put under
// a checkpoint's name is refused (-EINVAL) instead of hanging the open-time scan or a restore.
// Returns the fd (blocking mode, as data reads need) or -errno.
int OpenRegularFile(FileOps* ops, int dir_fd, const char* name, int flags);

}  // namespace tier::disk
