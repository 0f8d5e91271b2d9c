// restore: the caller's segment table is matched against the stored one and the file is opened
// at acceptance (pinning the entry, so a remove or a new spill cannot pull it away). On a runner
// thread (RestoreRun) the file is verified again: this server's file (owner, mode 0600), its
// header (full key, namespace, tables, length); then every chunk is read (raw chunks straight into
// the caller's buffer when alignment allows, otherwise through staging), verified against its
// checksum seeded with its place, and decompressed on codec threads. Any verification failure is
// data loss: the entry leaves the index, the file is moved aside, and the buffers are never
// reported filled. A restore that completes touches the file's modification time (its last use).
#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <new>

#include "tier/check.h"

#include "codec.h"
#include "job.h"
#include "scope_guard.h"

namespace tier::disk {
namespace {

// One chunk on its way into the caller's buffer: the read, then a codec thread verifies it.
struct RestoreChunk {
  DiskProvider::ChunkWindow* window;
  StagingPool* pool;
  WorkQueue* codec;
  const ChunkRecord* record;
  uint64_t checksum_seed;  // ChunkSeed of the place it is read for
  uint8_t* dst;
  uint64_t length_bytes;
  char* staging;  // nullptr: read straight into dst (raw chunk)
  uint64_t read_bytes;
  uint32_t kind, index, chunk;
  // Set for a chunk larger than the pool's buffers (a file written with a larger chunk_kib):
  // staging points into it instead of the pool.
  AlignedBuffer own_staging = nullptr;
};

std::string ChunkName(const RestoreChunk* op) {
  return "segment (kind " + std::to_string(op->kind) + ", index " + std::to_string(op->index) +
         ") chunk " + std::to_string(op->chunk);
}

void FinishChunk(RestoreChunk* op) {
  DiskProvider::ChunkWindow* window = op->window;
  if (op->staging != nullptr && op->own_staging == nullptr) op->pool->Release(op->staging);
  delete op;  // frees own_staging
  window->End();
}

// Decompresses the chunk's frame from staging into dst and checks the result.
bool DecompressAndVerify(RestoreChunk* op) {
  const ChunkRecord& rec = *op->record;
  const auto start = std::chrono::steady_clock::now();
  const bool ok = DecompressChunkAs(
      rec.codec, {reinterpret_cast<const uint8_t*>(op->staging), rec.stored_bytes},
      {op->dst, op->length_bytes});
  op->window->decompress_cpu_ns.fetch_add(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count()));
  return ok && Checksum({op->dst, op->length_bytes}, op->checksum_seed) == rec.checksum;
}

// Codec thread: verify (and decompress) one chunk into the caller's buffer.
void RestoreChunkWork(RestoreChunk* op) {
  const ChunkRecord& rec = *op->record;
  bool ok = false;
  if (IsZstdCodec(rec.codec)) {
    ok = DecompressAndVerify(op);
  } else if (op->staging != nullptr) {
    const auto* staged = reinterpret_cast<const uint8_t*>(op->staging);
    ok = Checksum({staged, op->length_bytes}, op->checksum_seed) == rec.checksum;
    if (ok) std::memcpy(op->dst, op->staging, op->length_bytes);
  } else {
    ok = Checksum({op->dst, op->length_bytes}, op->checksum_seed) == rec.checksum;
  }
  if (!ok) {
    op->window->Fail(Status(TIER_DATA_LOSS, "disk: restore: " + ChunkName(op) +
                                                " failed verification (checksum or zstd frame)"));
  }
  FinishChunk(op);
}

void RestoreReadDone(void* ctx, int64_t result) {
  auto* op = static_cast<RestoreChunk*>(ctx);
  if (result < 0) {
    op->window->Fail(ErrnoStatus(static_cast<int>(-result), "restore: read " + ChunkName(op)));
    FinishChunk(op);
    return;
  }
  if (static_cast<uint64_t>(result) != op->read_bytes) {
    op->window->Fail(Status(TIER_DATA_LOSS, "disk: restore: " + ChunkName(op) +
                                                " lies past the end of the file (truncated)"));
    FinishChunk(op);
    return;
  }
  PostOrRun(op->codec, [op] { RestoreChunkWork(op); });
}

}  // namespace

Status DiskProvider::ReadHeader(int fd, Header* header, bool* corrupt) {
  *corrupt = false;
  AlignedBuffer first = AllocateAligned(kBlockBytes);
  int64_t n = SyncIo(backend_.get(),
                     IoRequest{IoKind::kRead, fd, first.get(), kBlockBytes, 0, nullptr, nullptr});
  if (n < 0) return ErrnoStatus(static_cast<int>(-n), "read header");
  ParseError error;
  uint64_t header_bytes = 0;
  if (!PeekHeaderBytes({first.get(), static_cast<size_t>(n)}, &header_bytes, &error)) {
    *corrupt = error.kind == ParseErrorKind::kCorrupt;
    return Status(*corrupt ? TIER_DATA_LOSS : TIER_UNSUPPORTED, "disk: header: " + error.message);
  }
  AlignedBuffer whole;
  const uint8_t* bytes = first.get();
  if (header_bytes > kBlockBytes) {
    const uint64_t region_bytes = AlignUp(header_bytes, kBlockBytes);
    whole = AllocateAligned(region_bytes);
    n = SyncIo(backend_.get(),
               IoRequest{IoKind::kRead, fd, whole.get(), region_bytes, 0, nullptr, nullptr});
    if (n < 0) return ErrnoStatus(static_cast<int>(-n), "read header");
    bytes = whole.get();
  }
  if (static_cast<uint64_t>(n) < header_bytes) {
    *corrupt = true;
    return Status(TIER_DATA_LOSS, "disk: header: file truncated inside its header");
  }
  if (!ParseHeader({bytes, static_cast<size_t>(n)}, header, &error)) {
    *corrupt = error.kind == ParseErrorKind::kCorrupt;
    return Status(*corrupt ? TIER_DATA_LOSS : TIER_UNSUPPORTED, "disk: header: " + error.message);
  }
  return Status::Ok();
}

namespace {

// The caller's table against the stored one: the same (kind, index) set, each with its stored
// length and data where there are bytes. Returns what differs, or "".
std::string MismatchWithStored(const Entry& entry, const std::vector<tier_segment>& segments) {
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> stored;
  for (const tier_segment_info& s : entry.segments) stored[{s.kind, s.index}] = s.length_bytes;
  for (const tier_segment& s : segments) {
    const auto it = stored.find({s.kind, s.index});
    const std::string where =
        "segment (kind " + std::to_string(s.kind) + ", index " + std::to_string(s.index) + ")";
    if (it == stored.end()) return where + " is not stored (or is given twice)";
    if (it->second != s.length_bytes) {
      return where + ": length " + std::to_string(s.length_bytes) + ", stored " +
             std::to_string(it->second);
    }
    if (s.length_bytes > 0 && s.data == nullptr) return where + ": NULL data";
    stored.erase(it);
  }
  return "";
}

}  // namespace

Status DiskProvider::Restore(const tier_key* key, const tier_segment* segments,
                             uint32_t segment_count, tier_done_fn done, void* user_data) {
  auto refuse = [&](tier_status code, const std::string& message) {
    metrics_->Restore(code);
    return Status(code, "disk: restore: " + message);
  };
  if (key == nullptr || done == nullptr || (segment_count > 0 && segments == nullptr)) {
    return refuse(TIER_INVALID_ARGUMENT, "NULL key, callback or segments");
  }
  auto job = std::make_unique<Job>();
  job->type = Job::Type::kRestore;
  std::memcpy(job->key.data(), key->bytes, TIER_KEY_BYTES);
  job->done = done;
  job->user_data = user_data;
  {
    std::lock_guard lock(mu_);
    std::shared_ptr<Entry> entry = index_.Find(job->key);
    if (!entry) return refuse(TIER_NOT_FOUND, "no checkpoint with this key");
    if (inflight_ops_.load() >= kMaxInflightOps) {
      return refuse(TIER_BUSY, std::to_string(kMaxInflightOps) + " operations in flight");
    }
    if (segment_count != entry->segments.size()) {
      return refuse(TIER_INVALID_ARGUMENT,
                    "segment table does not match: " + std::to_string(segment_count) +
                        " segments given, " + std::to_string(entry->segments.size()) + " stored");
    }
    // Only now, with the count known to be the stored one, is the caller's table read.
    job->segments.assign(segments, segments + segment_count);
    if (const std::string why = MismatchWithStored(*entry, job->segments); !why.empty()) {
      return refuse(TIER_INVALID_ARGUMENT, why);
    }
    TIER_RETURN_IF_ERROR(OpenForRestore(job.get(), std::move(entry), refuse));
  }
  const bool queued = QueueAccepted(std::move(job), [this](Job& j) {
    ops_->Close(j.fd);
    std::lock_guard lock(mu_);
    index_.Unpin(j.entry.get());
  });
  if (!queued) return refuse(TIER_INTERNAL, "out of memory queueing the restore");
  return Status::Ok();
}

Status DiskProvider::OpenForRestore(
    Job* job, std::shared_ptr<Entry> entry,
    const std::function<Status(tier_status, const std::string&)>& refuse) {
  const TierDir& dir = DirOf(entry->dir);
  const int fd = OpenRegularFile(ops_, dir.handle.dir_fd, entry->file_name.c_str(),
                                 O_RDONLY | O_NOFOLLOW | O_CLOEXEC | OpenFlags(dir));
  if (fd == -ENOENT) {
    // Deleted behind our back: it can never be served again.
    index_.Detach(job->key);
    index_.MarkCorrupt(job->key);
    Log(TIER_LOG_ERROR, "disk: checkpoint file '" + dir.path + "/" + entry->file_name +
                            "' vanished (deleted outside the provider); dropped from the index");
    metrics_->DataLoss(DataLossWhere::kRestore);
    return refuse(TIER_DATA_LOSS,
                  "checkpoint file '" + entry->file_name + "' vanished; the entry is gone");
  }
  if (fd < 0) {
    return refuse(TIER_IO_ERROR, "open '" + entry->file_name + "': " + Status::ErrnoText(-fd));
  }
  index_.Pin(entry.get());
  job->entry = std::move(entry);
  job->fd = fd;
  inflight_ops_.fetch_add(1);
  return Status::Ok();
}

// The restore of one job on its runner thread: verify, then read every chunk.
class DiskProvider::RestoreRun {
 public:
  RestoreRun(DiskProvider& p, Job& job) : p_(p), job_(job), entry_(*job.entry) {}

  Status Run() {
    TIER_RETURN_IF_ERROR(Verify());
    return ReadChunks();
  }
  // Why a DATA_LOSS from Run is: a corrupt file, or one this server did not write (then
  // not_owned_why() says what is wrong with it).
  QuarantineReason reason() const { return reason_; }
  const std::string& not_owned_why() const { return not_owned_why_; }
  uint64_t decompress_cpu_ns() const { return decompress_cpu_ns_; }

 private:
  Status Verify();
  Status CheckIdentity(const struct stat& st) const;
  Status ReadChunks();
  bool SubmitChunk(const SegmentRecord& rec, uint32_t c, uint8_t* dst, ChunkWindow* window,
                   const std::function<bool()>& stop);

  DiskProvider& p_;
  Job& job_;
  const Entry& entry_;
  Header header_;
  QuarantineReason reason_ = QuarantineReason::kCorrupt;
  std::string not_owned_why_;
  uint64_t decompress_cpu_ns_ = 0;
};

// The file is still the one adopted: this server's (owner, mode), its header verifies and says
// what the index says.
Status DiskProvider::RestoreRun::Verify() {
  if (p_.closing_.load()) return Status(TIER_CANCELLED, "disk: restore: cancelled by close");
  struct stat st {};
  if (const int rc = p_.ops_->FStat(job_.fd, &st); rc < 0) {
    return ErrnoStatus(-rc, "restore: fstat '" + entry_.file_name + "'");
  }
  not_owned_why_ = OwnershipProblem(st);
  if (!not_owned_why_.empty()) {
    reason_ = QuarantineReason::kNotOwned;
    return Status(TIER_DATA_LOSS, "disk: restore: '" + p_.DirOf(entry_.dir).path + "/" +
                                      entry_.file_name + "' " + not_owned_why_ +
                                      " (not written by this server), never served");
  }
  bool corrupt = false;
  const Status read = p_.ReadHeader(job_.fd, &header_, &corrupt);
  if (read.code() == TIER_UNSUPPORTED) {
    return Status(TIER_DATA_LOSS, read.message());  // it verified at open: now it does not
  }
  TIER_RETURN_IF_ERROR(read);
  return CheckIdentity(st);
}

Status DiskProvider::RestoreRun::CheckIdentity(const struct stat& st) const {
  std::string why;
  if (header_.key != job_.key) {
    why = "stored key differs from the key asked for";
  } else if (header_.namespace_id != p_.namespace_id_) {
    why = "stored namespace differs";
  } else if (static_cast<uint64_t>(st.st_size) != header_.file_bytes) {
    why = "file length changed";
  } else if (header_.segments.size() != entry_.segments.size()) {
    why = "segment table changed";
  }
  for (size_t i = 0; why.empty() && i < header_.segments.size(); ++i) {
    const SegmentRecord& r = header_.segments[i];
    const tier_segment_info& e = entry_.segments[i];
    if (r.kind != e.kind || r.index != e.index || r.logical_bytes != e.length_bytes) {
      why = "segment table changed";
    }
  }
  if (!why.empty()) return Status(TIER_DATA_LOSS, "disk: restore: " + why);
  return Status::Ok();
}

Status DiskProvider::RestoreRun::ReadChunks() {
  std::map<std::pair<uint32_t, uint32_t>, const tier_segment*> by_id;
  for (const tier_segment& s : job_.segments) by_id[{s.kind, s.index}] = &s;
  ChunkWindow window;
  ScopeGuard drain([&] { window.WaitIdle(); });  // never leave with chunk operations in flight
  const std::function<bool()> stop = [&] { return p_.closing_.load() || window.failed.load(); };
  for (const SegmentRecord& rec : header_.segments) {
    if (stop()) break;
    auto* dst = static_cast<uint8_t*>(by_id.at({rec.kind, rec.index})->data);
    if (rec.codec == kCodecInline) {
      if (rec.logical_bytes > 0) std::memcpy(dst, header_.manifest.data(), rec.logical_bytes);
      continue;
    }
    for (uint32_t c = 0; c < rec.chunk_count && !stop(); ++c) {
      if (!SubmitChunk(rec, c, dst, &window, stop)) break;
    }
  }
  drain.RunNow();
  decompress_cpu_ns_ = window.decompress_cpu_ns.load();
  TIER_RETURN_IF_ERROR(window.error());
  if (p_.closing_.load()) return Status(TIER_CANCELLED, "disk: restore: cancelled by close");
  return Status::Ok();
}

// Reads chunk `c` of `rec` into `dst` (the segment's buffer), through staging unless it is raw
// and alignment allows. False when the restore stops (cancelled, failed).
bool DiskProvider::RestoreRun::SubmitChunk(const SegmentRecord& rec, uint32_t c, uint8_t* dst,
                                           ChunkWindow* window, const std::function<bool()>& stop) {
  const ChunkRecord* ch = &header_.chunks[rec.first_chunk + c];
  const uint64_t at_bytes = uint64_t{c} * header_.chunk_bytes;
  const uint64_t length_bytes =
      std::min<uint64_t>(header_.chunk_bytes, rec.logical_bytes - at_bytes);
  const bool zero_copy =
      ch->codec == kCodecRaw &&
      (!p_.io_path_.direct || (IsBlockAligned(dst + at_bytes) && length_bytes % kBlockBytes == 0));
  const uint64_t read_bytes = zero_copy ? length_bytes : AlignUp(ch->stored_bytes, kBlockBytes);
  TIER_CHECK(read_bytes >= length_bytes || (!zero_copy && IsZstdCodec(ch->codec)));
  // A file keeps the chunk size it was written with; one written with a larger chunk_kib than
  // this open's has chunks the pool's buffers cannot hold. Those go through a buffer of their
  // own, one at a time (the window idle first), so staging memory stays bounded per restore.
  const bool oversize = !zero_copy && read_bytes > p_.pool_->buffer_bytes();
  window->WaitBelow(oversize ? 1 : p_.options_.queue_depth);
  AlignedBuffer own_staging = nullptr;
  if (oversize && (own_staging = AllocateAlignedOrNull(read_bytes)) == nullptr) {
    window->Fail(Status(TIER_INTERNAL, "disk: restore: out of memory"));
    return false;
  }
  char* staging = reinterpret_cast<char*>(own_staging.get());
  if (!zero_copy && !oversize && (staging = p_.pool_->Acquire(stop)) == nullptr) return false;
  auto* op = new (std::nothrow)
      RestoreChunk{window,
                   p_.pool_.get(),
                   p_.codec_.get(),
                   ch,
                   ChunkSeed(header_.format_version, header_.key, rec.kind, rec.index, c),
                   dst + at_bytes,
                   length_bytes,
                   staging,
                   read_bytes,
                   rec.kind,
                   rec.index,
                   c,
                   std::move(own_staging)};
  if (op == nullptr) {
    if (staging != nullptr && !oversize) p_.pool_->Release(staging);
    window->Fail(Status(TIER_INTERNAL, "disk: restore: out of memory"));
    return false;
  }
  window->Begin();
  p_.backend_->Submit(IoRequest{IoKind::kRead, job_.fd,
                                zero_copy ? static_cast<void*>(dst + at_bytes) : staging,
                                read_bytes, ch->file_offset, RestoreReadDone, op});
  return true;
}

// The last use, where a restart finds it: the file's modification time.
void DiskProvider::RecordUse(int fd, Entry* entry) {
  struct stat st {};
  const bool touched = ops_->TouchModificationTime(fd) == 0 && ops_->FStat(fd, &st) == 0;
  entry->last_used_unix_ns.store(touched ? ModificationUnixNs(st) : RealtimeUnixNs());
}

// A checkpoint that failed verification (or is not this server's) leaves the index and the tier:
// moved aside, never offered again (plan_restore answers `corrupt`).
void DiskProvider::DropDamaged(const Job& job, const std::shared_ptr<Entry>& entry,
                               const RestoreRun& run, JobOutcome* outcome) {
  std::lock_guard lock(mu_);
  index_.MarkCorrupt(job.key);
  const bool still_indexed = index_.Find(job.key) == entry;  // not removed meanwhile
  if (still_indexed) index_.Detach(job.key);
  if (run.reason() == QuarantineReason::kNotOwned) {
    if (still_indexed) {
      SetAside(DirOf(entry->dir), entry->file_name,
               run.not_owned_why() + " (not written by this server), never served",
               QuarantineReason::kNotOwned);
    }
    outcome->logged = still_indexed;
  } else if (still_indexed) {
    QuarantineCorrupt(DirOf(entry->dir), entry->file_name, outcome->status.message(),
                      DataLossWhere::kRestore);
  } else {
    metrics_->DataLoss(DataLossWhere::kRestore);  // already removed: nothing to move aside
  }
  outcome->status =
      Status(TIER_DATA_LOSS, outcome->status.message() + "; the checkpoint was dropped");
}

DiskProvider::JobOutcome DiskProvider::RunRestore(Job* job) {
  const std::shared_ptr<Entry> entry = job->entry;
  ScopeGuard close_file([&] {
    ops_->Close(job->fd);
    job->fd = -1;
  });
  ScopeGuard unpin([&] {
    std::lock_guard lock(mu_);
    index_.Unpin(entry.get());
  });
  RestoreRun run(*this, *job);
  JobOutcome outcome{run.Run(), entry->logical_bytes, entry->stored_bytes};
  if (outcome.status.ok()) RecordUse(job->fd, entry.get());
  close_file.RunNow();
  if (outcome.status.code() == TIER_DATA_LOSS) DropDamaged(*job, entry, run, &outcome);
  unpin.RunNow();
  PublishUsage();
  if (outcome.status.ok()) {
    const uint64_t duration_ns = NowNs() - job->accepted_ns;
    estimator_->Observe(entry->stored_bytes, duration_ns, entry->zstd_logical_bytes,
                        run.decompress_cpu_ns());
    estimator_->ObserveRestoreThroughput(entry->logical_bytes, entry->zstd_logical_bytes,
                                         duration_ns);
  }
  job->entry.reset();
  return outcome;
}

}  // namespace tier::disk
