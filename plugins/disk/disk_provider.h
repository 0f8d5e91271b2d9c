// disk_provider.h -- the disk cold tier behind the C ABI (entry.cc adapts it). One instance owns a
// locked directory, an I/O backend, a staging pool, job runners, codec workers and the index.
//
// Threads: `kJobRunners` runners each drive one spill or restore at a time (blocking only on the
// staging pool and on their own chunk window); the I/O backend's threads complete I/Os; codec
// workers checksum, compress and decompress chunks. Completions run on a runner thread with no
// provider lock held. Locks: mu_ (index, budget, directory names) is never held across I/O waits,
// codec work or a callback.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <tier/provider/work_queue.h>

#include "dir_guard.h"
#include "errno_status.h"
#include "estimator.h"
#include "failure_log.h"
#include "file_ops.h"
#include "index.h"
#include "io_backend.h"
#include "metrics.h"
#include "options.h"
#include "staging_pool.h"
#include "tier_provider.h"

namespace tier::disk {

using provider::WorkQueue;

// Replaceable parts, for tests (FaultInjection) and benchmarks. Defaults are the real thing.
struct Seams {
  std::shared_ptr<FileOps> file_ops;  // every synchronous file-system call
  // Wraps the I/O backend chosen at open (after the probe). Called once, at open.
  std::function<std::unique_ptr<IoBackend>(std::unique_ptr<IoBackend>)> wrap_backend;
  bool disable_io_uring = false;  // as if io_uring were blocked by seccomp
  // > 0: the read rate (bytes per second) the open probe reports, as if the device read that fast
  // (compression=auto's decision and the restore estimate start from it).
  double probe_read_bytes_per_second = 0;
};

// One cold-tier directory (one per device): its lock and descriptor, and what placement needs.
// Every checkpoint lives whole in one directory; the directories share the budget and the index.
struct TierDir {
  std::string path;
  DirHandle handle;
  bool direct = false;  // files here are opened O_DIRECT (the I/O path's choice, and it works here)
  std::atomic<bool> filesystem_full{false};  // the last spill here failed NO_SPACE
  std::atomic<uint32_t> spills{0};           // accepted spills placed here, not yet finished
  // Failing: kFailingAfterIoErrors spills in a row ended IO_ERROR here. Placement then prefers
  // the other directories until failing_until_ns (steady clock); after it, spills try it again
  // (one more IO_ERROR sets it aside again, one success clears the count).
  std::atomic<uint32_t> io_errors_in_a_row{0};
  std::atomic<int64_t> failing_until_ns{0};
};

// What the open-time probe chose and measured.
struct IoPathInfo {
  bool io_uring = false;
  bool direct = false;
  double probe_read_bytes_per_second = 0;
  const char* label = TIER_IO_PATH_NONE;  // a TIER_IO_PATH_* value
};

class DiskProvider {
 public:
  static constexpr uint32_t kJobRunners = 4;
  static constexpr uint32_t kMaxInflightOps = 128;  // accepted spills + restores
  static constexpr uint64_t kMaxEntries = 1u << 20;

  // Opens an instance (see tier_provider.open). Any thread.
  static Result<std::unique_ptr<DiskProvider>> Open(const tier_host_services* host,
                                                    std::string namespace_id,
                                                    std::span<const tier_option> options,
                                                    Seams seams = {});
  // Close(). Not concurrently with any other call.
  ~DiskProvider();
  // Cancels queued and running work, waits for every completion, releases the directory. Owner
  // thread, once, never inside a completion callback.
  void Close();

  // The ABI operations, same contracts as abi/tier_provider.h (any thread unless stated there).
  Status Info(tier_info* out);
  Status Stats(tier_stats* out);
  Status Stat(const tier_key* key, tier_stat_result* out, tier_segment_info* segments,
              uint32_t segment_capacity);
  Status Spill(const tier_key* key, const tier_segment* segments, uint32_t segment_count,
               tier_done_fn done, void* user_data);
  Status Restore(const tier_key* key, const tier_segment* segments, uint32_t segment_count,
                 tier_done_fn done, void* user_data);
  Status Remove(const tier_key* key);
  Status Enumerate(tier_enumerate_fn fn, void* user_data);
  Status PlanRestore(const tier_key* key, uint64_t predicted_prefill_ns, tier_plan* out);
  // The 1.1 probe: one index lookup per key under one lock, no I/O, no stat result built. Any
  // thread; `keys` and `found` are borrowed for the call.
  Status Probe(const tier_key* keys, uint32_t key_count, uint8_t* found);

  // For tests and logs. Any thread.
  const IoPathInfo& io_path() const { return io_path_; }
  const DiskOptions& options() const { return options_; }
  uint64_t quarantined_at_open() const { return quarantined_at_open_; }
  uint64_t not_owned_at_open() const { return not_owned_at_open_; }
  uint64_t temps_removed_at_open() const { return temps_removed_at_open_; }
  uint64_t foreign_at_open() const { return foreign_at_open_; }
  // The directories in use (those usable at open, in the order given) and how many were not.
  size_t dir_count() const { return dirs_.size(); }
  const std::string& dir_path(size_t i) const { return dirs_[i]->path; }
  uint64_t dirs_unusable_at_open() const { return dirs_unusable_at_open_; }
  uint64_t dirs_missing_at_open() const { return dirs_missing_at_open_; }
  RestoreEstimator& estimator() { return *estimator_; }

  // Internal (job.h, spill.cc, restore.cc); public only so those files can name them.
  struct Job;
  struct JobOutcome;
  struct ChunkWindow;
  class SpillRun;
  class RestoreRun;

 private:
  DiskProvider(const tier_host_services* host, std::string namespace_id, DiskOptions options,
               Seams seams);
  Status Start();  // probe, scan, threads; called by Open
  // dir_guard per directory: opens and locks every directory given. With several, one that
  // cannot be opened (I/O error, not a directory, ...) is skipped: logged, counted, its checkpoints
  // misses; a refusal (permissions, owner, symlink, foreign filesystem, another instance's lock)
  // still refuses the open, naming the directory. Missing directories are created (counted).
  Status OpenDirectories();
  Status CheckDistinctDirectories();
  // After the probe: O_DIRECT per directory (a directory on tmpfs among disks is read buffered).
  Status CheckDirectPerDirectory();
  Status SelectIoPath();  // probe.cc
  Status RunProbe(IoBackend* backend, bool direct, double* read_bytes_per_second,
                  bool* direct_refused);
  void UseIoPath(std::unique_ptr<IoBackend> backend, bool direct, double read_bytes_per_second,
                 const std::string& failures);
  void UseUnprobedPathOnFullFilesystem(const std::string& failures);
  void LogOpened();
  Status ReadHeader(int fd, Header* header, bool* corrupt);  // restore.cc

  // recovery.cc: the open-time scan, one directory entry at a time.
  Status ScanDirectory(uint32_t dir);
  void ScanName(uint32_t dir, const std::string& name);
  void RemoveLeftover(const TierDir& dir, const std::string& name);
  void AdoptCheckpoint(uint32_t dir, const std::string& name, const KeyBytes& key);
  void RejectAtOpen(const TierDir& dir, const std::string& name, const Status& status,
                    bool corrupt);
  // The same key in two directories (a directory came back after its key was spilled again
  // elsewhere): the newer copy stays, the older file is removed. Caller holds mu_.
  bool ResolveDuplicate(uint32_t dir, const std::string& name, const std::shared_ptr<Entry>& entry);

  // spill.cc: after a spill failed NO_SPACE on the filesystem, spills are refused at submit while
  // the filesystem has less free space than their worst case (one fstatfs, no file, no job).
  // Returns why a spill of `worst_case_bytes` is refused, or "". Any thread.
  std::string FilesystemFullRefusal(TierDir& dir, uint64_t worst_case_bytes);
  // Where a spill of `worst_case_bytes` goes: the directory with the fewest spills in flight
  // among those not known full (ties in turn), or why every directory is refused ("").
  std::string ChooseDir(uint64_t worst_case_bytes, uint32_t* dir);
  std::string ChooseDirAmong(uint64_t worst_case_bytes, bool failing_too, uint32_t* dir);
  // After a spill placed in `dir`: counts I/O errors in a row, sets a failing directory aside.
  void NoteSpillOutcome(TierDir& dir, const Status& status);
  static constexpr uint32_t kFailingAfterIoErrors = 3;
  static constexpr int64_t kFailingBackoffNs = 30'000'000'000;

  // Queues a job already counted in inflight_ops_ to the runners. If it cannot be queued (out
  // of memory) the acceptance is undone: `release` gives back what the job holds (pin or
  // reservation), the counters drop, the job is freed and false is returned. Submitting thread.
  bool QueueAccepted(std::unique_ptr<Job> job, const std::function<void(Job&)>& release);
  // Runner thread: runs the job's pipeline, logs its failure (folded by failures_), completes it.
  void RunJob(Job* job);
  JobOutcome RunSpill(Job* job);  // spill.cc
  // Under mu_: the in-flight bound and the budget reservation of an accepted spill (the refusal
  // message without the "disk: spill: " prefix).
  Status AcceptSpill(const Job& job);
  JobOutcome RunRestore(Job* job);  // restore.cc
  // Under mu_: opens the checkpoint file of an accepted restore and pins its entry; a file
  // deleted behind the provider's back drops the entry. Refusals go through `refuse`.
  Status OpenForRestore(Job* job, std::shared_ptr<Entry> entry,
                        const std::function<Status(tier_status, const std::string&)>& refuse);
  void RecordUse(int fd, Entry* entry);
  void DropDamaged(const Job& job, const std::shared_ptr<Entry>& entry, const RestoreRun& run,
                   JobOutcome* outcome);
  void LogOutcome(const Job& job, const JobOutcome& outcome);
  void Complete(Job* job, const JobOutcome& outcome);

  // Moving files aside into quarantine/. Caller holds mu_ (the name must not be reused between
  // the check and the rename). A file that cannot be moved is deleted where it can be. Each logs
  // one line and counts the file in tier_cold_quarantined_total{reason}.
  // A checkpoint that failed verification (also counted in tier_cold_data_loss_total{where}).
  void QuarantineCorrupt(const TierDir& dir, const std::string& file_name, const std::string& why,
                         DataLossWhere where);
  // Anything else not to serve or that blocks a name: `what` says what it is and why.
  void SetAside(const TierDir& dir, const std::string& file_name, const std::string& what,
                QuarantineReason reason);
  // Renames `file_name` into `dir`'s quarantine/ under a name of its own; returns 0 or -errno.
  int MoveToQuarantine(const TierDir& dir, const std::string& file_name, std::string* target);
  // "" when `st` is a file this server wrote (owned by its uid, mode exactly 0600), else why not.
  static std::string OwnershipProblem(const struct stat& st);
  void PublishUsage();  // metrics gauges; takes mu_

  std::string FileNameFor(const KeyBytes& key) const;
  std::string TempNameFor(const KeyBytes& key);
  int OpenFlags(const TierDir& dir) const;  // O_DIRECT when the probe chose it and it works there
  TierDir& DirOf(uint32_t dir) const { return *dirs_[dir]; }
  uint64_t NowNs() const;
  void Log(tier_log_level level, const std::string& message) const;

  const tier_host_services* host_;
  const std::string namespace_id_;
  const std::string namespace_tag_;  // 16 hex digits of XXH3-64(namespace), file-name prefix
  const DiskOptions options_;
  Seams seams_;
  FileOps* ops_ = nullptr;
  std::vector<std::unique_ptr<TierDir>> dirs_;  // usable at open; dirs_[0] holds the probe
  IoPathInfo io_path_;
  std::unique_ptr<StagingPool> pool_;
  std::unique_ptr<IoBackend> backend_;
  std::unique_ptr<WorkQueue> runners_;
  std::unique_ptr<WorkQueue> codec_;
  std::unique_ptr<RestoreEstimator> estimator_;
  CodecCapacity codec_capacity_;  // measured at open
  std::unique_ptr<DiskMetrics> metrics_;
  FailureLog failures_;

  mutable std::mutex mu_;  // guards index_ and directory names (rename/unlink of checkpoints)
  Index index_;

  std::atomic<bool> closing_{false};
  bool closed_ = false;
  std::atomic<uint64_t> inflight_ops_{0};  // accepted, callback not yet started
  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  uint64_t running_jobs_ = 0;  // accepted, callback not yet returned (guarded by jobs_mu_)
  std::atomic<uint64_t> temp_seq_{0};
  std::atomic<uint64_t> quarantine_seq_{0};
  std::atomic<uint32_t> next_dir_{0};  // where placement's ties start, in turn

  uint64_t quarantined_at_open_ = 0;
  uint64_t not_owned_at_open_ = 0;
  uint64_t temps_removed_at_open_ = 0;
  uint64_t foreign_at_open_ = 0;
  uint64_t dirs_unusable_at_open_ = 0;
  uint64_t dirs_missing_at_open_ = 0;
  uint64_t duplicates_at_open_ = 0;
};

// Lowercase hex of `bytes`.
std::string Hex(std::span<const uint8_t> bytes);

}  // namespace tier::disk
