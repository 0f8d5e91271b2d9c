// The catalog: header reads and the cache, pins, and the synchronous ABI operations (stat,
// remove, probe, enumerate, plan_restore). Every cluster round trip is bounded by Deadline().
#include "catalog.h"

#include <cerrno>
#include <cstring>
#include <limits>

#include "job.h"
#include "rados_provider.h"
#include "tier/provider/restore_plan.h"

namespace tier::rados {

HeaderReadState::~HeaderReadState() {
  if (xattrs != nullptr) rados_getxattrs_end(xattrs);
}

void HeaderReadState::AddTo(rados_read_op_t op) {
  rados_read_op_stat(op, &size, nullptr, &stat_rval);
  rados_read_op_read(op, 0, buffer.size(), reinterpret_cast<char*>(buffer.data()), &bytes_read,
                     &read_rval);
  rados_read_op_getxattrs(op, &xattrs, &xattr_rval);
}

std::map<std::string, std::string> HeaderReadState::Xattrs() {
  std::map<std::string, std::string> out;
  if (xattrs == nullptr || xattr_rval < 0) return out;
  for (;;) {
    const char* name = nullptr;
    const char* value = nullptr;
    size_t len = 0;
    if (rados_getxattrs_next(xattrs, &name, &value, &len) < 0 || name == nullptr) break;
    out.emplace(name, std::string(value, len));
  }
  return out;
}

Status ListObjects(rados_ioctx_t io, uint64_t max_objects, uint64_t deadline_ns,
                   const std::function<bool(const std::string&)>& fn, bool* truncated) {
  *truncated = false;
  rados_list_ctx_t ctx = nullptr;
  if (const int rc = rados_nobjects_list_open(io, &ctx); rc < 0) {
    return FromRados(rc, "list the namespace");
  }
  Status status;
  for (uint64_t n = 0;; ++n) {
    if (n >= max_objects || Aio::NowNs() >= deadline_ns) {
      *truncated = true;
      break;
    }
    const char* entry = nullptr;
    size_t entry_len = 0;
    const int rc =
        rados_nobjects_list_next2(ctx, &entry, nullptr, nullptr, &entry_len, nullptr, nullptr);
    if (rc == -ENOENT) break;
    if (rc < 0) {
      status = FromRados(rc, "list the namespace");
      break;
    }
    if (!fn(std::string(entry, entry_len))) break;
  }
  rados_nobjects_list_close(ctx);
  return status;
}

Status FromRados(int rc, const std::string& what) {
  const int err = rc < 0 ? -rc : rc;
  const std::string note =
      err == ETIMEDOUT ? " (no answer within op_timeout_s; the outcome is unknown)" : "";
  return Status(err == ENOSPC || err == EDQUOT ? TIER_NO_SPACE : TIER_IO_ERROR,
                "rados: " + what + ": " + Status::ErrnoText(err) + note);
}

// ---- headers ------------------------------------------------------------------------------------

namespace {

constexpr uint64_t kFirstHeaderRead = 64u << 10;

bool ParseU64Text(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 20 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno != 0) return false;
  *out = v;
  return true;
}

}  // namespace

Result<FetchedHeader> RadosProvider::ReadHeader(const KeyBytes& key, uint64_t deadline_ns) {
  const std::string oid = HeaderName(key);
  auto state = std::make_shared<HeaderReadState>(kFirstHeaderRead);
  rados_read_op_t op = rados_create_read_op();
  if (op == nullptr) return Status::Internal("rados: out of memory");
  state->AddTo(op);
  int rc = aio_->ReadSync(oid, op, 0, deadline_ns, state);
  if (rc == -ENOENT) return Status::NotFound("rados: no checkpoint with this key");
  if (rc < 0) return FromRados(rc, "read header '" + oid + "'");
  std::vector<uint8_t> content;
  if (state->size > kMaxHeaderBytes) {
    return Status::DataLoss("rados: header '" + oid + "' of " + std::to_string(state->size) +
                            " bytes exceeds the format's bound");
  }
  if (state->size <= state->buffer.size()) {
    content.assign(state->buffer.begin(), state->buffer.begin() + state->bytes_read);
  } else {
    auto rest = std::make_shared<HeaderReadState>(state->size);
    rados_read_op_t op2 = rados_create_read_op();
    if (op2 == nullptr) return Status::Internal("rados: out of memory");
    rest->AddTo(op2);
    rc = aio_->ReadSync(oid, op2, 0, deadline_ns, rest);
    if (rc == -ENOENT) return Status::NotFound("rados: no checkpoint with this key");
    if (rc < 0) return FromRados(rc, "read header '" + oid + "'");
    content.assign(rest->buffer.begin(), rest->buffer.begin() + rest->bytes_read);
    state = rest;
  }
  auto header = std::make_shared<Header>();
  std::string why;
  if (!ParseHeader(content, sealer_, header.get(), &why) || header->key != key) {
    return Status::DataLoss("rados: header '" + oid + "' is damaged (" +
                            (why.empty() ? "another key" : why) + ")");
  }
  FetchedHeader out;
  const auto xattrs = state->Xattrs();
  if (auto it = xattrs.find(kXattrUsed); it != xattrs.end()) {
    ParseU64Text(it->second, &out.used_unix_ns);
  }
  out.header = std::move(header);
  return out;
}

Result<uint64_t> RadosProvider::ReadSpillId(const KeyBytes& key, uint64_t deadline_ns) {
  const std::string oid = HeaderName(key);
  auto state = std::make_shared<HeaderReadState>(0);
  rados_read_op_t op = rados_create_read_op();
  if (op == nullptr) return Status::Internal("rados: out of memory");
  rados_read_op_stat(op, &state->size, nullptr, &state->stat_rval);
  rados_read_op_getxattrs(op, &state->xattrs, &state->xattr_rval);
  const int rc = aio_->ReadSync(oid, op, 0, deadline_ns, state);
  if (rc == -ENOENT) return Status::NotFound("rados: no checkpoint with this key");
  if (rc < 0) return FromRados(rc, "read header xattrs '" + oid + "'");
  const auto xattrs = state->Xattrs();
  uint64_t spill_id = 0;
  auto it = xattrs.find(kXattrSpill);
  if (it == xattrs.end() || !ParseHex64(it->second, &spill_id)) {
    return Status::DataLoss("rados: header '" + oid + "' has no valid " + kXattrSpill);
  }
  return spill_id;
}

Status RadosProvider::RemoveHeaderIf(const KeyBytes& key, uint64_t spill_id, uint64_t deadline_ns) {
  const std::string oid = HeaderName(key);
  const std::string id = Hex64(spill_id);
  rados_write_op_t op = rados_create_write_op();
  if (op == nullptr) return Status::Internal("rados: out of memory");
  rados_write_op_assert_exists(op);
  rados_write_op_cmpxattr(op, kXattrSpill, LIBRADOS_CMPXATTR_OP_EQ, id.data(), id.size());
  rados_write_op_remove(op);
  const int rc = aio_->WriteSync(oid, op, LIBRADOS_OPERATION_FULL_FORCE, deadline_ns);
  if (rc == 0) return Status::Ok();
  if (rc == -ENOENT) return Status::NotFound("rados: no checkpoint with this key");
  if (rc == -ECANCELED) {
    return Status::AlreadyExists("rados: '" + oid + "' now holds another spill than " + id);
  }
  return FromRados(rc, "remove header '" + oid + "'");
}

void RadosProvider::DropChunks(const KeyBytes& key, uint64_t spill_id, uint32_t chunk_count) {
  {
    std::lock_guard lock(mu_);
    auto it = pins_.find({key, spill_id});
    if (it != pins_.end()) {
      it->second.doomed = true;
      it->second.chunk_count = chunk_count;
      return;
    }
  }
  std::vector<std::string> oids;
  oids.reserve(chunk_count + 1);
  for (uint32_t seq = 0; seq < chunk_count; ++seq) oids.push_back(ChunkName(key, spill_id, seq));
  oids.push_back(LeaseName(key, spill_id));
  reaper_->Remove(std::move(oids));
}

std::shared_ptr<const Header> RadosProvider::CachedHeader(const KeyBytes& key) {
  std::lock_guard lock(mu_);
  auto it = cache_index_.find(key);
  if (it == cache_index_.end()) return nullptr;
  cache_.splice(cache_.begin(), cache_, it->second);
  return *it->second;
}

void RadosProvider::CacheHeader(std::shared_ptr<const Header> header) {
  std::lock_guard lock(mu_);
  auto it = cache_index_.find(header->key);
  if (it != cache_index_.end()) {
    cache_.erase(it->second);
    cache_index_.erase(it);
  }
  cache_.push_front(header);
  cache_index_[header->key] = cache_.begin();
  while (cache_.size() > kHeaderCacheEntries) {
    cache_index_.erase(cache_.back()->key);
    cache_.pop_back();
  }
}

void RadosProvider::ForgetHeader(const KeyBytes& key, uint64_t spill_id) {
  std::lock_guard lock(mu_);
  auto it = cache_index_.find(key);
  if (it == cache_index_.end() || (spill_id != 0 && (*it->second)->spill_id != spill_id)) return;
  cache_.erase(it->second);
  cache_index_.erase(it);
}

void RadosProvider::Pin(const KeyBytes& key, uint64_t spill_id) {
  std::lock_guard lock(mu_);
  ++pins_[{key, spill_id}].restores;
}

void RadosProvider::Unpin(const KeyBytes& key, uint64_t spill_id) {
  uint32_t drop_chunks = 0;
  bool drop = false;
  {
    std::lock_guard lock(mu_);
    auto it = pins_.find({key, spill_id});
    TIER_CHECK(it != pins_.end() && it->second.restores > 0);
    if (--it->second.restores > 0) return;
    drop = it->second.doomed;
    drop_chunks = it->second.chunk_count;
    pins_.erase(it);
  }
  if (drop) DropChunks(key, spill_id, drop_chunks);
}

Status RadosProvider::CheckNamespace(const Header& header) const {
  if (header.prefix == options_.namespace_prefix && header.namespace_id == namespace_id_) {
    return Status::Ok();
  }
  // Another namespace whose digest collides with ours: never served.
  return Status::NotFound("rados: the stored checkpoint belongs to another namespace");
}

uint64_t RadosProvider::EstimateRestoreNs(uint64_t stored_bytes) const {
  std::lock_guard lock(mu_);
  constexpr uint64_t kFixedNs = 2'000'000;  // header read, scheduling, round trips
  return kFixedNs +
         static_cast<uint64_t>(1e9 * static_cast<double>(stored_bytes) / restore_bytes_per_second_);
}

void RadosProvider::ObserveRestore(uint64_t stored_bytes, uint64_t duration_ns) {
  if (stored_bytes < (1u << 20) || duration_ns == 0) return;
  const double bps = 1e9 * static_cast<double>(stored_bytes) / static_cast<double>(duration_ns);
  std::lock_guard lock(mu_);
  restore_bytes_per_second_ = 0.75 * restore_bytes_per_second_ + 0.25 * bps;
}

void RadosProvider::Touch(const KeyBytes& key, uint64_t spill_id) {
  if (touches_inflight_.fetch_add(1) >= kMaxTouchesInflight) {
    touches_inflight_.fetch_sub(1);  // best effort: skip when too many are in flight
    return;
  }
  const std::string id = Hex64(spill_id);
  const std::string now = std::to_string(UnixNowNs());
  rados_write_op_t op = rados_create_write_op();
  int rc = -ENOMEM;
  if (op != nullptr) {
    // Never creates the object: it must exist and still hold this spill.
    rados_write_op_assert_exists(op);
    rados_write_op_cmpxattr(op, kXattrSpill, LIBRADOS_CMPXATTR_OP_EQ, id.data(), id.size());
    rados_write_op_setxattr(op, kXattrUsed, now.data(), now.size());
    rc = aio_->Write(HeaderName(key), op, LIBRADOS_OPERATION_FULL_TRY,
                     [this](int) { touches_inflight_.fetch_sub(1); });
  }
  if (rc < 0) touches_inflight_.fetch_sub(1);
}

// ---- synchronous operations --------------------------------------------------------------------

Status RadosProvider::Stat(const tier_key* key, tier_stat_result* out, tier_segment_info* segments,
                           uint32_t segment_capacity) {
  if (key == nullptr || out == nullptr || (segment_capacity > 0 && segments == nullptr)) {
    return Status::InvalidArgument("rados: stat: NULL key, out or segments");
  }
  Result<FetchedHeader> fetched = ReadHeader(ToKey(key), Deadline());
  if (!fetched.ok()) return fetched.status();
  const Header& h = *fetched->header;
  TIER_RETURN_IF_ERROR(CheckNamespace(h));
  CacheHeader(fetched->header);
  if (TIER_HAS_FIELD(out, tier_stat_result, segment_count)) {
    out->segment_count = static_cast<uint32_t>(h.segments.size());
  }
  if (TIER_HAS_FIELD(out, tier_stat_result, logical_bytes)) out->logical_bytes = h.logical_bytes;
  if (TIER_HAS_FIELD(out, tier_stat_result, stored_bytes)) out->stored_bytes = h.stored_bytes;
  if (TIER_HAS_FIELD(out, tier_stat_result, estimated_restore_ns)) {
    out->estimated_restore_ns = EstimateRestoreNs(h.stored_bytes);
  }
  const size_t n = std::min<size_t>(segment_capacity, h.segments.size());
  for (size_t i = 0; i < n; ++i) {
    segments[i] = {h.segments[i].kind, h.segments[i].index, h.segments[i].logical_bytes};
  }
  return Status::Ok();
}

Status RadosProvider::Remove(const tier_key* key) {
  if (key == nullptr) {
    metrics_->Remove(TIER_INVALID_ARGUMENT);
    return Status::InvalidArgument("rados: remove: NULL key");
  }
  const KeyBytes k = ToKey(key);
  const uint64_t deadline = Deadline();
  Status status;
  // The header says which spill holds the key; the remove is conditional on it, so a spill that
  // another server published meanwhile is never removed by mistake (then: read again, once).
  for (int attempt = 0; attempt < 2; ++attempt) {
    Result<FetchedHeader> fetched = ReadHeader(k, deadline);
    if (!fetched.ok() && fetched.status().code() != TIER_DATA_LOSS) {
      status = fetched.status();
      break;
    }
    uint64_t spill_id = 0;
    uint32_t chunk_count = 0;
    uint64_t stored_bytes = 0;
    if (fetched.ok()) {
      TIER_RETURN_IF_ERROR(CheckNamespace(*fetched->header));
      spill_id = fetched->header->spill_id;
      chunk_count = static_cast<uint32_t>(fetched->header->chunks.size());
      stored_bytes = fetched->header->stored_bytes;
    } else {
      // A damaged header: remove it by its xattr; its chunks are then orphans for the sweep.
      Result<uint64_t> id = ReadSpillId(k, deadline);
      if (!id.ok()) {
        status = id.status();
        break;
      }
      spill_id = id.value();
    }
    status = RemoveHeaderIf(k, spill_id, deadline);
    if (status.code() == TIER_ALREADY_EXISTS) continue;  // re-spilled meanwhile
    if (!status.ok()) break;
    ForgetHeader(k, 0);
    {
      std::lock_guard lock(mu_);
      counted_bytes_ -= std::min(counted_bytes_, stored_bytes);
      if (counted_entries_ > 0) --counted_entries_;
    }
    FleetGiveBack(stored_bytes);
    if (fetched.ok()) DropChunks(k, spill_id, chunk_count);
    break;
  }
  if (status.code() == TIER_ALREADY_EXISTS) {
    status = Status::Busy("rados: remove: the key was re-spilled twice meanwhile; try again");
  }
  metrics_->Remove(status.code());
  if (status.ok()) PublishUsage();
  return status;
}

namespace {

// A wave of read ops submitted together and waited for together.
struct Wave {
  std::mutex mu;
  std::condition_variable cv;
  uint32_t pending = 0;
  std::vector<int> rcs;
};

}  // namespace

Status RadosProvider::Probe(const tier_key* keys, uint32_t key_count, uint8_t* found) {
  if (keys == nullptr || found == nullptr) {
    return Status::InvalidArgument("rados: probe needs keys and found");
  }
  if (key_count == 0 || key_count > TIER_PROBE_MAX_KEYS) {
    return Status::InvalidArgument("rados: probe takes 1 to " +
                                   std::to_string(TIER_PROBE_MAX_KEYS) + " keys, got " +
                                   std::to_string(key_count));
  }
  const uint64_t deadline = Deadline();
  // One stat per header object, kMetadataWave in flight at once: a header exists only whole.
  for (uint32_t first = 0; first < key_count; first += kMetadataWave) {
    const uint32_t n = std::min(kMetadataWave, key_count - first);
    auto wave = std::make_shared<Wave>();
    wave->rcs.assign(n, 0);
    std::vector<uint64_t> ids(n, 0);
    for (uint32_t i = 0; i < n; ++i) {
      rados_read_op_t op = rados_create_read_op();
      if (op == nullptr) return Status::Internal("rados: out of memory");
      rados_read_op_assert_exists(op);
      {
        std::lock_guard lock(wave->mu);
        ++wave->pending;
      }
      const int rc = aio_->Read(
          HeaderName(ToKey(&keys[first + i])), op, 0,
          [wave, i](int result) {
            std::lock_guard lock(wave->mu);
            wave->rcs[i] = result;
            if (--wave->pending == 0) wave->cv.notify_all();
          },
          nullptr, &ids[i]);
      if (rc < 0) {
        std::lock_guard lock(wave->mu);
        wave->rcs[i] = rc;
        --wave->pending;
      }
    }
    std::unique_lock lock(wave->mu);
    const uint64_t now = Aio::NowNs();
    if (!wave->cv.wait_for(lock, std::chrono::nanoseconds(deadline > now ? deadline - now : 0),
                           [&] { return wave->pending == 0; })) {
      lock.unlock();
      for (uint64_t id : ids) aio_->Cancel(id);
      return Status::IoError("rados: probe: no answer within op_timeout_s=" +
                             std::to_string(options_.op_timeout_s));
    }
    for (uint32_t i = 0; i < n; ++i) {
      const int rc = wave->rcs[i];
      if (rc < 0 && rc != -ENOENT) return FromRados(rc, "probe");
      found[first + i] = rc == 0 ? 1 : 0;
    }
  }
  return Status::Ok();
}

Status RadosProvider::Enumerate(tier_enumerate_fn fn, void* user_data) {
  if (fn == nullptr) return Status::InvalidArgument("rados: enumerate: NULL callback");
  std::vector<KeyBytes> keys;
  bool truncated = false;
  TIER_RETURN_IF_ERROR(ListObjects(
      cluster_->io(), kSweepMaxObjects, UINT64_MAX,
      [&](const std::string& name) {
        const ObjectName parsed = ParseObjectName(name);
        if (parsed.kind == ObjectName::Kind::kHeader) keys.push_back(parsed.key);
        return true;
      },
      &truncated));
  if (truncated) {
    Log(TIER_LOG_WARN, "rados: enumerate: listed only the first " +
                           std::to_string(kSweepMaxObjects) + " objects of the namespace");
  }
  uint64_t counted_bytes = 0, counted_entries = 0;
  for (const KeyBytes& key : keys) {
    Result<FetchedHeader> fetched = ReadHeader(key, Deadline());
    if (fetched.status().code() == TIER_NOT_FOUND) continue;  // removed since the listing
    if (!fetched.ok()) {
      if (fetched.status().code() != TIER_DATA_LOSS) return fetched.status();
      Log(TIER_LOG_WARN, fetched.status().message() + "; skipped (a restore removes it)");
      metrics_->DataLoss(DataLossWhere::kOpen);
      continue;
    }
    const Header& h = *fetched->header;
    if (!CheckNamespace(h).ok()) continue;
    counted_bytes += h.stored_bytes;
    ++counted_entries;
    std::vector<tier_segment_info> infos;
    const void* manifest = nullptr;
    uint64_t manifest_bytes = 0;
    for (const SegmentRecord& s : h.segments) {
      infos.push_back({s.kind, s.index, s.logical_bytes});
      if (s.kind == TIER_SEGMENT_MANIFEST) {
        static const uint8_t kEmpty = 0;
        manifest = s.logical_bytes == 0 ? &kEmpty : h.inline_bytes.data() + s.inline_offset;
        manifest_bytes = s.logical_bytes;
      }
    }
    tier_entry entry{};
    entry.struct_size = sizeof(entry);
    entry.segment_count = static_cast<uint32_t>(infos.size());
    std::memcpy(entry.key.bytes, key.data(), TIER_KEY_BYTES);
    entry.logical_bytes = h.logical_bytes;
    entry.stored_bytes = h.stored_bytes;
    entry.segments = infos.data();
    entry.manifest = manifest;
    entry.manifest_bytes = manifest_bytes;
    entry.created_unix_ns = h.created_unix_ns;
    entry.last_used_unix_ns = std::max(h.created_unix_ns, fetched->used_unix_ns);
    if (fn(user_data, &entry) != 0) return Status::Ok();
  }
  if (!truncated) {
    // A complete walk is a fresh count of the namespace.
    std::lock_guard lock(mu_);
    counted_bytes_ = counted_bytes;
    counted_entries_ = counted_entries;
  }
  PublishUsage();
  return Status::Ok();
}

Status RadosProvider::PlanRestore(const tier_key* key, uint64_t predicted_prefill_ns,
                                  tier_plan* out) {
  if (key == nullptr || out == nullptr) {
    return Status::InvalidArgument("rados: plan_restore: NULL key or out");
  }
  provider::RestorePlan plan;  // skip to the root: a miss
  Result<FetchedHeader> fetched = ReadHeader(ToKey(key), Deadline());
  if (fetched.ok() && !CheckNamespace(*fetched->header).ok()) {
    fetched = Status::NotFound("rados: another namespace");
  }
  if (fetched.ok()) {
    CacheHeader(fetched->header);
    const uint64_t stored_bytes = fetched->header->stored_bytes;
    plan = provider::PlanStored(stored_bytes, EstimateRestoreNs(stored_bytes), predicted_prefill_ns,
                                inflight_ops_.load() >= kMaxInflightOps);
  } else if (fetched.status().code() == TIER_DATA_LOSS) {
    plan = provider::PlanSkip(TIER_REASON_CORRUPT);
  } else if (fetched.status().code() != TIER_NOT_FOUND) {
    // The cluster did not answer in time: the tier cannot serve it now.
    plan = provider::PlanSkip(TIER_REASON_BUSY);
    Log(TIER_LOG_WARN, "rados: plan_restore: " + fetched.status().message());
  }
  provider::WritePlan(plan, out);
  metrics_->Decision(plan.decision, plan.reason);
  return Status::Ok();
}

}  // namespace tier::rados
