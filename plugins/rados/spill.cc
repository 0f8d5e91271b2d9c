// spill: validation and budget at acceptance; then, on a runner: the key must not be stored yet,
// the spill's lease is created, chunk objects are prepared (checksum, maybe zstd) on the workers
// and written with up to queue_depth operations in flight, and the header object is written
// last with an exclusive create (one write op with its xattrs). Only then is the checkpoint
// visible, and two servers spilling one key cannot both win. A failed spill removes its own
// chunk objects (named by its random spill id, so never another writer's) and its lease.
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "catalog.h"
#include "codec.h"
#include "job.h"
#include "tier_validate.h"

namespace tier::rados {
namespace {

constexpr uint64_t kSecondNs = 1'000'000'000ull;

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

// The header's segment table for `segments` (inline placement decided here) and the worst case
// of stored bytes (every chunk raw). False when the checkpoint cannot be described.
bool PlanHeader(std::span<const tier_segment> segments, uint32_t object_bytes,
                uint64_t max_write_bytes, Header* header, uint64_t* worst_case_bytes,
                std::string* why) {
  uint64_t inline_budget = kInlineBudgetBytes, inline_offset = 0, chunks = 0, logical = 0;
  // The manifest is always inline (enumerate returns it from the header alone).
  for (const tier_segment& s : segments) {
    if (s.kind == TIER_SEGMENT_MANIFEST) inline_budget -= std::min(inline_budget, s.length_bytes);
  }
  for (const tier_segment& s : segments) {
    SegmentRecord r;
    r.kind = s.kind;
    r.index = s.index;
    r.logical_bytes = s.length_bytes;
    logical = SaturatingAdd(logical, s.length_bytes);
    const bool is_manifest = s.kind == TIER_SEGMENT_MANIFEST;
    if (is_manifest || (s.length_bytes <= kInlineMaxBytes && s.length_bytes <= inline_budget)) {
      if (!is_manifest) inline_budget -= s.length_bytes;
      r.storage = kStorageInline;
      r.inline_offset = inline_offset;
      inline_offset += s.length_bytes;
    } else {
      r.storage = kStorageChunks;
      r.first_chunk = static_cast<uint32_t>(chunks);
      const uint64_t n = s.length_bytes / object_bytes + (s.length_bytes % object_bytes ? 1 : 0);
      if (n > UINT32_MAX || chunks + n > UINT32_MAX) {
        *why = "segment of " + std::to_string(s.length_bytes) + " bytes needs too many chunks";
        return false;
      }
      r.chunk_count = static_cast<uint32_t>(n);
      chunks += n;
    }
    header->segments.push_back(r);
  }
  header->logical_bytes = logical;
  header->object_bytes = object_bytes;
  header->chunks.assign(chunks, ChunkRecord{});
  const uint64_t header_bytes =
      HeaderContentBytes(header->prefix.size() + header->namespace_id.size(),
                         header->segments.size(), chunks, inline_offset);
  // The header goes in one write op: within the format's bound and osd_max_write_size.
  if (header_bytes > kMaxHeaderBytes || header_bytes + kChunkOverheadBytes > max_write_bytes) {
    *why = "its header would need " + std::to_string(header_bytes) + " bytes (" +
           std::to_string(chunks) + " chunk objects; the limit is " +
           std::to_string(std::min(kMaxHeaderBytes, max_write_bytes - kChunkOverheadBytes)) +
           "; raise object_mib)";
    return false;
  }
  const uint64_t chunk_bytes = logical - std::min(logical, inline_offset);
  *worst_case_bytes =
      SaturatingAdd(SaturatingAdd(chunk_bytes, chunks * kChunkHeaderBytes), header_bytes);
  return true;
}

}  // namespace

uint64_t StoredBytes(const Header& h);

Status RadosProvider::Spill(const tier_key* key, const tier_segment* segments,
                            uint32_t segment_count, tier_done_fn done, void* user_data) {
  auto refuse = [&](Status status) {
    metrics_->Spill(status.code());
    return status;
  };
  if (key == nullptr || done == nullptr) {
    return refuse(Status::InvalidArgument("rados: spill: NULL key or callback"));
  }
  tier_error error{};
  if (tier_validate_segments("rados", segments, segment_count, &error) != TIER_OK) {
    return refuse(Status::InvalidArgument(error.message));
  }
  auto job = std::make_unique<SpillJob>();
  job->key = ToKey(key);
  job->segments.assign(segments, segments + segment_count);
  job->done = done;
  job->user_data = user_data;
  job->header.key = job->key;
  job->header.prefix = options_.namespace_prefix;
  job->header.namespace_id = namespace_id_;
  std::string why;
  uint64_t logical = 0;
  for (const tier_segment& s : job->segments) logical = SaturatingAdd(logical, s.length_bytes);
  const uint64_t budget = fleet_ ? options_.fleet_budget_bytes : options_.capacity_bytes;
  if (logical > budget) {
    return refuse(Status::NoSpace(
        "rados: a checkpoint of " + std::to_string(logical) + " bytes exceeds " +
        (fleet_ ? "fleet_budget_bytes=" : "capacity_bytes=") + std::to_string(budget)));
  }
  if (!PlanHeader(job->segments, options_.object_bytes, cluster_->limits().max_write_bytes,
                  &job->header, &job->worst_case_bytes, &why)) {
    return refuse(Status::InvalidArgument("rados: spill: " + why));
  }
  {
    std::lock_guard lock(mu_);
    if (spilling_.count(job->key) != 0) {
      return refuse(Status::AlreadyExists("rados: this key is being spilled"));
    }
    if (inflight_ops_.load() >= kMaxInflightOps) {
      return refuse(
          Status::Busy("rados: " + std::to_string(kMaxInflightOps) + " operations in flight"));
    }
    // With a fleet budget the shared ledger decides, on the runner (fleet_evict.cc).
    if (!fleet_ && SaturatingAdd(SaturatingAdd(counted_bytes_, reserved_bytes_),
                                 job->worst_case_bytes) > options_.capacity_bytes) {
      return refuse(Status::NoSpace(
          "rados: capacity_bytes=" + std::to_string(options_.capacity_bytes) +
          " would be exceeded (" + std::to_string(counted_bytes_) + " stored in the namespace, " +
          std::to_string(reserved_bytes_) + " reserved, this spill needs up to " +
          std::to_string(job->worst_case_bytes) + ")"));
    }
    spilling_.insert(job->key);
    reserved_bytes_ += job->worst_case_bytes;
    inflight_ops_.fetch_add(1);
  }
  const KeyBytes k = job->key;
  const uint64_t worst = job->worst_case_bytes;
  if (!QueueAccepted(std::move(job), &RadosProvider::RunSpill)) {
    {
      std::lock_guard lock(mu_);
      spilling_.erase(k);
      reserved_bytes_ -= worst;
    }
    inflight_ops_.fetch_sub(1);
    return refuse(Status::Internal("rados: spill: out of memory"));
  }
  return Status::Ok();
}

void RadosProvider::RefreshLease(SpillJob* job, bool wait) {
  std::shared_ptr<SpillJob::Lease> lease = job->lease;
  if (lease->refreshing.exchange(true)) return;
  const uint64_t submitted = Aio::NowNs();
  const std::string now = std::to_string(UnixNowNs());
  rados_write_op_t op = rados_create_write_op();
  if (op == nullptr) {
    lease->refreshing.store(false);
    return;
  }
  rados_write_op_assert_exists(op);
  rados_write_op_setxattr(op, kXattrLease, now.data(), now.size());
  auto done = std::make_shared<std::atomic<bool>>(false);
  const int rc = aio_->Write(LeaseName(job->key, job->header.spill_id), op,
                             LIBRADOS_OPERATION_FULL_TRY, [lease, submitted, done](int result) {
                               if (result == 0) lease->ok_ns.store(submitted);
                               // ENOENT: a sweep judged this spill dead and removed the lease; it
                               // must not publish.
                               if (result == -ENOENT) lease->lost.store(true);
                               lease->refreshing.store(false);
                               done->store(true);
                             });
  if (rc < 0) {
    lease->refreshing.store(false);
    return;
  }
  // Bounded by the op timeout; the wait is for the last refresh before a publish only.
  const uint64_t until = Deadline();
  while (wait && !done->load() && Aio::NowNs() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void RadosProvider::SpillChunk(SpillJob* job, uint32_t seq) {
  auto finish = [this, job] {
    window_->Release();
    job->window.End();  // last touch of the job
  };
  if (closing_.load()) job->window.Fail(Status::Cancelled("rados: closed during the spill"));
  if (job->window.failed.load()) return finish();
  const ChunkPlace& place = job->places[seq];
  const SegmentRecord& seg = job->header.segments[place.segment];
  const uint8_t* src = job->sources[place.segment] + place.offset;
  ChunkBinding b;
  b.key = job->key;
  b.spill_id = job->header.spill_id;
  b.kind = seg.kind;
  b.index = seg.index;
  b.chunk_index = place.chunk_index;
  b.seq = seq;
  b.offset = place.offset;
  b.logical_bytes = place.logical_bytes;
  b.stored_bytes = place.logical_bytes;
  b.codec = kCodecRaw;
  const uint8_t* payload = src;
  thread_local std::vector<uint8_t> frame;
  const bool try_zstd =
      options_.compression == CompressionMode::kZstd ||
      (options_.compression == CompressionMode::kAuto && !job->segment_raw[place.segment].load());
  if (try_zstd) {
    frame.resize(CompressBound(options_.object_bytes));
    const uint64_t n = Compress({src, place.logical_bytes}, frame, options_.zstd_level);
    // auto: a segment whose first chunk saves less than 1/8 is written raw from then on.
    if (options_.compression == CompressionMode::kAuto && place.chunk_index == 0 &&
        (n == 0 || n > place.logical_bytes - place.logical_bytes / 8)) {
      job->segment_raw[place.segment].store(true);
    }
    if (n > 0) {
      b.stored_bytes = static_cast<uint32_t>(n);
      b.codec = kCodecZstd;
      payload = frame.data();
    }
  }
  b.tag = PieceTag(sealer_, b, {src, place.logical_bytes});
  job->header.chunks[seq] = {b.logical_bytes, b.stored_bytes, b.codec, b.tag};
  uint8_t chunk_header[kChunkHeaderBytes];
  EncodeChunkHeader(b, chunk_header);
  rados_write_op_t op = rados_create_write_op();
  if (op == nullptr) {
    job->window.Fail(Status::Internal("rados: out of memory"));
    return finish();
  }
  // One atomic op; librados copies the bytes here, so the caller's buffer is not read later.
  rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, nullptr);
  rados_write_op_write_full(op, reinterpret_cast<const char*>(chunk_header), kChunkHeaderBytes);
  rados_write_op_write(op, reinterpret_cast<const char*>(payload), b.stored_bytes,
                       kChunkHeaderBytes);
  job->submitted[seq] = 1;
  const std::string oid = ChunkName(job->key, b.spill_id, seq);
  const int rc = aio_->Write(oid, op, LIBRADOS_OPERATION_FULL_TRY, [this, job, oid](int result) {
    if (result < 0) job->window.Fail(FromRados(result, "write chunk '" + oid + "'"));
    window_->Release();
    job->window.End();
  });
  if (rc < 0) {
    job->window.Fail(FromRados(rc, "submit chunk '" + oid + "'"));
    finish();
  }
}

uint64_t StoredBytes(const Header& h) {
  uint64_t stored = 0;
  for (const ChunkRecord& c : h.chunks) stored += kChunkHeaderBytes + c.stored_bytes;
  return stored + HeaderContentBytes(h.prefix.size() + h.namespace_id.size(), h.segments.size(),
                                     h.chunks.size(), h.inline_bytes.size());
}

Status RadosProvider::PublishHeader(SpillJob* job, bool* maybe_written) {
  *maybe_written = false;
  Header& h = job->header;
  const uint64_t stored = StoredBytes(h);
  h.stored_bytes = stored;
  h.created_unix_ns = UnixNowNs();
  const std::vector<uint8_t> content = EncodeHeader(h, sealer_);
  const std::string spill = Hex64(h.spill_id);
  const std::string chunks = std::to_string(h.chunks.size());
  const std::string stored_text = std::to_string(stored);
  const std::string used = std::to_string(h.created_unix_ns);
  rados_write_op_t op = rados_create_write_op();
  if (op == nullptr) return Status::Internal("rados: out of memory");
  rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, nullptr);
  rados_write_op_write_full(op, reinterpret_cast<const char*>(content.data()), content.size());
  rados_write_op_setxattr(op, kXattrSpill, spill.data(), spill.size());
  rados_write_op_setxattr(op, kXattrChunks, chunks.data(), chunks.size());
  rados_write_op_setxattr(op, kXattrStored, stored_text.data(), stored_text.size());
  rados_write_op_setxattr(op, kXattrUsed, used.data(), used.size());
  const std::string oid = HeaderName(job->key);
  const int rc = aio_->WriteSync(oid, op, LIBRADOS_OPERATION_FULL_TRY, Deadline());
  if (rc == 0) return Status::Ok();
  if (rc == -EEXIST) {
    return Status::AlreadyExists("rados: another server stored this key first");
  }
  // A full pool refuses before applying anything; any other failure may have landed.
  *maybe_written = rc != -EDQUOT && rc != -ENOSPC;
  return FromRados(rc, "publish header '" + oid + "'");
}

Status RadosProvider::RecheckLeaseAfterPublish(SpillJob* job) {
  // A sweep removes a lease before it reads the header (README.md, "The sweep rule"). The lease
  // still there now: any sweep that removes it later finds this header and keeps the chunks.
  // Gone: a sweep may have found no header and removed the chunks, so the header is withdrawn.
  const std::string lease = LeaseName(job->key, job->header.spill_id);
  rados_read_op_t op = rados_create_read_op();
  if (op == nullptr) return Status::Internal("rados: out of memory");
  rados_read_op_assert_exists(op);
  const int rc = aio_->ReadSync(lease, op, 0, Deadline());
  if (rc == 0) return Status::Ok();
  const Status withdrawn = RemoveHeaderIf(job->key, job->header.spill_id, Deadline());
  if (rc == -ENOENT) {
    return Status::IoError(
        "rados: the spill's lease was removed by a sweep before its header landed (held past "
        "lease_grace_s?); header " +
        std::string(withdrawn.ok() ? "withdrawn" : "withdrawal failed: " + withdrawn.ToString()));
  }
  return FromRados(rc, "check the lease after publishing (header withdrawn: " +
                           std::string(withdrawn.ok() ? "yes" : withdrawn.ToString()) + ")");
}

void RadosProvider::AbandonSpill(SpillJob* job, bool header_maybe_written) {
  const uint64_t spill_id = job->header.spill_id;
  if (header_maybe_written) {
    // Whether the header landed is unknown: take it back if it is ours. When the cluster does not
    // answer, everything stays and the sweep decides (a header holding this spill keeps it).
    const Status removed = RemoveHeaderIf(job->key, spill_id, Deadline());
    if (!removed.ok() && removed.code() != TIER_NOT_FOUND &&
        removed.code() != TIER_ALREADY_EXISTS) {
      return;
    }
  }
  std::vector<std::string> oids;
  for (uint32_t seq = 0; seq < job->submitted.size(); ++seq) {
    if (job->submitted[seq]) oids.push_back(ChunkName(job->key, spill_id, seq));
  }
  oids.push_back(LeaseName(job->key, spill_id));
  reaper_->Remove(std::move(oids));
}

void RadosProvider::FinishSpill(SpillJob* job, const Status& status) {
  {
    std::lock_guard lock(mu_);
    spilling_.erase(job->key);
    reserved_bytes_ -= job->worst_case_bytes;
    if (status.ok()) {
      counted_bytes_ += job->header.stored_bytes;
      ++counted_entries_;
    }
  }
  if (status.ok()) PublishUsage();
  Complete(job->done, job->user_data, job->accepted_ns, status, job->header.logical_bytes,
           status.ok() ? job->header.stored_bytes : 0, /*spill=*/true);
}

Status RadosProvider::BeginSpill(SpillJob* job) {
  job->header.spill_id = NewSpillId();
  const uint64_t deadline = Deadline();
  rados_read_op_t exists = rados_create_read_op();
  if (exists == nullptr) return Status::Internal("rados: out of memory");
  rados_read_op_assert_exists(exists);
  int rc = aio_->ReadSync(HeaderName(job->key), exists, 0, deadline);
  if (rc == 0) return Status::AlreadyExists("rados: a checkpoint with this key is stored");
  if (rc != -ENOENT) return FromRados(rc, "look up header");
  // The lease first: while it is fresh no sweep touches this spill's chunks.
  const uint64_t lease_submitted = Aio::NowNs();
  const std::string now = std::to_string(UnixNowNs());
  rados_write_op_t lease = rados_create_write_op();
  if (lease == nullptr) return Status::Internal("rados: out of memory");
  rados_write_op_create(lease, LIBRADOS_CREATE_EXCLUSIVE, nullptr);
  rados_write_op_setxattr(lease, kXattrLease, now.data(), now.size());
  rc = aio_->WriteSync(LeaseName(job->key, job->header.spill_id), lease,
                       LIBRADOS_OPERATION_FULL_TRY, deadline);
  if (rc < 0) return FromRados(rc, "create lease");
  job->lease->ok_ns.store(lease_submitted);
  return Status::Ok();
}

Status RadosProvider::WriteChunks(SpillJob* job) {
  SpillJob& j = *job;
  // Inline segments into the header; the rest are chunks.
  j.sources.resize(j.header.segments.size());
  for (size_t s = 0; s < j.header.segments.size(); ++s) {
    const SegmentRecord& r = j.header.segments[s];
    const auto* data = static_cast<const uint8_t*>(j.segments[s].data);
    j.sources[s] = data;
    if (r.storage == kStorageInline) {
      j.header.inline_bytes.insert(j.header.inline_bytes.end(), data, data + r.logical_bytes);
      // Bound to its key, spill and place as a chunk is (spill id known now).
      j.header.segments[s].tag =
          PieceTag(sealer_, InlineBinding(j.header, r), {data, r.logical_bytes});
    }
  }
  j.places = ChunkPlaces(j.header);
  j.submitted.assign(j.places.size(), 0);
  j.segment_raw = std::make_unique<std::atomic<bool>[]>(j.header.segments.size());
  j.window.Begin(static_cast<uint32_t>(j.places.size()));
  for (uint32_t seq = 0; seq < j.places.size(); ++seq) {
    window_->Enqueue([this, job, seq] { SpillChunk(job, seq); });
  }
  const uint64_t refresh_ns = uint64_t{options_.lease_grace_s} * kSecondNs / 4;
  while (!j.window.WaitIdleFor(kSecondNs / 4)) {
    if (j.lease->lost.load()) {
      j.window.Fail(Status::IoError("rados: the spill's lease was removed by a sweep"));
    }
    if (!j.window.failed.load() && Aio::NowNs() - j.lease->ok_ns.load() > refresh_ns) {
      RefreshLease(job, /*wait=*/false);
    }
  }
  if (j.window.failed.load()) return j.window.error();
  if (closing_.load()) return Status::Cancelled("rados: closed during the spill");
  // Publish only well inside the grace: a sweep needs the lease stale for the whole grace.
  const uint64_t half_grace_ns = uint64_t{options_.lease_grace_s} * kSecondNs / 2;
  if (Aio::NowNs() - j.lease->ok_ns.load() > half_grace_ns) RefreshLease(job, /*wait=*/true);
  if (j.lease->lost.load() || Aio::NowNs() - j.lease->ok_ns.load() > half_grace_ns) {
    return Status::IoError("rados: the spill's lease could not be kept fresh; not published");
  }
  return Status::Ok();
}

void RadosProvider::RunSpill(SpillJob* job) {
  // What runs after the completion (cleanup must not delay it), then the job ends. Once the
  // lease step was tried, a failure abandons the spill (a lease that timed out may exist).
  enum class After { kNothing, kAbandon, kAbandonMaybePublished, kDropLease };
  After after = After::kNothing;
  Status status;
  bool maybe_written = false;
  if (closing_.load()) {
    status = Status::Cancelled("rados: closed before the spill started");
  } else if (fleet_ && !(status = FleetReserve(job)).ok()) {
    // The fleet is full of checkpoints being restored, or the ledger did not answer.
  } else if (status = BeginSpill(job); status.ok() || status.code() != TIER_ALREADY_EXISTS) {
    after = After::kAbandon;
    if (status.ok()) status = WriteChunks(job);
    if (status.ok() && hooks_.before_publish) hooks_.before_publish(job->key);
    if (status.ok() && fleet_) {
      // Counted as stored before it can be seen: a crash from here on leaves the count high.
      const uint64_t stored = StoredBytes(job->header);
      status = fleet_->Commit(job->fleet_reserved_bytes, stored);
      if (status.ok()) {
        job->fleet_reserved_bytes = 0;
        job->fleet_committed_bytes = stored;
      }
    }
    if (status.ok()) status = PublishHeader(job, &maybe_written);
    if (status.ok()) {
      status = RecheckLeaseAfterPublish(job);
      maybe_written = !status.ok();  // withdrawn, or unknown: cleanup checks the header again
    }
    if (status.ok()) after = After::kDropLease;
    if (maybe_written) after = After::kAbandonMaybePublished;
  }
  if (status.ok()) CacheHeader(std::make_shared<const Header>(job->header));
  if (fleet_) FleetSettleSpill(job, status);
  FinishSpill(job, status);
  if (after == After::kAbandon || after == After::kAbandonMaybePublished) {
    AbandonSpill(job, after == After::kAbandonMaybePublished);
  } else if (after == After::kDropLease) {
    reaper_->Remove({LeaseName(job->key, job->header.spill_id)});
  }
  delete job;
  JobFinished();
}

}  // namespace tier::rados
