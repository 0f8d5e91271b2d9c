// spill: validation and budget at acceptance; then, on a runner thread (SpillRun), step by step:
// the layout is planned; the temporary file is created (exactly 0600) and preallocated to the
// worst case, so a full filesystem fails here, before any CPU goes into codecs; each segment's
// codec is chosen (compression_policy.h); chunks are checksummed (seeded with their place) and
// maybe compressed on codec threads into staging buffers, and written at 4 KiB-aligned offsets with
// up to queue_depth I/Os in flight; the header is written last; the file is synced as durability
// asks, renamed to its final name (whatever blocks that name is moved aside) and the directory
// synced. Only then is the checkpoint visible. Any failure removes the temporary file (or the
// unsynced final one) and releases the budget.
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>
#include <set>
#include <utility>

#include "codec.h"
#include "compression_policy.h"
#include "job.h"
#include "scope_guard.h"
#include "tier/check.h"

namespace tier::disk {
namespace {

// One chunk on its way to the file: codec thread (checksum, compress or copy), then the I/O.
struct SpillChunk {
  DiskProvider::ChunkWindow* window;
  IoBackend* backend;
  StagingPool* pool;
  const std::string* temp_name;
  int fd;
  const uint8_t* src;
  uint64_t length_bytes;
  uint64_t checksum_seed;  // ChunkSeed of its place
  ChunkRecord* record;
  uint32_t codec;  // the segment's: kCodecRaw or a zstd codec to try on this chunk
  int zstd_level;
  char* staging;  // nullptr: written straight from the caller's buffer
  std::atomic<uint64_t>* next_offset_bytes;
  uint64_t write_bytes = 0;
};

void SpillWriteDone(void* ctx, int64_t result) {
  auto* op = static_cast<SpillChunk*>(ctx);
  DiskProvider::ChunkWindow* window = op->window;
  if (result < 0) {
    window->Fail(ErrnoStatus(static_cast<int>(-result), "write '" + *op->temp_name + "'"));
  } else if (static_cast<uint64_t>(result) != op->write_bytes) {
    window->Fail(Status(TIER_IO_ERROR, "disk: short write to '" + *op->temp_name +
                                           "': " + std::to_string(result) + " of " +
                                           std::to_string(op->write_bytes) + " bytes"));
  }
  if (op->staging != nullptr) op->pool->Release(op->staging);
  delete op;
  window->End();
}

// Into staging: the chunk's zstd frame when it saves at least one 4 KiB block on disk, else its
// bytes; zero-padded to 4 KiB. Returns the stored length and sets *codec.
uint64_t StageChunk(SpillChunk* op, uint32_t* codec) {
  const uint64_t padded_bytes = AlignUp(op->length_bytes, kBlockBytes);
  uint64_t frame_bytes = 0;
  if (IsZstdCodec(op->codec) && padded_bytes > kBlockBytes) {
    frame_bytes = CompressChunkAs(
        op->codec, {op->src, op->length_bytes},
        {reinterpret_cast<uint8_t*>(op->staging), padded_bytes - kBlockBytes}, op->zstd_level);
  }
  uint64_t stored_bytes = op->length_bytes;
  *codec = kCodecRaw;
  if (frame_bytes > 0) {
    *codec = op->codec;
    stored_bytes = frame_bytes;
  } else {
    std::memcpy(op->staging, op->src, op->length_bytes);
  }
  TIER_CHECK(stored_bytes <= padded_bytes);  // a frame is kept only where it fits the staging
  std::memset(op->staging + stored_bytes, 0, AlignUp(stored_bytes, kBlockBytes) - stored_bytes);
  return stored_bytes;
}

// Codec thread: checksum, compress or copy, then submit the write.
void SpillChunkWork(SpillChunk* op) {
  op->record->checksum = Checksum({op->src, op->length_bytes}, op->checksum_seed);
  const void* from = op->src;
  uint64_t stored_bytes = op->length_bytes;
  uint32_t codec = kCodecRaw;
  if (op->staging != nullptr) {
    stored_bytes = StageChunk(op, &codec);
    from = op->staging;
    op->write_bytes = AlignUp(stored_bytes, kBlockBytes);
  } else {
    op->write_bytes = op->length_bytes;  // direct: already a multiple of 4 KiB; buffered: any
  }
  op->record->codec = codec;
  op->record->stored_bytes = static_cast<uint32_t>(stored_bytes);
  op->record->file_offset = op->next_offset_bytes->fetch_add(AlignUp(stored_bytes, kBlockBytes));
  TIER_CHECK(op->record->file_offset % kBlockBytes == 0);
  TIER_CHECK(op->write_bytes >= stored_bytes &&
             op->write_bytes <= AlignUp(stored_bytes, kBlockBytes));
  IoRequest request;
  request.kind = IoKind::kWrite;
  request.fd = op->fd;
  request.buf = const_cast<void*>(from);  // a write only reads it
  request.length_bytes = op->write_bytes;
  request.offset_bytes = op->record->file_offset;
  request.done = SpillWriteDone;
  request.ctx = op;
  op->backend->Submit(request);
}

struct SpillShape {
  uint64_t chunk_count = 0;
  uint64_t manifest_bytes = 0;
  uint64_t data_bytes = 0;  // worst case: every chunk raw, padded to 4 KiB
};

// The caller's segment table: known kinds, no (kind, index) twice, data where there are bytes,
// bounded lengths, at most one manifest. Returns what is wrong, or "".
std::string CheckSpillSegments(const tier_segment* segments, uint32_t segment_count,
                               uint64_t chunk_bytes, SpillShape* shape) {
  std::set<std::pair<uint32_t, uint32_t>> ids;
  uint64_t manifests = 0;
  for (uint32_t i = 0; i < segment_count; ++i) {
    const tier_segment& s = segments[i];
    const std::string where = "segment " + std::to_string(i) + " (kind " + std::to_string(s.kind) +
                              ", index " + std::to_string(s.index) + ")";
    if (s.kind < TIER_SEGMENT_KIND_MIN || s.kind > TIER_SEGMENT_KIND_MAX) {
      return where + ": unknown kind";
    }
    if (!ids.emplace(s.kind, s.index).second) return where + ": (kind, index) given twice";
    if (s.length_bytes > 0 && s.data == nullptr) return where + ": NULL data";
    if (s.length_bytes > (1ull << 50)) return where + ": too long";
    if (s.kind != TIER_SEGMENT_MANIFEST) {
      shape->chunk_count += (s.length_bytes + chunk_bytes - 1) / chunk_bytes;
      shape->data_bytes += AlignUp(s.length_bytes, kBlockBytes);  // chunk_bytes: 4 KiB multiple
      continue;
    }
    if (++manifests > 1) return "more than one manifest segment";
    if (s.length_bytes > TIER_MANIFEST_MAX_BYTES) {
      return where + ": manifest longer than " + std::to_string(TIER_MANIFEST_MAX_BYTES) + " bytes";
    }
    shape->manifest_bytes = s.length_bytes;
  }
  return "";
}

// "a FIFO", "a directory", ...: what stands under `name`, for the log line that moves it aside.
std::string DescribeStuckName(FileOps* ops, int dir_fd, const std::string& name) {
  struct stat st {};
  if (ops->LStatAt(dir_fd, name.c_str(), &st) != 0) return "something";
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
  return "a file this server has not adopted (another namespace, a newer format or a stray)";
}

}  // namespace

// The spill of one job on its runner thread, one step per method. Destroying it gives back what
// the steps took: the descriptor, the temporary file, the published file unless it was kept.
class DiskProvider::SpillRun {
 public:
  SpillRun(DiskProvider& p, Job& job)
      : p_(p),
        job_(job),
        dir_(p.DirOf(job.dir)),
        temp_name_(p.TempNameFor(job.key)),
        final_name_(p.FileNameFor(job.key)) {}
  ~SpillRun();
  SpillRun(const SpillRun&) = delete;
  SpillRun& operator=(const SpillRun&) = delete;

  // Every step; the checkpoint is published when it returns ok.
  Status Run() {
    PlanLayout();
    TIER_RETURN_IF_ERROR(CreateTemp());
    TIER_RETURN_IF_ERROR(Preallocate());
    ChooseCodecs();
    TIER_RETURN_IF_ERROR(WriteChunks());
    TIER_RETURN_IF_ERROR(WriteHeader());
    TIER_RETURN_IF_ERROR(SyncAndClose());
    return Publish();
  }
  // After Run: the index entry of the published checkpoint (may throw std::bad_alloc).
  std::shared_ptr<Entry> MakeIndexEntry() const {
    std::shared_ptr<Entry> entry = MakeEntry(header_, final_name_, last_used_unix_ns_);
    entry->dir = job_.dir;
    return entry;
  }
  // The entry is in the index: the published file stays.
  void KeepPublished() { keep_published_ = true; }
  uint64_t logical_bytes() const { return header_.logical_bytes; }
  uint64_t stored_bytes() const { return header_.file_bytes; }

 private:
  void PlanLayout();
  Status CreateTemp();
  Status Preallocate();
  void ChooseCodecs();
  Status WriteChunks();
  bool SubmitChunk(size_t segment, uint32_t chunk, ChunkWindow* window,
                   const std::function<bool()>& stop);
  Status WriteHeader();
  Status SyncAndClose();
  Status Publish();
  Status RenameIntoPlace();  // caller holds mu_
  std::string Path(const std::string& name) const { return dir_.path + "/" + name; }

  DiskProvider& p_;
  Job& job_;
  TierDir& dir_;  // where this checkpoint goes, whole
  Header header_;
  const std::string temp_name_;
  const std::string final_name_;
  int fd_ = -1;
  bool temp_exists_ = false;
  bool published_ = false;
  bool keep_published_ = false;
  std::atomic<uint64_t> next_offset_bytes_{0};
  uint64_t last_used_unix_ns_ = 0;
};

DiskProvider::SpillRun::~SpillRun() {
  try {
    if (fd_ >= 0) p_.ops_->Close(fd_);
    if (temp_exists_) {
      if (const int rc = p_.ops_->UnlinkAt(dir_.handle.dir_fd, temp_name_.c_str(), 0); rc < 0) {
        p_.Log(TIER_LOG_WARN, "disk: could not remove temporary '" + Path(temp_name_) +
                                  "': " + Status::ErrnoText(-rc) + " (removed at next open)");
      }
    }
    if (published_ && !keep_published_) {
      std::lock_guard lock(p_.mu_);
      if (const int rc = p_.ops_->UnlinkAt(dir_.handle.dir_fd, final_name_.c_str(), 0); rc < 0) {
        p_.Log(TIER_LOG_ERROR, "disk: could not remove unsynced '" + final_name_ + "': " +
                                   Status::ErrnoText(-rc) + " (it is verified again at next open)");
      }
    }
  } catch (...) {
    // Only a log line could not be built (out of memory); the cleanup itself ran.
  }
}

void DiskProvider::SpillRun::PlanLayout() {
  const uint64_t chunk_bytes = p_.options_.chunk_bytes;
  header_.format_version = kFormatVersion;
  header_.chunk_bytes = p_.options_.chunk_bytes;
  header_.key = job_.key;
  header_.namespace_id = p_.namespace_id_;
  header_.created_unix_ns = RealtimeUnixNs();
  uint64_t chunk_total = 0;
  header_.segments.resize(job_.segments.size());
  for (size_t s = 0; s < job_.segments.size(); ++s) {
    const tier_segment& seg = job_.segments[s];
    SegmentRecord& rec = header_.segments[s];
    rec.kind = seg.kind;
    rec.index = seg.index;
    rec.logical_bytes = seg.length_bytes;
    header_.logical_bytes += seg.length_bytes;
    if (seg.kind == TIER_SEGMENT_MANIFEST) {
      rec.codec = kCodecInline;
      const auto* bytes = static_cast<const uint8_t*>(seg.data);
      header_.manifest.assign(bytes, bytes + seg.length_bytes);
      continue;
    }
    rec.codec = kCodecRaw;  // ChooseCodecs decides, once the file has its space
    rec.chunk_count = static_cast<uint32_t>((seg.length_bytes + chunk_bytes - 1) / chunk_bytes);
    rec.first_chunk = chunk_total;
    chunk_total += rec.chunk_count;
  }
  header_.chunks.resize(chunk_total);
  header_.data_offset =
      AlignUp(HeaderContentBytes(header_.namespace_id.size(), header_.segments.size(), chunk_total,
                                 header_.manifest.size()),
              kBlockBytes);
  next_offset_bytes_.store(header_.data_offset);
}

Status DiskProvider::SpillRun::CreateTemp() {
  const int fd = p_.ops_->OpenAt(
      dir_.handle.dir_fd, temp_name_.c_str(),
      O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | p_.OpenFlags(dir_), 0600);
  if (fd < 0) return ErrnoStatus(-fd, "spill: create '" + Path(temp_name_) + "'");
  fd_ = fd;
  temp_exists_ = true;
  // Exactly 0600 whatever the umask: the scan refuses checkpoint files of any other mode.
  if (const int rc = p_.ops_->FChmod(fd_, 0600); rc < 0) {
    return ErrnoStatus(-rc, "spill: chmod 0600 '" + Path(temp_name_) + "'");
  }
  return Status::Ok();
}

Status DiskProvider::SpillRun::Preallocate() {
  // Reserve the worst case up front (the budget already holds it; ftruncate gives back what the
  // chunks did not use): chunk writes then land inside the file instead of extending it, which
  // ext4 would serialize, one direct write at a time. Filesystems without fallocate just write.
  const int rc = p_.ops_->FAllocate(fd_, job_.worst_case_bytes);
  if (rc == -ENOSPC || rc == -EDQUOT) {
    return ErrnoStatus(-rc, "spill: fallocate '" + Path(temp_name_) + "'");
  }
  return Status::Ok();
}

void DiskProvider::SpillRun::ChooseCodecs() {
  for (size_t s = 0; s < job_.segments.size(); ++s) {
    SegmentRecord& rec = header_.segments[s];
    if (rec.codec == kCodecInline) continue;
    const tier_segment& seg = job_.segments[s];
    const CodecChoice choice =
        SegmentCodec({static_cast<const uint8_t*>(seg.data), seg.length_bytes}, p_.options_,
                     *p_.estimator_, p_.codec_capacity_);
    rec.codec = choice.codec;
    p_.metrics_->CodecDecided(choice.decision);
  }
}

Status DiskProvider::SpillRun::WriteChunks() {
  ChunkWindow window;
  ScopeGuard drain([&] { window.WaitIdle(); });  // never leave with chunk operations in flight
  const std::function<bool()> stop = [&] { return p_.closing_.load() || window.failed.load(); };
  for (size_t s = 0; s < job_.segments.size() && !stop(); ++s) {
    const SegmentRecord& rec = header_.segments[s];
    if (rec.codec == kCodecInline) continue;
    for (uint32_t c = 0; c < rec.chunk_count && !stop(); ++c) {
      if (!SubmitChunk(s, c, &window, stop)) break;
    }
  }
  drain.RunNow();
  TIER_RETURN_IF_ERROR(window.error());
  if (p_.closing_.load()) return Status(TIER_CANCELLED, "disk: spill: cancelled by close");
  return Status::Ok();
}

// Hands chunk `c` of segment `s` to a codec thread, with a staging buffer unless it can be
// written straight from the caller's memory. False when the spill stops (cancelled, failed).
bool DiskProvider::SpillRun::SubmitChunk(size_t s, uint32_t c, ChunkWindow* window,
                                         const std::function<bool()>& stop) {
  const tier_segment& seg = job_.segments[s];
  const SegmentRecord& rec = header_.segments[s];
  const uint64_t at_bytes = uint64_t{c} * header_.chunk_bytes;
  const uint8_t* src = static_cast<const uint8_t*>(seg.data) + at_bytes;
  TIER_CHECK(c < rec.chunk_count && at_bytes < seg.length_bytes);
  const uint64_t length_bytes =
      std::min<uint64_t>(header_.chunk_bytes, seg.length_bytes - at_bytes);
  const bool zero_copy =
      rec.codec == kCodecRaw &&
      (!p_.io_path_.direct || (IsBlockAligned(src) && length_bytes % kBlockBytes == 0));
  window->WaitBelow(p_.options_.queue_depth);
  char* staging = nullptr;
  if (!zero_copy && (staging = p_.pool_->Acquire(stop)) == nullptr) return false;
  auto* op = new (std::nothrow)
      SpillChunk{window,
                 p_.backend_.get(),
                 p_.pool_.get(),
                 &temp_name_,
                 fd_,
                 src,
                 length_bytes,
                 ChunkSeed(header_.format_version, header_.key, rec.kind, rec.index, c),
                 &header_.chunks[rec.first_chunk + c],
                 rec.codec,
                 p_.options_.zstd_level,
                 staging,
                 &next_offset_bytes_};
  if (op == nullptr) {
    if (staging != nullptr) p_.pool_->Release(staging);
    window->Fail(Status(TIER_INTERNAL, "disk: spill: out of memory"));
    return false;
  }
  window->Begin();
  PostOrRun(p_.codec_.get(), [op] { SpillChunkWork(op); });
  return true;
}

// Header last: a file whose header does not verify is never served.
Status DiskProvider::SpillRun::WriteHeader() {
  header_.file_bytes = next_offset_bytes_.load();
  uint64_t data_bytes = 0;
  for (SegmentRecord& rec : header_.segments) {
    rec.stored_bytes = 0;
    for (uint32_t c = 0; c < rec.chunk_count; ++c) {
      rec.stored_bytes += AlignUp(header_.chunks[rec.first_chunk + c].stored_bytes, kBlockBytes);
    }
    data_bytes += rec.stored_bytes;
  }
  // Every chunk was written (WriteChunks returned OK): their padded lengths tile the data region.
  TIER_CHECK_MSG(header_.data_offset + data_bytes == header_.file_bytes,
                 "data offset %llu + chunks %llu != file %llu",
                 static_cast<unsigned long long>(header_.data_offset),
                 static_cast<unsigned long long>(data_bytes),
                 static_cast<unsigned long long>(header_.file_bytes));
  AlignedBuffer buffer = AllocateAligned(header_.data_offset);
  EncodeHeader(header_, {buffer.get(), header_.data_offset});
  const int64_t n = SyncIo(p_.backend_.get(), IoRequest{IoKind::kWrite, fd_, buffer.get(),
                                                        header_.data_offset, 0, nullptr, nullptr});
  if (n < 0) {
    return ErrnoStatus(static_cast<int>(-n), "spill: write header of '" + temp_name_ + "'");
  }
  if (static_cast<uint64_t>(n) != header_.data_offset) {
    return Status(TIER_IO_ERROR, "disk: spill: short header write to '" + temp_name_ + "'");
  }
  return Status::Ok();
}

// Gives back the preallocated space the chunks did not use, syncs as durability asks, records the
// file's modification time (its last use) and closes it.
Status DiskProvider::SpillRun::SyncAndClose() {
  if (const int rc = p_.ops_->FTruncate(fd_, header_.file_bytes); rc < 0) {
    return ErrnoStatus(-rc, "spill: ftruncate '" + temp_name_ + "'");
  }
  if (p_.options_.durability == Durability::kFdatasync) {
    if (const int rc = p_.ops_->FDataSync(fd_); rc < 0) {
      return ErrnoStatus(-rc, "spill: fdatasync '" + temp_name_ + "'");
    }
  }
  struct stat st {};
  last_used_unix_ns_ = p_.ops_->FStat(fd_, &st) == 0 ? ModificationUnixNs(st) : RealtimeUnixNs();
  p_.ops_->Close(fd_);
  fd_ = -1;
  return Status::Ok();
}

Status DiskProvider::SpillRun::Publish() {
  {
    std::lock_guard lock(p_.mu_);
    TIER_RETURN_IF_ERROR(RenameIntoPlace());
  }
  if (p_.options_.durability == Durability::kFdatasync) {
    if (const int rc = p_.ops_->FSyncDir(dir_.handle.dir_fd); rc < 0) {
      return ErrnoStatus(-rc, "spill: fsync directory '" + dir_.path + "'");
    }
  }
  return Status::Ok();
}

// The key is neither stored nor pending (Reserve saw to that), so whatever stands under its name
// is not a checkpoint of this tier: a symbolic link, a FIFO, a directory, a stray file. It would
// make every spill of the key fail forever; it is moved aside (counted, logged) and the rename
// tried once more.
Status DiskProvider::SpillRun::RenameIntoPlace() {
  const int dir_fd = dir_.handle.dir_fd;
  int rc = p_.ops_->RenameNoReplace(dir_fd, temp_name_.c_str(), final_name_.c_str());
  if (rc == -EEXIST) {
    p_.SetAside(dir_, final_name_,
                "was " + DescribeStuckName(p_.ops_, dir_fd, final_name_) +
                    ", not a checkpoint of this tier, and blocked a spill of its key",
                QuarantineReason::kStuckName);
    rc = p_.ops_->RenameNoReplace(dir_fd, temp_name_.c_str(), final_name_.c_str());
  }
  if (rc < 0) {
    return ErrnoStatus(-rc, "spill: rename '" + temp_name_ + "' to '" + final_name_ + "'");
  }
  temp_exists_ = false;
  published_ = true;
  return Status::Ok();
}

Status DiskProvider::Spill(const tier_key* key, const tier_segment* segments,
                           uint32_t segment_count, tier_done_fn done, void* user_data) {
  auto refuse = [&](tier_status code, const std::string& message) {
    metrics_->Spill(code);
    return Status(code, "disk: spill: " + message);
  };
  if (key == nullptr || done == nullptr || (segment_count > 0 && segments == nullptr)) {
    return refuse(TIER_INVALID_ARGUMENT, "NULL key, callback or segments");
  }
  if (segment_count == 0) return refuse(TIER_INVALID_ARGUMENT, "a checkpoint needs segments");
  if (segment_count > TIER_MAX_SEGMENTS) {
    return refuse(TIER_INVALID_ARGUMENT, std::to_string(segment_count) + " segments (at most " +
                                             std::to_string(TIER_MAX_SEGMENTS) + ")");
  }
  SpillShape shape;
  if (const std::string why =
          CheckSpillSegments(segments, segment_count, options_.chunk_bytes, &shape);
      !why.empty()) {
    return refuse(TIER_INVALID_ARGUMENT, why);
  }
  const uint64_t header_bytes = HeaderContentBytes(namespace_id_.size(), segment_count,
                                                   shape.chunk_count, shape.manifest_bytes);
  if (header_bytes > kMaxHeaderBytes) {
    return refuse(TIER_INVALID_ARGUMENT, "checkpoint too large for one file (" +
                                             std::to_string(shape.chunk_count) + " chunks)");
  }
  const uint64_t worst_case_bytes = AlignUp(header_bytes, kBlockBytes) + shape.data_bytes;
  uint32_t dir = 0;
  if (const std::string why = ChooseDir(worst_case_bytes, &dir); !why.empty()) {
    return refuse(TIER_NO_SPACE, why);
  }
  auto job = std::make_unique<Job>();
  job->type = Job::Type::kSpill;
  std::memcpy(job->key.data(), key->bytes, TIER_KEY_BYTES);
  job->segments.assign(segments, segments + segment_count);
  job->done = done;
  job->user_data = user_data;
  job->worst_case_bytes = worst_case_bytes;
  job->dir = dir;
  if (const Status refused = AcceptSpill(*job); !refused.ok()) {
    return refuse(refused.code(), refused.message());
  }
  // Could not queue (out of memory): the acceptance is undone, the callback never runs.
  const bool queued = QueueAccepted(std::move(job), [this](Job& j) {
    DirOf(j.dir).spills.fetch_sub(1);
    std::lock_guard lock(mu_);
    index_.Unreserve(j.key, j.worst_case_bytes);
  });
  if (!queued) return refuse(TIER_INTERNAL, "out of memory queueing the spill");
  return Status::Ok();
}

Status DiskProvider::AcceptSpill(const Job& job) {
  std::lock_guard lock(mu_);
  if (inflight_ops_.load() >= kMaxInflightOps) {
    return Status(TIER_BUSY, std::to_string(kMaxInflightOps) + " operations in flight");
  }
  bool exists = false, too_many = false;
  if (!index_.Reserve(job.key, job.worst_case_bytes, &exists, &too_many)) {
    if (exists) {
      return Status(TIER_ALREADY_EXISTS, "a checkpoint with this key is stored or being stored");
    }
    if (too_many) {
      return Status(TIER_NO_SPACE, "entry limit " + std::to_string(kMaxEntries) + " reached");
    }
    return Status(TIER_NO_SPACE, "needs up to " + std::to_string(job.worst_case_bytes) +
                                     " bytes; " + std::to_string(index_.used_bytes()) +
                                     " used and " + std::to_string(index_.reserved_bytes()) +
                                     " reserved of capacity " +
                                     std::to_string(index_.capacity_bytes()));
  }
  inflight_ops_.fetch_add(1);
  DirOf(job.dir).spills.fetch_add(1);
  return Status::Ok();
}

namespace {

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// A failing directory is placed into only when no healthy one takes the spill (with one
// directory: always, as before).
std::string DiskProvider::ChooseDir(uint64_t worst_case_bytes, uint32_t* dir) {
  if (dirs_.size() > 1 && ChooseDirAmong(worst_case_bytes, false, dir).empty()) return "";
  return ChooseDirAmong(worst_case_bytes, true, dir);
}

void DiskProvider::NoteSpillOutcome(TierDir& dir, const Status& status) {
  if (status.code() != TIER_IO_ERROR) {
    if (status.ok()) dir.io_errors_in_a_row.store(0);
    return;
  }
  if (dir.io_errors_in_a_row.fetch_add(1) + 1 < kFailingAfterIoErrors || dirs_.size() < 2) return;
  const int64_t now_ns = SteadyNowNs();
  const bool was_failing = dir.failing_until_ns.exchange(now_ns + kFailingBackoffNs) > now_ns;
  if (was_failing) return;
  metrics_->DirUnavailable(DirProblem::kFailing);
  Log(TIER_LOG_ERROR,
      "disk: directory '" + dir.path + "' failed " + std::to_string(kFailingAfterIoErrors) +
          " spills in a row with I/O errors (last: " + status.message() +
          "); new spills go to the other directories for " +
          std::to_string(kFailingBackoffNs / 1'000'000'000) + " s, its checkpoints are still read");
}

std::string DiskProvider::ChooseDirAmong(uint64_t worst_case_bytes, bool failing_too,
                                         uint32_t* dir) {
  const uint32_t n = static_cast<uint32_t>(dirs_.size());
  const int64_t now_ns = failing_too ? 0 : SteadyNowNs();
  const uint32_t start = n == 1 ? 0 : next_dir_.fetch_add(1) % n;
  std::string refusals;
  bool found = false;
  uint32_t best_spills = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t d = (start + i) % n;
    const uint32_t spills = DirOf(d).spills.load();
    if (found && spills >= best_spills) continue;  // only a less busy directory beats the first
    if (!failing_too && DirOf(d).failing_until_ns.load() > now_ns) continue;
    if (std::string why = FilesystemFullRefusal(DirOf(d), worst_case_bytes); !why.empty()) {
      refusals += (refusals.empty() ? "" : "; ") + why;
      continue;
    }
    found = true;
    best_spills = spills;
    *dir = d;
  }
  return found ? "" : refusals;
}

std::string DiskProvider::FilesystemFullRefusal(TierDir& dir, uint64_t worst_case_bytes) {
  if (!dir.filesystem_full.load()) return "";
  struct statfs fs {};
  if (ops_->FStatFs(dir.handle.dir_fd, &fs) < 0) return "";  // cannot tell: the spill will find out
  const uint64_t block_bytes = fs.f_frsize != 0 ? fs.f_frsize : fs.f_bsize;
  // Root may write into the blocks ext4 reserves for it; everyone else only into f_bavail.
  const uint64_t free_bytes = (::geteuid() == 0 ? fs.f_bfree : fs.f_bavail) * block_bytes;
  if (free_bytes >= worst_case_bytes) {
    dir.filesystem_full.store(false);
    return "";
  }
  return "the filesystem of '" + dir.path + "' is full: " + std::to_string(free_bytes) +
         " bytes free, this spill needs up to " + std::to_string(worst_case_bytes) +
         " (refused without writing; the last spill failed no_space)";
}

DiskProvider::JobOutcome DiskProvider::RunSpill(Job* job) {
  ScopeGuard unreserve([&] {  // only when an exception leaves before the index is updated
    std::lock_guard lock(mu_);
    index_.Unreserve(job->key, job->worst_case_bytes);
  });
  ScopeGuard placed([&] { DirOf(job->dir).spills.fetch_sub(1); });
  SpillRun run(*this, *job);
  const Status status = run.Run();
  std::shared_ptr<Entry> entry = status.ok() ? run.MakeIndexEntry() : nullptr;
  {
    std::lock_guard lock(mu_);
    unreserve.Dismiss();
    index_.Unreserve(job->key, job->worst_case_bytes);
    if (entry) {
      index_.Insert(std::move(entry));
      run.KeepPublished();
    }
  }
  DirOf(job->dir).filesystem_full.store(status.code() == TIER_NO_SPACE);
  NoteSpillOutcome(DirOf(job->dir), status);
  PublishUsage();
  if (!status.ok()) return JobOutcome{status};
  return JobOutcome{Status::Ok(), run.logical_bytes(), run.stored_bytes()};
}

}  // namespace tier::disk
