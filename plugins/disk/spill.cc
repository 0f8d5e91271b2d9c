// spill: validation and budget at acceptance; then, on a runner thread, chunks are checksummed
// and (maybe) compressed on codec threads into staging buffers, written at 4 KiB-aligned offsets
// of a temporary file with up to queue_depth I/Os in flight, the header is written last, the file
// is synced as durability asks, renamed to its final name and the directory synced. Only then is
// the checkpoint visible. Any failure removes the temporary file and releases the budget.
#include <fcntl.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <new>
#include <set>
#include <utility>

#include "codec.h"
#include "job.h"

namespace tier::disk {
namespace {

struct SpillChunk {
  DiskProvider::ChunkWindow* window;
  IoBackend* backend;
  StagingPool* pool;
  const std::string* temp_name;
  int fd;
  const uint8_t* src;
  uint64_t len;
  ChunkRecord* record;
  uint32_t codec;  // the segment's: kCodecRaw or a zstd codec to try on this chunk
  int zstd_level;
  char* staging;  // nullptr: written straight from the caller's buffer
  std::atomic<uint64_t>* next_offset;
  uint64_t write_len = 0;
};

void SpillWriteDone(void* ctx, int64_t result) {
  auto* op = static_cast<SpillChunk*>(ctx);
  DiskProvider::ChunkWindow* window = op->window;
  if (result < 0) {
    window->Fail(ErrnoStatus(static_cast<int>(-result), "write '" + *op->temp_name + "'"));
  } else if (static_cast<uint64_t>(result) != op->write_len) {
    window->Fail(Status(TIER_IO_ERROR, "disk: short write to '" + *op->temp_name +
                                           "': " + std::to_string(result) + " of " +
                                           std::to_string(op->write_len) + " bytes"));
  }
  if (op->staging != nullptr) op->pool->Release(op->staging);
  delete op;
  window->End();
}

// Codec thread: checksum, compress or copy, then submit the write.
void SpillChunkWork(SpillChunk* op) {
  op->record->checksum = Checksum({op->src, op->len});
  const void* from = op->src;
  uint64_t stored = op->len;
  uint32_t codec = kCodecRaw;
  if (op->staging != nullptr) {
    uint64_t n = 0;
    const uint64_t padded = AlignUp(op->len, kBlockBytes);
    if (IsZstdCodec(op->codec) && padded > kBlockBytes) {
      // Only worth it when the frame saves at least one 4 KiB block on disk.
      n = CompressChunkAs(op->codec, {op->src, op->len},
                          {reinterpret_cast<uint8_t*>(op->staging), padded - kBlockBytes},
                          op->zstd_level);
    }
    if (n > 0) {
      codec = op->codec;
      stored = n;
    } else {
      std::memcpy(op->staging, op->src, op->len);
    }
    std::memset(op->staging + stored, 0, AlignUp(stored, kBlockBytes) - stored);
    from = op->staging;
    op->write_len = AlignUp(stored, kBlockBytes);
  } else {
    op->write_len = op->len;  // direct: already a multiple of 4 KiB; buffered: any length
  }
  op->record->codec = codec;
  op->record->stored_bytes = static_cast<uint32_t>(stored);
  op->record->file_offset = op->next_offset->fetch_add(AlignUp(stored, kBlockBytes));
  IoRequest request;
  request.kind = IoKind::kWrite;
  request.fd = op->fd;
  request.buf = const_cast<void*>(from);  // a write only reads it
  request.len = op->write_len;
  request.offset = op->record->file_offset;
  request.done = SpillWriteDone;
  request.ctx = op;
  op->backend->Submit(request);
}

bool Aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kBlockBytes == 0;
}

}  // namespace

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
  std::set<std::pair<uint32_t, uint32_t>> ids;
  uint64_t chunks = 0, manifests = 0, manifest_bytes = 0, data_bytes = 0;
  const uint64_t chunk = options_.chunk_bytes;
  for (uint32_t i = 0; i < segment_count; ++i) {
    const tier_segment& s = segments[i];
    const std::string where = "segment " + std::to_string(i) + " (kind " + std::to_string(s.kind) +
                              ", index " + std::to_string(s.index) + ")";
    if (s.kind < TIER_SEGMENT_KIND_MIN || s.kind > TIER_SEGMENT_KIND_MAX) {
      return refuse(TIER_INVALID_ARGUMENT, where + ": unknown kind");
    }
    if (!ids.emplace(s.kind, s.index).second) {
      return refuse(TIER_INVALID_ARGUMENT, where + ": (kind, index) given twice");
    }
    if (s.length_bytes > 0 && s.data == nullptr) {
      return refuse(TIER_INVALID_ARGUMENT, where + ": NULL data");
    }
    if (s.length_bytes > (1ull << 50)) return refuse(TIER_INVALID_ARGUMENT, where + ": too long");
    if (s.kind == TIER_SEGMENT_MANIFEST) {
      if (++manifests > 1) return refuse(TIER_INVALID_ARGUMENT, "more than one manifest segment");
      if (s.length_bytes > TIER_MANIFEST_MAX_BYTES) {
        return refuse(
            TIER_INVALID_ARGUMENT,
            where + ": manifest longer than " + std::to_string(TIER_MANIFEST_MAX_BYTES) + " bytes");
      }
      manifest_bytes = s.length_bytes;
    } else {
      chunks += (s.length_bytes + chunk - 1) / chunk;
      // Worst case: every chunk raw, padded to 4 KiB (chunk is a multiple of 4 KiB).
      data_bytes += AlignUp(s.length_bytes, kBlockBytes);
    }
  }
  const uint64_t header_bytes =
      HeaderContentBytes(namespace_id_.size(), segment_count, chunks, manifest_bytes);
  if (header_bytes > kMaxHeaderBytes) {
    return refuse(TIER_INVALID_ARGUMENT,
                  "checkpoint too large for one file (" + std::to_string(chunks) + " chunks)");
  }
  auto job = std::make_unique<Job>();
  job->type = Job::Type::kSpill;
  std::memcpy(job->key.data(), key->bytes, TIER_KEY_BYTES);
  job->segments.assign(segments, segments + segment_count);
  job->done = done;
  job->user_data = user_data;
  job->worst_case_bytes = AlignUp(header_bytes, kBlockBytes) + data_bytes;
  {
    std::lock_guard lock(mu_);
    if (inflight_ops_.load() >= kMaxInflightOps) {
      return refuse(TIER_BUSY, std::to_string(kMaxInflightOps) + " operations in flight");
    }
    bool exists = false, too_many = false;
    if (!index_.Reserve(job->key, job->worst_case_bytes, &exists, &too_many)) {
      if (exists)
        return refuse(TIER_ALREADY_EXISTS, "a checkpoint with this key is stored or being stored");
      if (too_many)
        return refuse(TIER_NO_SPACE, "entry limit " + std::to_string(kMaxEntries) + " reached");
      return refuse(TIER_NO_SPACE, "needs up to " + std::to_string(job->worst_case_bytes) +
                                       " bytes; " + std::to_string(index_.used_bytes()) +
                                       " used and " + std::to_string(index_.reserved_bytes()) +
                                       " reserved of capacity " +
                                       std::to_string(index_.capacity_bytes()));
    }
    inflight_ops_.fetch_add(1);
  }
  // Could not queue (out of memory): the acceptance is undone, the callback never runs.
  const bool queued = QueueAccepted(std::move(job), [this](Job& j) {
    std::lock_guard lock(mu_);
    index_.Unreserve(j.key, j.worst_case_bytes);
  });
  if (!queued) return refuse(TIER_INTERNAL, "out of memory queueing the spill");
  return Status::Ok();
}

double DiskProvider::RawRestoreBytesPerSecond() const {
  const double seen = estimator_->raw_restore_bytes_per_second();
  return seen > 0 ? seen : estimator_->read_bytes_per_second();
}

double DiskProvider::MinDecompressBytesPerSecond() const {
  // Decompression runs on min(codec_threads, CPUs this process may use) threads at once.
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int usable = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  const double threads = std::max(1.0, std::min<double>(options_.codec_threads, usable));
  return RawRestoreBytesPerSecond() / threads;
}

bool DiskProvider::CompressedRestoresLag() const {
  const double compressed = estimator_->compressed_restore_bytes_per_second();
  return compressed > 0 && compressed < RawRestoreBytesPerSecond();
}

void DiskProvider::RunSpill(Job* job) {
  const uint32_t chunk = options_.chunk_bytes;
  const bool direct = io_path_.direct;
  Status status;
  Header header;
  uint64_t logical_bytes = 0, stored_bytes = 0;
  const std::string temp = TempNameFor(job->key);
  int fd = -1;
  bool temp_exists = false;

  try {
    header.chunk_bytes = chunk;
    header.key = job->key;
    header.namespace_id = namespace_id_;
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    header.created_unix_ns = static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull + now.tv_nsec;
    uint64_t chunk_total = 0;
    header.segments.resize(job->segments.size());
    for (size_t s = 0; s < job->segments.size(); ++s) {
      const tier_segment& seg = job->segments[s];
      SegmentRecord& rec = header.segments[s];
      rec.kind = seg.kind;
      rec.index = seg.index;
      rec.logical_bytes = seg.length_bytes;
      logical_bytes += seg.length_bytes;
      if (seg.kind == TIER_SEGMENT_MANIFEST) {
        rec.codec = kCodecInline;
        const auto* p = static_cast<const uint8_t*>(seg.data);
        header.manifest.assign(p, p + seg.length_bytes);
        continue;
      }
      const std::span<const uint8_t> bytes(static_cast<const uint8_t*>(seg.data), seg.length_bytes);
      rec.codec = kCodecRaw;
      if (options_.compression != CompressionMode::kOff) {
        // zstd: the best zstd codec on the samples. auto: only when it saves 10% and restoring
        // it compressed is not slower than restoring it raw: the segment's samples decompress
        // fast enough for the codec threads to keep up with the disk, and the compressed
        // restores this instance has timed were not slower than its raw ones (their wall time
        // shows a CPU shared with other work, which a sample cannot).
        const bool automatic = options_.compression == CompressionMode::kAuto;
        if (automatic && CompressedRestoresLag()) {
          rec.codec = kCodecRaw;
        } else {
          rec.codec = ChooseCodec(bytes, options_.zstd_level, automatic,
                                  automatic ? MinDecompressBytesPerSecond() : 0.0)
                          .codec;
        }
      }
      rec.chunk_count = static_cast<uint32_t>((seg.length_bytes + chunk - 1) / chunk);
      rec.first_chunk = chunk_total;
      chunk_total += rec.chunk_count;
    }
    header.chunks.resize(chunk_total);
    header.data_offset = AlignUp(HeaderContentBytes(namespace_id_.size(), header.segments.size(),
                                                    chunk_total, header.manifest.size()),
                                 kBlockBytes);
  } catch (const std::exception& e) {
    status = Status(TIER_INTERNAL, std::string("disk: spill: preparing the header: ") + e.what());
  }

  if (status.ok()) {
    fd = ops_->OpenAt(dir_.dir_fd, temp.c_str(),
                      O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | OpenFlags(), 0600);
    if (fd < 0)
      status = ErrnoStatus(-fd, "spill: create '" + options_.dir + "/" + temp + "'");
    else
      temp_exists = true;
  }
  if (status.ok()) {
    // Reserve the worst case up front (the budget already holds it; ftruncate gives back what the
    // chunks did not use): chunk writes then land inside the file instead of extending it, which
    // ext4 would serialize, one direct write at a time. Filesystems without fallocate just write.
    const int rc = ops_->FAllocate(fd, job->worst_case_bytes);
    if (rc == -ENOSPC || rc == -EDQUOT) {
      status = ErrnoStatus(-rc, "spill: fallocate '" + options_.dir + "/" + temp + "'");
    }
  }

  std::atomic<uint64_t> next_offset{header.data_offset};
  if (status.ok()) {
    ChunkWindow window;
    auto stop = [&] { return closing_.load() || window.failed.load(); };
    try {
      for (size_t s = 0; s < job->segments.size() && !stop(); ++s) {
        const tier_segment& seg = job->segments[s];
        const SegmentRecord& rec = header.segments[s];
        if (rec.codec == kCodecInline) continue;
        const auto* base = static_cast<const uint8_t*>(seg.data);
        for (uint32_t c = 0; c < rec.chunk_count && !stop(); ++c) {
          const uint64_t offset = uint64_t{c} * chunk;
          const uint64_t len = std::min<uint64_t>(chunk, seg.length_bytes - offset);
          const bool zero_copy = rec.codec == kCodecRaw &&
                                 (!direct || (Aligned(base + offset) && len % kBlockBytes == 0));
          window.WaitBelow(options_.queue_depth);
          char* staging = nullptr;
          if (!zero_copy) {
            staging = pool_->Acquire(stop);
            if (staging == nullptr) break;
          }
          auto* op = new (std::nothrow) SpillChunk{
              &window,   backend_.get(),      pool_.get(), &temp,
              fd,        base + offset,       len,         &header.chunks[rec.first_chunk + c],
              rec.codec, options_.zstd_level, staging,     &next_offset};
          if (op == nullptr) {
            if (staging != nullptr) pool_->Release(staging);
            window.Fail(Status(TIER_INTERNAL, "disk: spill: out of memory"));
            break;
          }
          window.Begin();
          try {
            codec_->Post([op] { SpillChunkWork(op); });
          } catch (...) {
            SpillChunkWork(op);  // could not queue: do it here
          }
        }
      }
    } catch (const std::exception& e) {
      window.Fail(Status(TIER_INTERNAL, std::string("disk: spill: ") + e.what()));
    }
    window.WaitIdle();
    status = window.error();
    if (status.ok() && closing_.load()) {
      status = Status(TIER_CANCELLED, "disk: spill: cancelled by close");
    }
  }

  if (status.ok()) {
    // Header last: a file whose header does not verify is never served.
    header.file_bytes = next_offset.load();
    header.logical_bytes = logical_bytes;
    for (SegmentRecord& rec : header.segments) {
      rec.stored_bytes = 0;
      for (uint32_t c = 0; c < rec.chunk_count; ++c) {
        rec.stored_bytes += AlignUp(header.chunks[rec.first_chunk + c].stored_bytes, kBlockBytes);
      }
    }
    stored_bytes = header.file_bytes;
    try {
      AlignedBuffer buffer = AllocateAligned(header.data_offset);
      EncodeHeader(header, {buffer.get(), header.data_offset});
      const int64_t n = SyncIo(backend_.get(), IoRequest{IoKind::kWrite, fd, buffer.get(),
                                                         header.data_offset, 0, nullptr, nullptr});
      if (n < 0) {
        status = ErrnoStatus(static_cast<int>(-n), "spill: write header of '" + temp + "'");
      } else if (static_cast<uint64_t>(n) != header.data_offset) {
        status = Status(TIER_IO_ERROR, "disk: spill: short header write to '" + temp + "'");
      }
    } catch (const std::exception& e) {
      status = Status(TIER_INTERNAL, std::string("disk: spill: encoding the header: ") + e.what());
    }
  }
  if (status.ok()) {
    if (const int rc = ops_->FTruncate(fd, header.file_bytes); rc < 0) {
      status = ErrnoStatus(-rc, "spill: ftruncate '" + temp + "'");
    }
  }
  if (status.ok() && options_.durability == Durability::kFdatasync) {
    if (const int rc = ops_->FDataSync(fd); rc < 0) {
      status = ErrnoStatus(-rc, "spill: fdatasync '" + temp + "'");
    }
  }
  if (fd >= 0) ops_->Close(fd);

  const std::string final_name = FileNameFor(job->key);
  if (status.ok()) {
    std::lock_guard lock(mu_);
    const int rc = ops_->RenameNoReplace(dir_.dir_fd, temp.c_str(), final_name.c_str());
    if (rc < 0) {
      status = ErrnoStatus(-rc, "spill: rename '" + temp + "' to '" + final_name + "'");
    } else {
      temp_exists = false;
    }
  }
  if (status.ok() && options_.durability == Durability::kFdatasync) {
    if (const int rc = ops_->FSyncDir(dir_.dir_fd); rc < 0) {
      status = ErrnoStatus(-rc, "spill: fsync directory '" + options_.dir + "'");
      std::lock_guard lock(mu_);
      const int unlink_rc = ops_->UnlinkAt(dir_.dir_fd, final_name.c_str(), 0);
      if (unlink_rc < 0) {
        Log(TIER_LOG_ERROR, "disk: could not remove unsynced '" + final_name + "': " +
                                Status::ErrnoText(-unlink_rc) + " (it is verified again at next open)");
      }
    }
  }
  if (temp_exists) {
    const int rc = ops_->UnlinkAt(dir_.dir_fd, temp.c_str(), 0);
    if (rc < 0) {
      Log(TIER_LOG_WARN, "disk: could not remove temporary '" + options_.dir + "/" + temp +
                             "': " + Status::ErrnoText(-rc) + " (removed at next open)");
    }
  }

  std::shared_ptr<Entry> entry;
  if (status.ok()) {
    try {
      entry = std::make_shared<Entry>();
      entry->key = job->key;
      entry->file_name = final_name;
      entry->logical_bytes = logical_bytes;
      entry->stored_bytes = stored_bytes;
      entry->manifest = header.manifest;
      for (const SegmentRecord& rec : header.segments) {
        entry->segments.push_back({rec.kind, rec.index, rec.logical_bytes});
        for (uint32_t c = 0; c < rec.chunk_count; ++c) {
          const ChunkRecord& ch = header.chunks[rec.first_chunk + c];
          if (IsZstdCodec(ch.codec)) {
            entry->zstd_logical_bytes +=
                std::min<uint64_t>(chunk, rec.logical_bytes - uint64_t{c} * chunk);
          }
        }
      }
    } catch (const std::exception&) {
      entry.reset();
      status = Status(TIER_INTERNAL, "disk: spill: out of memory indexing the checkpoint");
      std::lock_guard lock(mu_);
      ops_->UnlinkAt(dir_.dir_fd, final_name.c_str(), 0);
    }
  }
  {
    std::lock_guard lock(mu_);
    index_.Unreserve(job->key, job->worst_case_bytes);
    if (status.ok()) index_.Insert(std::move(entry));
  }
  PublishUsage();
  if (!status.ok() && status.code() != TIER_CANCELLED) {
    Log(TIER_LOG_WARN, status.message());
  }
  Complete(job, status, logical_bytes, stored_bytes);
}

}  // namespace tier::disk
