// restore: the caller's segment table is matched against the stored one and the file is opened
// at acceptance (pinning the entry, so a remove or a new spill cannot pull it away). On a runner
// thread the header is read again and verified (full key, namespace, tables), then every chunk is
// read (raw chunks straight into the caller's buffer when alignment allows, otherwise through
// staging), verified and decompressed on codec threads. Any verification failure is data loss:
// the entry leaves the index, the file is moved aside, and the buffers are never reported filled.
#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <new>

#include "codec.h"
#include "job.h"

namespace tier::disk {
namespace {

struct RestoreChunk {
  DiskProvider::ChunkWindow* window;
  StagingPool* pool;
  WorkQueue* codec;
  const ChunkRecord* record;
  uint8_t* dst;
  uint64_t len;
  char* staging;  // nullptr: read straight into dst (raw chunk)
  uint64_t read_len;
  uint32_t kind, index, chunk;
};

std::string ChunkName(const RestoreChunk* op) {
  return "segment (kind " + std::to_string(op->kind) + ", index " + std::to_string(op->index) +
         ") chunk " + std::to_string(op->chunk);
}

void FinishChunk(RestoreChunk* op) {
  DiskProvider::ChunkWindow* window = op->window;
  if (op->staging != nullptr) op->pool->Release(op->staging);
  delete op;
  window->End();
}

// Codec thread: verify (and decompress) one chunk into the caller's buffer.
void RestoreChunkWork(RestoreChunk* op) {
  const ChunkRecord& rec = *op->record;
  bool ok = false;
  if (IsZstdCodec(rec.codec)) {
    const auto t0 = std::chrono::steady_clock::now();
    ok = DecompressChunkAs(rec.codec,
                           {reinterpret_cast<const uint8_t*>(op->staging), rec.stored_bytes},
                           {op->dst, op->len});
    op->window->decompress_cpu_ns.fetch_add(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count()));
    ok = ok && Checksum({op->dst, op->len}) == rec.checksum;
  } else if (op->staging != nullptr) {
    ok = Checksum({reinterpret_cast<const uint8_t*>(op->staging), op->len}) == rec.checksum;
    if (ok) std::memcpy(op->dst, op->staging, op->len);
  } else {
    ok = Checksum({op->dst, op->len}) == rec.checksum;
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
    op->window->Fail(
        ErrnoStatus(static_cast<int>(-result), "restore: read " + ChunkName(op)));
    FinishChunk(op);
    return;
  }
  if (static_cast<uint64_t>(result) != op->read_len) {
    op->window->Fail(Status(TIER_DATA_LOSS, "disk: restore: " + ChunkName(op) +
                                                " lies past the end of the file (truncated)"));
    FinishChunk(op);
    return;
  }
  try {
    op->codec->Post([op] { RestoreChunkWork(op); });
  } catch (...) {
    RestoreChunkWork(op);
  }
}

bool Aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kBlockBytes == 0;
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
    const uint64_t region = AlignUp(header_bytes, kBlockBytes);
    whole = AllocateAligned(region);
    n = SyncIo(backend_.get(),
               IoRequest{IoKind::kRead, fd, whole.get(), region, 0, nullptr, nullptr});
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
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> stored;
    for (const tier_segment_info& s : entry->segments) stored[{s.kind, s.index}] = s.length_bytes;
    for (const tier_segment& s : job->segments) {
      const auto it = stored.find({s.kind, s.index});
      const std::string where =
          "segment (kind " + std::to_string(s.kind) + ", index " + std::to_string(s.index) + ")";
      if (it == stored.end()) {
        return refuse(TIER_INVALID_ARGUMENT, where + " is not stored (or is given twice)");
      }
      if (it->second != s.length_bytes) {
        return refuse(TIER_INVALID_ARGUMENT, where + ": length " + std::to_string(s.length_bytes) +
                                                 ", stored " + std::to_string(it->second));
      }
      if (s.length_bytes > 0 && s.data == nullptr) {
        return refuse(TIER_INVALID_ARGUMENT, where + ": NULL data");
      }
      stored.erase(it);
    }
    const int fd = OpenRegularFile(ops_, dir_.dir_fd, entry->file_name.c_str(),
                                   O_RDONLY | O_NOFOLLOW | O_CLOEXEC | OpenFlags());
    if (fd < 0) {
      if (fd == -ENOENT) {
        // Deleted behind our back: it can never be served again.
        index_.Detach(job->key);
        index_.MarkCorrupt(job->key);
        Log(TIER_LOG_ERROR,
            "disk: checkpoint file '" + options_.dir + "/" + entry->file_name +
                "' vanished (deleted outside the provider); dropped from the index");
        metrics_->DataLoss(DataLossWhere::kRestore);
        metrics_->Restore(TIER_DATA_LOSS);
        return Status(TIER_DATA_LOSS, "disk: restore: checkpoint file '" + entry->file_name +
                                          "' vanished; the entry is gone");
      }
      return refuse(TIER_IO_ERROR, "open '" + entry->file_name + "': " + Status::ErrnoText(-fd));
    }
    index_.Pin(entry.get());
    job->entry = std::move(entry);
    job->fd = fd;
    inflight_ops_.fetch_add(1);
  }
  const bool queued = QueueAccepted(std::move(job), [this](Job& j) {
    ops_->Close(j.fd);
    std::lock_guard lock(mu_);
    index_.Unpin(j.entry.get());
  });
  if (!queued) return refuse(TIER_INTERNAL, "out of memory queueing the restore");
  return Status::Ok();
}

void DiskProvider::RunRestore(Job* job) {
  const std::shared_ptr<Entry> entry = job->entry;
  const bool direct = io_path_.direct;
  Status status;
  Header header;
  ChunkWindow window;
  try {
    if (closing_.load()) status = Status(TIER_CANCELLED, "disk: restore: cancelled by close");
    bool corrupt = false;
    if (status.ok()) {
      status = ReadHeader(job->fd, &header, &corrupt);
      if (!status.ok() && status.code() == TIER_UNSUPPORTED) {
        status = Status(TIER_DATA_LOSS, status.message());  // it verified at open: now it does not
      }
    }
    struct stat st {};
    if (status.ok()) {
      if (const int rc = ops_->FStat(job->fd, &st); rc < 0) {
        status = ErrnoStatus(-rc, "restore: fstat '" + entry->file_name + "'");
      }
    }
    if (status.ok()) {
      std::string why;
      if (header.key != job->key)
        why = "stored key differs from the key asked for";
      else if (header.namespace_id != namespace_id_)
        why = "stored namespace differs";
      else if (static_cast<uint64_t>(st.st_size) != header.file_bytes)
        why = "file length changed";
      else if (header.segments.size() != entry->segments.size())
        why = "segment table changed";
      for (size_t i = 0; why.empty() && i < header.segments.size(); ++i) {
        const SegmentRecord& r = header.segments[i];
        const tier_segment_info& e = entry->segments[i];
        if (r.kind != e.kind || r.index != e.index || r.logical_bytes != e.length_bytes) {
          why = "segment table changed";
        }
      }
      if (!why.empty()) status = Status(TIER_DATA_LOSS, "disk: restore: " + why);
    }

    if (status.ok()) {
      std::map<std::pair<uint32_t, uint32_t>, const tier_segment*> by_id;
      for (const tier_segment& s : job->segments) by_id[{s.kind, s.index}] = &s;
      const uint32_t chunk = header.chunk_bytes;
      auto stop = [&] { return closing_.load() || window.failed.load(); };
      for (const SegmentRecord& rec : header.segments) {
        if (stop()) break;
        const tier_segment* dst_seg = by_id.at({rec.kind, rec.index});
        auto* dst = static_cast<uint8_t*>(dst_seg->data);
        if (rec.codec == kCodecInline) {
          if (rec.logical_bytes > 0) std::memcpy(dst, header.manifest.data(), rec.logical_bytes);
          continue;
        }
        for (uint32_t c = 0; c < rec.chunk_count && !stop(); ++c) {
          const ChunkRecord* ch = &header.chunks[rec.first_chunk + c];
          const uint64_t offset = uint64_t{c} * chunk;
          const uint64_t len = std::min<uint64_t>(chunk, rec.logical_bytes - offset);
          const bool zero_copy = ch->codec == kCodecRaw &&
                                 (!direct || (Aligned(dst + offset) && len % kBlockBytes == 0));
          window.WaitBelow(options_.queue_depth);
          char* staging = nullptr;
          if (!zero_copy) {
            staging = pool_->Acquire(stop);
            if (staging == nullptr) break;
          }
          const uint64_t read_len = zero_copy ? len : AlignUp(ch->stored_bytes, kBlockBytes);
          auto* op = new (std::nothrow)
              RestoreChunk{&window,  pool_.get(), codec_.get(), ch, dst + offset, len, staging,
                           read_len, rec.kind,    rec.index,    c};
          if (op == nullptr) {
            if (staging != nullptr) pool_->Release(staging);
            window.Fail(Status(TIER_INTERNAL, "disk: restore: out of memory"));
            break;
          }
          window.Begin();
          backend_->Submit(IoRequest{IoKind::kRead, job->fd,
                                     zero_copy ? static_cast<void*>(dst + offset) : staging,
                                     read_len, ch->file_offset, RestoreReadDone, op});
        }
      }
    }
  } catch (const std::exception& e) {
    window.Fail(Status(TIER_INTERNAL, std::string("disk: restore: ") + e.what()));
  }
  window.WaitIdle();
  if (status.ok()) status = window.error();
  if (status.ok() && closing_.load()) {
    status = Status(TIER_CANCELLED, "disk: restore: cancelled by close");
  }

  ops_->Close(job->fd);
  job->fd = -1;
  if (status.code() == TIER_DATA_LOSS) {
    {
      std::lock_guard lock(mu_);
      index_.MarkCorrupt(job->key);
      if (index_.Find(job->key) == entry) {
        index_.Detach(job->key);
        Quarantine(entry->file_name, status.message(), DataLossWhere::kRestore);
      } else {
        metrics_->DataLoss(DataLossWhere::kRestore);  // already removed: nothing to move aside
      }
    }
    status = Status(TIER_DATA_LOSS, status.message() + "; the checkpoint was dropped");
  }
  {
    std::lock_guard lock(mu_);
    index_.Unpin(entry.get());
  }
  PublishUsage();
  if (status.ok()) {
    const uint64_t duration_ns = NowNs() - job->accepted_ns;
    estimator_->Observe(entry->stored_bytes, duration_ns, entry->zstd_logical_bytes,
                        window.decompress_cpu_ns.load());
    estimator_->ObserveRestoreThroughput(entry->logical_bytes, entry->zstd_logical_bytes,
                                         duration_ns);
  } else if (status.code() != TIER_CANCELLED) {
    Log(status.code() == TIER_DATA_LOSS ? TIER_LOG_ERROR : TIER_LOG_WARN, status.message());
  }
  const uint64_t logical = entry->logical_bytes, stored = entry->stored_bytes;
  job->entry.reset();
  Complete(job, status, logical, stored);
}

}  // namespace tier::disk
