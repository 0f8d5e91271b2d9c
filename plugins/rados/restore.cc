// restore: at acceptance the header (cached by stat/plan_restore/spill, else read) fixes the
// segment table the caller must match and is pinned; on a runner, inline segments are copied
// out of the header (their tags were verified when it was parsed) and every chunk object is read
// straight into the caller's buffer (compressed ones through a staging buffer) with up to
// queue_depth reads in flight, and verified on the workers: exact size, the binding of its chunk
// header (key, spill id, segment, chunk index, offset, lengths, codec) and the tag the header
// recorded. A chunk that is missing, short or
// fails verification is never served: if the header is gone or holds another spill meanwhile the
// checkpoint was removed or replaced (NOT_FOUND, or one retry on the replacement); if the header
// still holds this spill the checkpoint is damaged: DATA_LOSS, and it is removed.
#include <cerrno>
#include <cstring>

#include "catalog.h"
#include "codec.h"
#include "job.h"
#include "tier_validate.h"

namespace tier::rados {
namespace {

// The caller's buffer for each header segment, when `segments` lists exactly the stored ones.
bool MatchTable(const Header& header, std::span<const tier_segment> segments,
                std::vector<uint8_t*>* targets, std::string* why) {
  if (segments.size() != header.segments.size()) {
    *why = std::to_string(segments.size()) + " segments given, " +
           std::to_string(header.segments.size()) + " stored";
    return false;
  }
  targets->assign(header.segments.size(), nullptr);
  std::vector<uint8_t> used(header.segments.size(), 0);
  for (const tier_segment& s : segments) {
    bool matched = false;
    for (size_t h = 0; h < header.segments.size(); ++h) {
      const SegmentRecord& r = header.segments[h];
      if (r.kind != s.kind || r.index != s.index) continue;
      if (used[h] || r.logical_bytes != s.length_bytes) break;
      used[h] = 1;
      (*targets)[h] = static_cast<uint8_t*>(s.data);
      matched = true;
      break;
    }
    if (!matched) {
      *why = "segment kind " + std::to_string(s.kind) + " index " + std::to_string(s.index) +
             " of " + std::to_string(s.length_bytes) + " bytes is not stored so";
      return false;
    }
  }
  return true;
}

// One chunk read's results; the keepalive of its operation.
struct ChunkRead {
  uint8_t header[kChunkHeaderBytes] = {};
  uint64_t size = 0;
  int stat_rval = 0;
  size_t header_read = 0;
  int header_rval = 0;
  size_t payload_read = 0;
  int payload_rval = 0;
  std::vector<uint8_t> staging;  // compressed payload
};

}  // namespace

Status RadosProvider::Restore(const tier_key* key, const tier_segment* segments,
                              uint32_t segment_count, tier_done_fn done, void* user_data) {
  auto refuse = [&](Status status) {
    metrics_->Restore(status.code());
    return status;
  };
  if (key == nullptr || done == nullptr || (segment_count > 0 && segments == nullptr)) {
    return refuse(Status::InvalidArgument("rados: restore: NULL key, segments or callback"));
  }
  if (segment_count == 0 || segment_count > TIER_MAX_SEGMENTS) {
    return refuse(Status::InvalidArgument("rados: restore: segment count " +
                                          std::to_string(segment_count) + " not in [1, " +
                                          std::to_string(TIER_MAX_SEGMENTS) + "]"));
  }
  if (inflight_ops_.load() >= kMaxInflightOps) {
    return refuse(
        Status::Busy("rados: " + std::to_string(kMaxInflightOps) + " operations in flight"));
  }
  const KeyBytes k = ToKey(key);
  std::shared_ptr<const Header> header = CachedHeader(k);
  bool from_cache = header != nullptr;
  std::vector<uint8_t*> targets;
  std::string why;
  for (;;) {
    if (!header) {
      Result<FetchedHeader> fetched = ReadHeader(k, Deadline());
      if (!fetched.ok()) return refuse(fetched.status());
      if (Status ns = CheckNamespace(*fetched->header); !ns.ok()) return refuse(ns);
      header = fetched->header;
      CacheHeader(header);
    }
    // The count first: the table is read only within the stored segment count.
    const bool count_ok = segment_count == header->segments.size();
    tier_error error{};
    if (count_ok && tier_validate_segments("rados", segments, segment_count, &error) != TIER_OK) {
      return refuse(Status::InvalidArgument(error.message));
    }
    if (count_ok && MatchTable(*header, {segments, segment_count}, &targets, &why)) break;
    if (!count_ok)
      why = std::to_string(segment_count) + " segments given, " +
            std::to_string(header->segments.size()) + " stored";
    if (!from_cache) {
      return refuse(
          Status::InvalidArgument("rados: restore: the segment table does not match "
                                  "the stored checkpoint (" +
                                  why + ")"));
    }
    header.reset();  // the cached header may be stale: read it once more
    from_cache = false;
  }
  auto job = std::make_unique<RestoreJob>();
  job->key = k;
  job->segments.assign(segments, segments + segment_count);
  job->done = done;
  job->user_data = user_data;
  job->header = header;
  job->targets = std::move(targets);
  Pin(k, header->spill_id);
  inflight_ops_.fetch_add(1);
  if (!QueueAccepted(std::move(job), &RadosProvider::RunRestore)) {
    inflight_ops_.fetch_sub(1);
    Unpin(k, header->spill_id);
    return refuse(Status::Internal("rados: restore: out of memory"));
  }
  return Status::Ok();
}

void RadosProvider::RestoreChunk(RestoreJob* job, uint32_t seq) {
  if (closing_.load()) job->window.Fail(Status::Cancelled("rados: closed during the restore"));
  if (job->window.failed.load() || job->suspicious.load()) {
    window_->Release();
    job->window.End();
    return;
  }
  const Header& h = *job->header;
  const ChunkPlace place = job->places[seq];
  const ChunkRecord record = h.chunks[seq];
  const SegmentRecord& seg = h.segments[place.segment];
  uint8_t* target = job->targets[place.segment] + place.offset;
  const bool compressed = record.codec == kCodecZstd;
  auto state = std::make_shared<ChunkRead>();
  if (compressed) state->staging.resize(record.stored_bytes);
  char* payload =
      compressed ? reinterpret_cast<char*>(state->staging.data()) : reinterpret_cast<char*>(target);
  rados_read_op_t op = rados_create_read_op();
  if (op == nullptr) {
    job->window.Fail(Status::Internal("rados: out of memory"));
    window_->Release();
    job->window.End();
    return;
  }
  rados_read_op_stat(op, &state->size, nullptr, &state->stat_rval);
  rados_read_op_read(op, 0, kChunkHeaderBytes, reinterpret_cast<char*>(state->header),
                     &state->header_read, &state->header_rval);
  rados_read_op_read(op, kChunkHeaderBytes, record.stored_bytes, payload, &state->payload_read,
                     &state->payload_rval);
  ChunkBinding want;
  want.key = job->key;
  want.spill_id = h.spill_id;
  want.kind = seg.kind;
  want.index = seg.index;
  want.chunk_index = place.chunk_index;
  want.seq = seq;
  want.offset = place.offset;
  want.logical_bytes = record.logical_bytes;
  want.stored_bytes = record.stored_bytes;
  want.codec = record.codec;
  want.tag = record.tag;
  const std::string oid = ChunkName(job->key, h.spill_id, seq);
  auto suspect = [job, oid](const std::string& what) {
    {
      std::lock_guard lock(job->suspicion_mu);
      if (job->suspicion.empty()) job->suspicion = "chunk '" + oid + "' " + what;
    }
    job->suspicious.store(true);
  };
  // On a worker, after the read: every check, then (compressed) decompression into the target.
  auto verify = [this, job, state, want, target, compressed, oid, suspect](int rc) {
    if (rc == -ENOENT) {
      suspect("is missing");
    } else if (rc < 0) {
      // Recorded by the read's callback already.
    } else {
      ChunkBinding got;
      const std::span<uint8_t> logical(target, want.logical_bytes);
      if (state->size != kChunkHeaderBytes + uint64_t{want.stored_bytes} ||
          state->header_read != kChunkHeaderBytes || state->payload_read != want.stored_bytes) {
        suspect("has " + std::to_string(state->size) + " bytes, not " +
                std::to_string(kChunkHeaderBytes + uint64_t{want.stored_bytes}));
      } else if (!ParseChunkHeader(state->header, &got) || !SameBinding(got, want)) {
        suspect("belongs to another place, spill or key");
      } else if (compressed && !Decompress(state->staging, logical)) {
        suspect("holds a damaged zstd frame");
      } else if (!SameTag(PieceTag(sealer_, want, logical), want.tag)) {
        suspect("fails its tag");
      }
    }
    if (compressed) window_->Release();  // the staging buffer is gone now
    job->window.End();
  };
  const int rc = aio_->Read(
      oid, op, 0,
      [this, job, oid, compressed, verify](int result) {
        // A failure stops the queued chunks before this slot starts another.
        if (result < 0 && result != -ENOENT) {
          job->window.Fail(FromRados(result, "read chunk '" + oid + "'"));
        }
        if (!compressed) window_->Release();  // the bytes are in place; verification is CPU
        workers_->Post([verify, result] { verify(result); });
      },
      state);
  if (rc < 0) {
    job->window.Fail(FromRados(rc, "submit read of '" + oid + "'"));
    window_->Release();
    job->window.End();
  }
}

Status RadosProvider::RestoreChunks(RestoreJob* job) {
  const Header& h = *job->header;
  for (size_t s = 0; s < h.segments.size(); ++s) {
    const SegmentRecord& r = h.segments[s];
    if (r.storage == kStorageInline && r.logical_bytes > 0) {
      std::memcpy(job->targets[s], h.inline_bytes.data() + r.inline_offset, r.logical_bytes);
    }
  }
  job->places = ChunkPlaces(h);
  job->window.Begin(static_cast<uint32_t>(job->places.size()));
  for (uint32_t seq = 0; seq < job->places.size(); ++seq) {
    window_->Enqueue([this, job, seq] { RestoreChunk(job, seq); });
  }
  job->window.WaitIdleFor(UINT64_MAX / 4);
  if (job->window.failed.load()) return job->window.error();
  return Status::Ok();
}

Status RadosProvider::RecheckAfterSuspicion(RestoreJob* job, bool* retry) {
  *retry = false;
  const uint64_t spill_id = job->header->spill_id;
  std::string suspicion;
  {
    std::lock_guard lock(job->suspicion_mu);
    suspicion = job->suspicion;
  }
  const uint64_t deadline = Deadline();
  Result<uint64_t> now = ReadSpillId(job->key, deadline);
  if (now.status().code() == TIER_NOT_FOUND) {
    ForgetHeader(job->key, spill_id);
    return Status::NotFound("rados: the checkpoint was removed during the restore");
  }
  if (!now.ok() && now.status().code() != TIER_DATA_LOSS) return now.status();
  if (now.ok() && now.value() != spill_id) {
    // Removed and spilled again by another server: restore the new one if it has this table.
    ForgetHeader(job->key, spill_id);
    if (job->retried) return Status::NotFound("rados: the checkpoint was replaced twice");
    Result<FetchedHeader> fetched = ReadHeader(job->key, deadline);
    if (!fetched.ok()) return fetched.status();
    TIER_RETURN_IF_ERROR(CheckNamespace(*fetched->header));
    std::vector<uint8_t*> targets;
    std::string why;
    if (!MatchTable(*fetched->header, job->segments, &targets, &why)) {
      return Status::NotFound("rados: the checkpoint was replaced by one of another layout");
    }
    Pin(job->key, fetched->header->spill_id);
    Unpin(job->key, spill_id);
    CacheHeader(fetched->header);
    job->header = fetched->header;
    job->targets = std::move(targets);
    job->retried = true;
    job->suspicious.store(false);
    job->suspicion.clear();
    *retry = true;
    return Status::Ok();
  }
  // The header still names this spill: the stored checkpoint is damaged. Never served; removed.
  metrics_->DataLoss(DataLossWhere::kRestore);
  Log(TIER_LOG_ERROR, "rados: checkpoint '" + HeaderName(job->key) + "' (spill " + Hex64(spill_id) +
                          ") is damaged: " + suspicion + "; removing it");
  if (RemoveHeaderIf(job->key, spill_id, deadline).ok()) {
    {
      std::lock_guard lock(mu_);
      counted_bytes_ -= std::min(counted_bytes_, job->header->stored_bytes);
      if (counted_entries_ > 0) --counted_entries_;
    }
    FleetGiveBack(job->header->stored_bytes);
  }
  ForgetHeader(job->key, spill_id);
  DropChunks(job->key, spill_id, static_cast<uint32_t>(job->header->chunks.size()));
  PublishUsage();
  return Status::DataLoss("rados: " + suspicion);
}

void RadosProvider::RunRestore(RestoreJob* job) {
  Status status = [&]() -> Status {
    if (fleet_ && !closing_.load()) {
      // No server evicts a key pinned in the fleet ledger; one being evicted is a miss.
      TIER_RETURN_IF_ERROR(fleet_->Pin(Hex({job->key.data(), job->key.size()})));
      job->fleet_pinned = true;
      if (hooks_.restore_pinned) hooks_.restore_pinned(job->key);
    }
    for (;;) {
      if (closing_.load()) return Status::Cancelled("rados: closed before the restore ran");
      TIER_RETURN_IF_ERROR(RestoreChunks(job));
      if (!job->suspicious.load()) return Status::Ok();
      bool retry = false;
      Status recheck = RecheckAfterSuspicion(job, &retry);
      if (!retry) return recheck;
    }
  }();
  FinishRestore(job, status);
}

void RadosProvider::FinishRestore(RestoreJob* job, const Status& status) {
  const Header& h = *job->header;
  if (status.ok()) {
    ObserveRestore(h.stored_bytes, Aio::NowNs() - job->accepted_ns);
    Touch(job->key, h.spill_id);
  }
  Complete(job->done, job->user_data, job->accepted_ns, status, h.logical_bytes,
           status.ok() ? h.stored_bytes : 0, /*spill=*/false);
  Unpin(job->key, h.spill_id);
  if (job->fleet_pinned) {
    Status unpinned = fleet_->Unpin(Hex({job->key.data(), job->key.size()}));
    if (!unpinned.ok()) Log(TIER_LOG_WARN, "rados: fleet: unpin: " + unpinned.message());
  }
  delete job;
  JobFinished();
}

}  // namespace tier::rados
