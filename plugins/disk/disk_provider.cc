// Open/close, the synchronous operations (info, stats, stat, remove, enumerate, plan_restore),
// job dispatch and completion. Spill and restore pipelines are in spill.cc and restore.cc, the
// open-time probe in probe.cc, the directory scan in recovery.cc.
#include "disk_provider.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <ctime>

#include "codec.h"
#include "job.h"
#include "tier/check.h"
#include "tier/provider/restore_plan.h"

namespace tier::disk {

std::string Hex(std::span<const uint8_t> bytes) {
  static const char* const kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

AlignedBuffer AllocateAligned(uint64_t bytes) {
  const uint64_t size = AlignUp(std::max<uint64_t>(bytes, 1), kBlockBytes);
  void* p = std::aligned_alloc(kBlockBytes, size);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, size);
  return AlignedBuffer(static_cast<uint8_t*>(p));
}

AlignedBuffer AllocateAlignedOrNull(uint64_t bytes) {
  try {
    return AllocateAligned(bytes);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}

int OpenRegularFile(FileOps* ops, int dir_fd, const char* name, int flags) {
  const int fd = ops->OpenAt(dir_fd, name, flags | O_NONBLOCK, 0);  // a FIFO would block here
  if (fd < 0) return fd;
  struct stat st {};
  int rc = ops->FStat(fd, &st);
  if (rc == 0 && !S_ISREG(st.st_mode)) rc = -EINVAL;
  // Reads must block again: io_uring turns O_NONBLOCK page-cache misses into EAGAIN.
  const int fl = rc == 0 ? ::fcntl(fd, F_GETFL) : 0;
  if (rc == 0 && (fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)) rc = -errno;
  if (rc < 0) {
    ops->Close(fd);
    return rc;
  }
  return fd;
}

void PostOrRun(WorkQueue* queue, std::function<void()> task) {
  try {
    queue->Post(task);
  } catch (...) {
    task();
  }
}

bool IsBlockAligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kBlockBytes == 0;
}

uint64_t ModificationUnixNs(const struct stat& st) {
  return static_cast<uint64_t>(st.st_mtim.tv_sec) * 1'000'000'000ull +
         static_cast<uint64_t>(st.st_mtim.tv_nsec);
}

uint64_t RealtimeUnixNs() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(now.tv_nsec);
}

namespace {

std::string NamespaceTag(const std::string& namespace_id) {
  const uint64_t h = XXH3_64bits(namespace_id.data(), namespace_id.size());
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(h >> (56 - 8 * i));
  return Hex(bytes);
}

KeyBytes ToKey(const tier_key* key) {
  KeyBytes out;
  std::memcpy(out.data(), key->bytes, TIER_KEY_BYTES);
  return out;
}

}  // namespace

DiskProvider::DiskProvider(const tier_host_services* host, std::string namespace_id,
                           DiskOptions options, Seams seams)
    : host_(host),
      namespace_id_(std::move(namespace_id)),
      namespace_tag_(NamespaceTag(namespace_id_)),
      options_(std::move(options)),
      seams_(std::move(seams)),
      index_(options_.capacity_bytes, kMaxEntries) {
  if (!seams_.file_ops) seams_.file_ops = std::make_shared<PosixFileOps>();
  ops_ = seams_.file_ops.get();
}

Result<std::unique_ptr<DiskProvider>> DiskProvider::Open(const tier_host_services* host,
                                                         std::string namespace_id,
                                                         std::span<const tier_option> options,
                                                         Seams seams) {
  if (namespace_id.size() > kMaxNamespaceBytes) {
    return Status(TIER_INVALID_ARGUMENT,
                  "disk: namespace longer than " + std::to_string(kMaxNamespaceBytes) + " bytes");
  }
  Result<DiskOptions> parsed = ParseOptions(options);
  if (!parsed.ok()) return parsed.status();
  std::unique_ptr<DiskProvider> provider(
      new DiskProvider(host, std::move(namespace_id), parsed.take(), std::move(seams)));
  TIER_RETURN_IF_ERROR(provider->Start());  // on failure the destructor undoes what Start did
  return provider;
}

Status DiskProvider::Start() {
  metrics_ = std::make_unique<DiskMetrics>(host_);
  TIER_RETURN_IF_ERROR(OpenDirectories());

  pool_ = std::make_unique<StagingPool>(options_.staging_buffers(), options_.chunk_bytes);
  codec_ = std::make_unique<WorkQueue>("tier-codec", options_.codec_threads);
  TIER_RETURN_IF_ERROR(SelectIoPath());
  TIER_RETURN_IF_ERROR(CheckDirectPerDirectory());
  if (seams_.wrap_backend) backend_ = seams_.wrap_backend(std::move(backend_));
  if (seams_.probe_read_bytes_per_second > 0) {
    io_path_.probe_read_bytes_per_second = seams_.probe_read_bytes_per_second;
  }
  codec_capacity_ = options_.compression == CompressionMode::kAuto
                        ? MeasureCodecCapacity(options_.zstd_level, options_.codec_threads)
                        : CodecCapacity{};
  estimator_ = std::make_unique<RestoreEstimator>(
      io_path_.probe_read_bytes_per_second, ProbeDecompressBytesPerSecond(options_.zstd_level),
      options_.codec_threads);
  for (uint32_t d = 0; d < dirs_.size(); ++d) TIER_RETURN_IF_ERROR(ScanDirectory(d));
  runners_ = std::make_unique<WorkQueue>("tier-job", kJobRunners);

  metrics_->SetIoPath(io_path_.label);
  PublishUsage();
  LogOpened();
  return Status::Ok();
}

Status DiskProvider::OpenDirectories() {
  const bool several = options_.dirs.size() > 1;
  const std::string note =
      "pid=" + std::to_string(::getpid()) + " namespace='" + namespace_id_.substr(0, 128) + "'";
  std::string skipped;
  for (const std::string& path : options_.dirs) {
    struct stat st {};
    const int exists = ops_->LStatAt(AT_FDCWD, path.c_str(), &st);
    for (const std::unique_ptr<TierDir>& open : dirs_) {
      struct stat held {};
      if (exists == 0 && ops_->FStat(open->handle.dir_fd, &held) == 0 && held.st_dev == st.st_dev &&
          held.st_ino == st.st_ino) {
        return Status(TIER_INVALID_ARGUMENT, "disk: option 'dirs': '" + path +
                                                 "' is the same directory as '" + open->path +
                                                 "' (one directory per device)");
      }
    }
    Result<DirHandle> handle = OpenTierDir(ops_, path, options_.allow_foreign_fs, note);
    if (!handle.ok()) {
      // Refusals (permissions, owner, symlink, foreign filesystem, BUSY) refuse the open as with
      // one directory; with several, one that fails like a missing device is skipped.
      const tier_status code = handle.status().code();
      if (!several || (code != TIER_IO_ERROR && code != TIER_NO_SPACE)) return handle.status();
      ++dirs_unusable_at_open_;
      metrics_->DirUnavailable(DirProblem::kUnusable);
      Log(TIER_LOG_ERROR, "disk: skipping cold-tier directory '" + path +
                              "': " + handle.status().message() +
                              "; the checkpoints it holds are misses, the other directories "
                              "serve theirs");
      skipped += (skipped.empty() ? "" : "; ") + handle.status().message();
      continue;
    }
    if (several && exists == -ENOENT) {
      ++dirs_missing_at_open_;
      metrics_->DirUnavailable(DirProblem::kMissing);
      Log(TIER_LOG_WARN, "disk: cold-tier directory '" + path +
                             "' did not exist: created empty (whatever it held before is a "
                             "miss)");
    }
    auto dir = std::make_unique<TierDir>();
    dir->path = path;
    dir->handle = handle.take();
    dirs_.push_back(std::move(dir));
  }
  if (dirs_.empty()) {
    return Status(TIER_IO_ERROR, "disk: none of the " + std::to_string(options_.dirs.size()) +
                                     " cold-tier directories is usable: " + skipped);
  }
  return Status::Ok();
}

void DiskProvider::LogOpened() {
  char line[896];
  std::snprintf(
      line, sizeof(line),
      "disk: cold tier at '%s' (%s): io_path=%s queue_depth=%u staging=%llu MiB "
      "chunk=%u KiB compression=%s durability=%s capacity=%llu bytes; probe read %.2f "
      "GB/s, codec cores %.2f; adopted %llu checkpoints (%llu bytes), removed %llu temporary "
      "files, "
      "quarantined %llu corrupt files and %llu not written by this server, left %llu of another "
      "namespace alone",
      options_.dir.c_str(), dirs_.front()->handle.fs_name.c_str(), io_path_.label,
      options_.queue_depth, static_cast<unsigned long long>(options_.staging_bytes >> 20),
      options_.chunk_bytes >> 10, CompressionName(options_.compression),
      DurabilityName(options_.durability), static_cast<unsigned long long>(options_.capacity_bytes),
      io_path_.probe_read_bytes_per_second / 1e9, codec_capacity_.parallel_cores,
      static_cast<unsigned long long>(index_.entries()),
      static_cast<unsigned long long>(index_.used_bytes()),
      static_cast<unsigned long long>(temps_removed_at_open_),
      static_cast<unsigned long long>(quarantined_at_open_),
      static_cast<unsigned long long>(not_owned_at_open_),
      static_cast<unsigned long long>(foreign_at_open_));
  Log(TIER_LOG_INFO, line);
  if (options_.dirs.size() > 1) {
    std::string list;
    for (const std::unique_ptr<TierDir>& d : dirs_) {
      list += (list.empty() ? "'" : ", '") + d->path + "' (" + d->handle.fs_name +
              (d->direct || !io_path_.direct ? "" : ", buffered") + ")";
    }
    Log(TIER_LOG_INFO, "disk: " + std::to_string(dirs_.size()) + " of " +
                           std::to_string(options_.dirs.size()) + " directories in use: " + list +
                           "; " + std::to_string(duplicates_at_open_) +
                           " older duplicate checkpoints removed");
  }
  if (index_.used_bytes() > index_.capacity_bytes()) {
    Log(TIER_LOG_WARN, "disk: checkpoints found at open use " +
                           std::to_string(index_.used_bytes()) + " bytes, more than the capacity " +
                           std::to_string(index_.capacity_bytes()) +
                           "; spills are refused until the server removes some");
  }
}

DiskProvider::~DiskProvider() {
  Close();
}

void DiskProvider::Close() {
  if (closed_) return;
  closed_ = true;
  closing_.store(true);
  if (pool_) pool_->Wake();
  {
    std::unique_lock lock(jobs_mu_);
    jobs_cv_.wait(lock, [&] { return running_jobs_ == 0; });
  }
  if (runners_) runners_->Shutdown();
  for (const std::string& line : failures_.Flush(NowNs())) Log(TIER_LOG_WARN, line);
  if (codec_) codec_->Shutdown();
  if (backend_) backend_->Shutdown();
  backend_.reset();
  for (const std::unique_ptr<TierDir>& dir : dirs_) CloseDir(ops_, &dir->handle);
}

uint64_t DiskProvider::NowNs() const {
  if (TIER_HAS_SLOT(host_, tier_host_services, monotonic_ns)) {
    return host_->monotonic_ns(host_->host_context);
  }
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void DiskProvider::Log(tier_log_level level, const std::string& message) const {
  if (TIER_HAS_SLOT(host_, tier_host_services, log)) {
    host_->log(host_->host_context, level, message.c_str());
  }
}

std::string DiskProvider::FileNameFor(const KeyBytes& key) const {
  return namespace_tag_ + "-" + Hex(key) + ".ckpt";
}

std::string DiskProvider::TempNameFor(const KeyBytes& key) {
  return namespace_tag_ + "-" + Hex(key) + "." + std::to_string(temp_seq_.fetch_add(1)) + ".tmp";
}

int DiskProvider::OpenFlags(const TierDir& dir) const {
  return io_path_.direct && dir.direct ? O_DIRECT : 0;
}

void DiskProvider::PublishUsage() {
  uint64_t used, entries;
  {
    std::lock_guard lock(mu_);
    used = index_.used_bytes();
    entries = index_.entries();
  }
  metrics_->SetUsage(used, options_.capacity_bytes, entries);
}

Status DiskProvider::Info(tier_info* out) {
  if (out == nullptr) return Status(TIER_INVALID_ARGUMENT, "disk: info: NULL out");
  if (TIER_HAS_FIELD(out, tier_info, capabilities)) {
    out->capabilities =
        TIER_CAP_PERSISTENT | TIER_CAP_CHECKSUMS |
        (options_.compression != CompressionMode::kOff ? uint32_t{TIER_CAP_COMPRESSION} : 0u);
  }
  if (TIER_HAS_FIELD(out, tier_info, name)) out->name = "disk";
  if (TIER_HAS_FIELD(out, tier_info, version)) out->version = "0.1.0";
  if (TIER_HAS_FIELD(out, tier_info, io_path)) out->io_path = io_path_.label;
  if (TIER_HAS_FIELD(out, tier_info, buffer_alignment)) out->buffer_alignment = 1;
  if (TIER_HAS_FIELD(out, tier_info, max_inflight_ops)) out->max_inflight_ops = kMaxInflightOps;
  if (TIER_HAS_FIELD(out, tier_info, reserved)) out->reserved = 0;
  return Status::Ok();
}

Status DiskProvider::Stats(tier_stats* out) {
  if (out == nullptr) return Status(TIER_INVALID_ARGUMENT, "disk: stats: NULL out");
  std::lock_guard lock(mu_);
  if (TIER_HAS_FIELD(out, tier_stats, reserved)) out->reserved = 0;
  if (TIER_HAS_FIELD(out, tier_stats, capacity_bytes))
    out->capacity_bytes = index_.capacity_bytes();
  if (TIER_HAS_FIELD(out, tier_stats, used_bytes)) out->used_bytes = index_.used_bytes();
  if (TIER_HAS_FIELD(out, tier_stats, entries)) out->entries = index_.entries();
  if (TIER_HAS_FIELD(out, tier_stats, inflight_ops)) out->inflight_ops = inflight_ops_.load();
  return Status::Ok();
}

Status DiskProvider::Stat(const tier_key* key, tier_stat_result* out, tier_segment_info* segments,
                          uint32_t segment_capacity) {
  if (key == nullptr || out == nullptr || (segment_capacity > 0 && segments == nullptr)) {
    return Status(TIER_INVALID_ARGUMENT, "disk: stat: NULL key, out or segments");
  }
  std::shared_ptr<Entry> entry;
  {
    std::lock_guard lock(mu_);
    entry = index_.Find(ToKey(key));
  }
  if (!entry) return Status(TIER_NOT_FOUND, "disk: stat: no checkpoint with this key");
  if (TIER_HAS_FIELD(out, tier_stat_result, segment_count)) {
    out->segment_count = static_cast<uint32_t>(entry->segments.size());
  }
  if (TIER_HAS_FIELD(out, tier_stat_result, logical_bytes))
    out->logical_bytes = entry->logical_bytes;
  if (TIER_HAS_FIELD(out, tier_stat_result, stored_bytes)) out->stored_bytes = entry->stored_bytes;
  if (TIER_HAS_FIELD(out, tier_stat_result, estimated_restore_ns)) {
    out->estimated_restore_ns =
        estimator_->EstimateNs(entry->stored_bytes, entry->zstd_logical_bytes);
  }
  const size_t n = std::min<size_t>(segment_capacity, entry->segments.size());
  for (size_t i = 0; i < n; ++i) segments[i] = entry->segments[i];
  return Status::Ok();
}

Status DiskProvider::Remove(const tier_key* key) {
  if (key == nullptr) {
    metrics_->Remove(TIER_INVALID_ARGUMENT);
    return Status(TIER_INVALID_ARGUMENT, "disk: remove: NULL key");
  }
  const KeyBytes k = ToKey(key);
  Status status;
  std::shared_ptr<Entry> entry;
  TierDir* dir = nullptr;
  {
    std::lock_guard lock(mu_);
    entry = index_.Find(k);
    if (!entry) {
      status = Status(TIER_NOT_FOUND, "disk: remove: no checkpoint with this key");
    } else {
      // Unlink first: a restore already accepted holds its own descriptor and keeps reading; the
      // budget is released when it unpins. This remove pins it too, until the unlink is durable:
      // a spill taking the bytes earlier could leave the directory over capacity after a power
      // loss brings the unlinked file back.
      dir = &DirOf(entry->dir);
      const int rc = ops_->UnlinkAt(dir->handle.dir_fd, entry->file_name.c_str(), 0);
      if (rc < 0 && rc != -ENOENT) {
        status = ErrnoStatus(-rc, "remove: unlink '" + entry->file_name + "'");
      } else {
        index_.Pin(entry.get());
        index_.Detach(k);
      }
    }
  }
  // Under durability=fdatasync a remove that returned OK stays removed after a power loss too.
  // The unlink has happened either way; a failed directory sync is logged, not returned, since
  // the checkpoint is gone from the index and a resurrected file is whole and verified at open.
  if (status.ok() && options_.durability == Durability::kFdatasync) {
    if (const int rc = ops_->FSyncDir(dir->handle.dir_fd); rc < 0) {
      Log(TIER_LOG_WARN, "disk: remove: fsync directory '" + dir->path +
                             "': " + Status::ErrnoText(-rc) +
                             " (the removed checkpoint may reappear after a "
                             "power loss)");
    }
  }
  if (status.ok()) {
    std::lock_guard lock(mu_);
    index_.Unpin(entry.get());  // the bytes are released here unless a restore still reads it
  }
  metrics_->Remove(status.code());
  if (status.ok()) {
    dir->filesystem_full.store(false);  // space came back: the next spill finds out for itself
    PublishUsage();
  }
  return status;
}

Status DiskProvider::Enumerate(tier_enumerate_fn fn, void* user_data) {
  if (fn == nullptr) return Status(TIER_INVALID_ARGUMENT, "disk: enumerate: NULL callback");
  std::vector<std::shared_ptr<Entry>> entries;
  {
    std::lock_guard lock(mu_);
    entries = index_.Snapshot();
  }
  for (const std::shared_ptr<Entry>& e : entries) {
    tier_entry out{};
    out.struct_size = sizeof(tier_entry);
    out.segment_count = static_cast<uint32_t>(e->segments.size());
    std::memcpy(out.key.bytes, e->key.data(), TIER_KEY_BYTES);
    out.logical_bytes = e->logical_bytes;
    out.stored_bytes = e->stored_bytes;
    out.segments = e->segments.data();
    bool has_manifest = false;
    for (const tier_segment_info& s : e->segments) has_manifest |= s.kind == TIER_SEGMENT_MANIFEST;
    static const uint8_t kEmpty = 0;
    out.manifest = has_manifest ? (e->manifest.empty() ? &kEmpty : e->manifest.data()) : nullptr;
    out.manifest_bytes = has_manifest ? e->manifest.size() : 0;
    out.created_unix_ns = e->created_unix_ns;
    out.last_used_unix_ns = e->last_used_unix_ns.load();
    if (fn(user_data, &out) != 0) break;
  }
  return Status::Ok();
}

Status DiskProvider::PlanRestore(const tier_key* key, uint64_t predicted_prefill_ns,
                                 tier_plan* out) {
  if (key == nullptr || out == nullptr) {
    return Status(TIER_INVALID_ARGUMENT, "disk: plan_restore: NULL key or out");
  }
  std::shared_ptr<Entry> entry;
  bool corrupt = false;
  {
    std::lock_guard lock(mu_);
    entry = index_.Find(ToKey(key));
    corrupt = !entry && index_.WasCorrupt(ToKey(key));
  }
  const provider::RestorePlan plan =
      entry ? provider::PlanStored(
                  entry->stored_bytes,
                  estimator_->EstimateNs(entry->stored_bytes, entry->zstd_logical_bytes),
                  predicted_prefill_ns, inflight_ops_.load() >= kMaxInflightOps)
            : provider::PlanSkip(corrupt ? TIER_REASON_CORRUPT : TIER_REASON_MISS);
  provider::WritePlan(plan, out);
  metrics_->Decision(plan.decision, plan.reason);
  return Status::Ok();
}

Status DiskProvider::Probe(const tier_key* keys, uint32_t key_count, uint8_t* found) {
  if (keys == nullptr || found == nullptr) {
    return Status(TIER_INVALID_ARGUMENT, "disk: probe: NULL keys or found");
  }
  if (key_count == 0 || key_count > TIER_PROBE_MAX_KEYS) {
    return Status(TIER_INVALID_ARGUMENT, "disk: probe takes 1 to " +
                                             std::to_string(TIER_PROBE_MAX_KEYS) + " keys, got " +
                                             std::to_string(key_count));
  }
  std::lock_guard lock(mu_);
  for (uint32_t i = 0; i < key_count; ++i) found[i] = index_.Contains(ToKey(&keys[i])) ? 1 : 0;
  return Status::Ok();
}

bool DiskProvider::QueueAccepted(std::unique_ptr<Job> job,
                                 const std::function<void(Job&)>& release) {
  {
    std::lock_guard lock(jobs_mu_);
    ++running_jobs_;
  }
  job->accepted_ns = NowNs();
  Job* raw = job.release();
  try {
    runners_->Post([this, raw] { RunJob(raw); });
    return true;
  } catch (...) {
    release(*raw);
    delete raw;
    inflight_ops_.fetch_sub(1);
    std::lock_guard lock(jobs_mu_);
    if (--running_jobs_ == 0) jobs_cv_.notify_all();
    return false;
  }
}

void DiskProvider::RunJob(Job* job) {
  const char* what = job->type == Job::Type::kSpill ? "spill" : "restore";
  JobOutcome outcome;
  // The pipelines give back what they hold through scope guards; an exception (out of memory)
  // reaches here with everything released and becomes the job's status.
  try {
    outcome = job->type == Job::Type::kSpill ? RunSpill(job) : RunRestore(job);
  } catch (const std::bad_alloc&) {
    outcome = JobOutcome{Status::Internal(std::string("disk: ") + what + ": out of memory")};
  } catch (const std::exception& e) {
    outcome = JobOutcome{Status::Internal(std::string("disk: ") + what + ": " + e.what())};
  }
  LogOutcome(*job, outcome);
  Complete(job, outcome);
}

void DiskProvider::LogOutcome(const Job& job, const JobOutcome& outcome) {
  const std::string what = job.type == Job::Type::kSpill ? "spill" : "restore";
  const Status& status = outcome.status;
  if (status.ok()) {
    for (const std::string& line : failures_.Succeeded(what, NowNs())) Log(TIER_LOG_INFO, line);
    return;
  }
  if (status.code() == TIER_CANCELLED || outcome.logged) return;
  if (status.code() == TIER_DATA_LOSS) {
    Log(TIER_LOG_ERROR, status.message());  // each one: a checkpoint is gone
    return;
  }
  const std::string line = failures_.Failed(what, status.code(), status.message(), NowNs());
  if (!line.empty()) Log(TIER_LOG_WARN, line);
}

void DiskProvider::Complete(Job* job, const JobOutcome& outcome) {
  const Status& status = outcome.status;
  const uint64_t duration_ns = NowNs() - job->accepted_ns;
  const bool ok = status.ok();
  if (job->type == Job::Type::kSpill) {
    metrics_->Spill(status.code());
    if (ok) {
      metrics_->SpillBytes(outcome.logical_bytes, outcome.stored_bytes);
      metrics_->SpillSeconds(duration_ns / 1e9);
    }
  } else {
    metrics_->Restore(status.code());
    if (ok) {
      metrics_->RestoreBytes(outcome.logical_bytes, outcome.stored_bytes);
      metrics_->RestoreSeconds(duration_ns / 1e9);
    }
  }
  tier_completion completion{};
  completion.struct_size = sizeof(completion);
  completion.status = status.code();
  completion.message = status.message().c_str();
  completion.logical_bytes = ok ? outcome.logical_bytes : 0;
  completion.stored_bytes = ok ? outcome.stored_bytes : 0;
  completion.duration_ns = duration_ns;
  const tier_done_fn done = job->done;
  void* const user_data = job->user_data;
  delete job;
  inflight_ops_.fetch_sub(1);
  done(user_data, &completion);  // no provider lock held
  std::lock_guard lock(jobs_mu_);
  TIER_CHECK(running_jobs_ > 0);
  if (--running_jobs_ == 0) jobs_cv_.notify_all();
}

int DiskProvider::MoveToQuarantine(const TierDir& dir, const std::string& file_name,
                                   std::string* target) {
  *target = std::string(kQuarantineDirName) + "/" + file_name + "." +
            std::to_string(static_cast<unsigned long long>(::time(nullptr))) + "." +
            std::to_string(quarantine_seq_.fetch_add(1));
  return ops_->RenameNoReplace(dir.handle.dir_fd, file_name.c_str(), target->c_str());
}

void DiskProvider::QuarantineCorrupt(const TierDir& dir, const std::string& file_name,
                                     const std::string& why, DataLossWhere where) {
  std::string target;
  const int rc = MoveToQuarantine(dir, file_name, &target);
  if (rc == 0) {
    Log(TIER_LOG_ERROR, "disk: checkpoint '" + dir.path + "/" + file_name + "' is corrupt (" + why +
                            "); moved to '" + target + "' and never served");
  } else {
    const int unlink_rc = ops_->UnlinkAt(dir.handle.dir_fd, file_name.c_str(), 0);
    Log(TIER_LOG_ERROR, "disk: checkpoint '" + dir.path + "/" + file_name + "' is corrupt (" + why +
                            "); could not move it aside (" + Status::ErrnoText(-rc) + "), " +
                            (unlink_rc == 0 ? "deleted it"
                                            : "could not delete it either (" +
                                                  Status::ErrnoText(-unlink_rc) + ")"));
  }
  metrics_->DataLoss(where);
  metrics_->Quarantined(QuarantineReason::kCorrupt);
}

void DiskProvider::SetAside(const TierDir& dir, const std::string& file_name,
                            const std::string& what, QuarantineReason reason) {
  std::string target;
  const int rc = MoveToQuarantine(dir, file_name, &target);
  const std::string where = "'" + dir.path + "/" + file_name + "'";
  if (rc == 0) {
    Log(TIER_LOG_WARN, "disk: " + where + " " + what + "; moved to '" + target + "'");
  } else {
    // A directory cannot be unlinked; an empty one can be removed.
    int unlink_rc = ops_->UnlinkAt(dir.handle.dir_fd, file_name.c_str(), 0);
    if (unlink_rc == -EISDIR)
      unlink_rc = ops_->UnlinkAt(dir.handle.dir_fd, file_name.c_str(), AT_REMOVEDIR);
    Log(TIER_LOG_WARN, "disk: " + where + " " + what + "; could not move it aside (" +
                           Status::ErrnoText(-rc) + "), " +
                           (unlink_rc == 0 ? "deleted it"
                                           : "could not delete it either (" +
                                                 Status::ErrnoText(-unlink_rc) + ")"));
  }
  metrics_->Quarantined(reason);
}

std::string DiskProvider::OwnershipProblem(const struct stat& st) {
  if (st.st_uid != ::geteuid()) {
    return "is owned by uid " + std::to_string(st.st_uid) + ", not by this server (uid " +
           std::to_string(::geteuid()) + ")";
  }
  if ((st.st_mode & 07777) != 0600) {
    char mode[16];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return std::string("has mode ") + mode + ", not the 0600 this server writes";
  }
  return "";
}

}  // namespace tier::disk
