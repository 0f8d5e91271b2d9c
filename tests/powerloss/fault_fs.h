// fault_fs.h -- the fault-injecting filesystem: a FUSE mount (libfuse3, served by threads of the
// process that mounts it) passing every call through to a real directory, the "backing", while it
// records what each call would leave on a disk after a power loss (fs_model.h). A cut stops it:
// the cutting request and every later one wait, answered by nothing, as if the machine had lost
// power. Once the processes using it are dead (the test kills them), PowerLoss rebuilds the
// backing as the model says a disk would hold it, and a new epoch begins with that as durable.
//
// What it refuses (EINVAL/EPERM): O_DIRECT (so the disk provider's probe falls back to buffered
// I/O, as on most FUSE filesystems), symbolic and hard links, device nodes, fallocate modes other
// than 0, RENAME_EXCHANGE. The mount uses direct_io and zero attribute/entry timeouts: no kernel
// cache can outlive a power loss.
//
// Threads: every method may be called from any thread of the mounting process; none may be
// called from a process that uses the mount while it is cut (it would wait for itself).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fs_model.h"

struct fuse;

namespace tier::powerloss {

struct FaultFsHandle;
class FaultFs {
 public:
  // Mounts `mountpoint` (an empty directory) as a view of `backing` (a directory). What `backing`
  // holds now is the first epoch's durable state. nullptr with `*error` set when it cannot.
  static std::unique_ptr<FaultFs> Mount(const std::string& backing, const std::string& mountpoint,
                                        std::string* error);
  // Answers every waiting request with EIO and unmounts (lazily: never blocks on a busy mount).
  ~FaultFs();
  FaultFs(const FaultFs&) = delete;
  FaultFs& operator=(const FaultFs&) = delete;

  // The `nth` mutating request from now (1-based; writes, truncates, fallocates, chmods, syncs,
  // creates, mkdirs, unlinks, rmdirs, renames) is not applied: the filesystem stops there.
  void ArmCut(uint64_t nth);
  // Stops now: the next request of any kind waits.
  void CutNow();
  // Waits until the filesystem has stopped (armed cut reached). False after `timeout`.
  bool WaitForCut(std::chrono::milliseconds timeout);
  bool is_cut() const;
  // After a cut: every waiting and every new request is answered EIO (call it once the processes
  // using the mount are killed, before waiting for them to exit).
  void Drain();

  struct PowerLossResult {
    FsImage image;            // what the backing holds now
    size_t cut_ops = 0;       // operations logged before the cut
    size_t pending_ops = 0;   // of those, not durable
    std::string description;  // DescribeFates
    std::string pending;      // ListPending
    std::string error;        // rebuilding the backing failed ("" when it worked)
  };
  // The power loss itself, after Drain and after the users exited: the backing is rebuilt as
  // CrashState(base, log before the cut, RandomFates(seed, options)); a new epoch begins with it
  // as its durable base and an empty log. Also after a cut that never came (CutNow is implied).
  PowerLossResult PowerLoss(uint64_t seed, const CutOptions& options = {});

  // Puts a label into the log (the test's own record of what had completed, e.g. "spill ok").
  void Mark(const std::string& text);
  // This epoch's durable base and log so far (for enumeration).
  FsImage Base() const;
  std::vector<Op> Log() const;
  // Begins a new epoch whose durable base is the backing as it is (as after a clean shutdown that
  // synced everything), with an empty log. Not while cut. "" or the error.
  std::string SyncAll();

  uint64_t epoch() const;
  const std::string& mountpoint() const { return mountpoint_; }
  const std::string& backing() const { return backing_; }

  // The FUSE callbacks' view of this object (fault_fs.cc).
  class Ops;

 private:
  FaultFs(std::string backing, std::string mountpoint);

  const std::string backing_, mountpoint_;
  struct fuse* fuse_ = nullptr;
  std::thread loop_;

  mutable std::mutex mu_;  // everything below; held across each mutating pass-through call
  std::condition_variable cv_;
  FsImage base_;  // durable at the epoch's start (with data)
  FsImage live_;  // names only: which node each path is now
  std::vector<Op> log_;
  uint64_t epoch_ = 1;
  uint64_t mutations_ = 0;  // mutating requests seen this epoch
  uint64_t arm_at_ = 0;     // 0: no cut armed
  bool cut_ = false;        // stopped: requests wait
  size_t cut_at_ = 0;       // log size at the cut
  bool drained_ = false;    // requests are answered EIO
  bool shutting_down_ = false;
  std::map<uint64_t, std::unique_ptr<FaultFsHandle>> handles_;  // open, by fuse_file_info::fh
};

}  // namespace tier::powerloss
