// Open/close, info and stats, job dispatch and completion. The synchronous operations on the
// catalog are in catalog.cc, the pipelines in spill.cc and restore.cc, the sweep in sweep.cc.
#include "rados_provider.h"

#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "catalog.h"
#include "job.h"

namespace tier::rados {

KeyBytes ToKey(const tier_key* key) {
  KeyBytes out;
  std::memcpy(out.data(), key->bytes, TIER_KEY_BYTES);
  return out;
}

std::vector<ChunkPlace> ChunkPlaces(const Header& header) {
  std::vector<ChunkPlace> places;
  places.reserve(header.chunks.size());
  for (uint32_t s = 0; s < header.segments.size(); ++s) {
    const SegmentRecord& seg = header.segments[s];
    if (seg.storage != kStorageChunks) continue;
    for (uint32_t c = 0; c < seg.chunk_count; ++c) {
      const uint64_t offset = static_cast<uint64_t>(c) * header.object_bytes;
      const uint64_t len = std::min<uint64_t>(header.object_bytes, seg.logical_bytes - offset);
      places.push_back({s, c, offset, static_cast<uint32_t>(len)});
    }
  }
  return places;
}

RadosProvider::RadosProvider(const tier_host_services* host, std::string namespace_id,
                             RadosOptions options, Sealer sealer, RadosHooks hooks)
    : host_(host),
      namespace_id_(std::move(namespace_id)),
      options_(std::move(options)),
      sealer_(std::move(sealer)),
      hooks_(std::move(hooks)),
      tag_(NamespaceTag(options_.namespace_prefix, namespace_id_, sealer_.key_id())) {
  std::random_device device;
  rng_.seed((static_cast<uint64_t>(device()) << 32) ^ device() ^ UnixNowNs() ^
            (static_cast<uint64_t>(::getpid()) << 16));
}

Result<std::unique_ptr<RadosProvider>> RadosProvider::Open(const tier_host_services* host,
                                                           std::string namespace_id,
                                                           std::span<const tier_option> options,
                                                           RadosHooks hooks) {
  Result<RadosOptions> parsed = ParseOptions(options);
  if (!parsed.ok()) return parsed.status();
  if (parsed->namespace_prefix.size() + namespace_id.size() > kMaxNamespaceBytes) {
    return Status::InvalidArgument("rados: namespace and namespace_prefix longer than " +
                                   std::to_string(kMaxNamespaceBytes) + " bytes");
  }
  Sealer sealer;
  if (!parsed->auth_key_file.empty()) {
    Result<Sealer> keyed = Sealer::FromKeyFile(parsed->auth_key_file);
    if (!keyed.ok()) return keyed.status();
    sealer = keyed.take();
  }
  std::unique_ptr<RadosProvider> provider(new RadosProvider(
      host, std::move(namespace_id), parsed.take(), std::move(sealer), std::move(hooks)));
  Status status = provider->Start();
  if (!status.ok()) return status;  // the destructor undoes what Start did
  return provider;
}

Status RadosProvider::Start() {
  metrics_ = std::make_unique<RadosMetrics>(host_);
  Result<std::unique_ptr<Cluster>> cluster = Cluster::Connect(
      options_, tag_, [this](tier_log_level level, const std::string& m) { Log(level, m); });
  if (!cluster.ok()) return cluster.status();
  cluster_ = cluster.take();
  aio_ = std::make_unique<Aio>(cluster_->io());
  TIER_RETURN_IF_ERROR(CheckWriteAccess());
  reaper_ = std::make_unique<Reaper>(
      aio_.get(), [this](tier_log_level level, const std::string& m) { Log(level, m); });
  workers_ = std::make_unique<WorkQueue>("tier-rados-cpu", options_.threads);
  window_ = std::make_unique<IoWindow>(options_.queue_depth, workers_.get());
  runners_ = std::make_unique<WorkQueue>("tier-rados-job", kJobRunners);

  // One sweep now (bounded by op_timeout_s): orphans of dead spills go, the namespace is counted.
  Result<SweepReport> sweep = Sweep(uint64_t{options_.op_timeout_s} * 1'000'000'000ull);
  if (!sweep.ok()) return sweep.status().Annotate("rados: open: sweep");
  if (options_.fleet_budget_bytes != 0) {
    fleet_ =
        std::make_unique<FleetBudget>(aio_.get(), options_.fleet_budget_bytes,
                                      options_.fleet_lease_s, NewSpillId(), options_.op_timeout_s);
    TIER_RETURN_IF_ERROR(fleet_->Join(sweep->stored_bytes).Annotate("rados: open: fleet budget"));
    fleet_thread_ = std::thread([this] { FleetLoop(); });
    Log(TIER_LOG_INFO, "rados: fleet budget " + std::to_string(options_.fleet_budget_bytes) +
                           " bytes shared by every server of the namespace (ledger '" +
                           FleetBudget::kObject + "', server " + Hex64(fleet_->server_id()) +
                           ", fleet_lease_s=" + std::to_string(options_.fleet_lease_s) + ")");
  }
  housekeeping_ = std::thread([this] { HousekeepingLoop(); });
  PublishUsage();
  const std::string seals =
      sealer_.keyed() ? "sealed with the auth key (id " + sealer_.key_id() + ")"
                      : "unsealed (no auth_key_file: a client with write access to the pool can "
                        "forge checkpoints; README.md, 'What an attacker with pool write access "
                        "can and cannot do')";
  char line[1536];
  std::snprintf(
      line, sizeof(line),
      "rados: cold tier on pool '%s' (mon_host %s, %s, RADOS namespace %s): object=%u MiB "
      "queue_depth=%u compression=%s op_timeout_s=%u capacity=%llu bytes; limits %llu/%llu bytes "
      "(%s); %s; namespace holds %llu checkpoints (%llu bytes), %llu live spills; removed %llu "
      "orphan objects of %llu dead spills%s",
      options_.pool.c_str(), cluster_->mon_host().c_str(), options_.client_name().c_str(),
      tag_.c_str(), options_.object_bytes >> 20, options_.queue_depth,
      CompressionName(options_.compression), options_.op_timeout_s,
      static_cast<unsigned long long>(options_.capacity_bytes),
      static_cast<unsigned long long>(cluster_->limits().max_object_bytes),
      static_cast<unsigned long long>(cluster_->limits().max_write_bytes),
      cluster_->limits().source.c_str(), seals.c_str(),
      static_cast<unsigned long long>(sweep->checkpoints),
      static_cast<unsigned long long>(sweep->stored_bytes),
      static_cast<unsigned long long>(sweep->live_spills),
      static_cast<unsigned long long>(sweep->orphan_objects),
      static_cast<unsigned long long>(sweep->orphan_groups),
      sweep->truncated ? " (sweep truncated: the rest at the next pass)" : "");
  Log(TIER_LOG_INFO, line);
  return Status::Ok();
}

Status RadosProvider::CheckWriteAccess() {
  // assert_exists fails on an object that is never created, so with write caps nothing changes
  // (ENOENT); without them the OSD refuses the op before looking (EPERM).
  rados_write_op_t op = rados_create_write_op();
  if (op == nullptr) return Status::Internal("rados: out of memory");
  rados_write_op_assert_exists(op);
  rados_write_op_setxattr(op, kXattrLease, "0", 1);
  const int rc =
      aio_->WriteSync("p.write-access-check", op, LIBRADOS_OPERATION_FULL_FORCE, Deadline());
  if (rc == -ENOENT || rc == 0) return Status::Ok();
  if (rc == -EPERM || rc == -EACCES) {
    return Status::InvalidArgument("rados: " + options_.client_name() + " may not write to pool '" +
                                   options_.pool + "' (" + Status::ErrnoText(-rc) +
                                   "): a cold tier needs osd 'allow rw pool=" + options_.pool +
                                   "' (ceph auth caps)");
  }
  return FromRados(rc, "open: check write access to pool '" + options_.pool + "'");
}

RadosProvider::~RadosProvider() {
  Close();
}

void RadosProvider::Close() {
  if (closed_) return;
  closed_ = true;
  closing_.store(true);
  if (housekeeping_.joinable()) {
    {
      std::lock_guard lock(housekeeping_mu_);
      stop_housekeeping_ = true;
    }
    housekeeping_cv_.notify_all();
    housekeeping_.join();
  }
  if (fleet_thread_.joinable()) {
    {
      std::lock_guard lock(housekeeping_mu_);
      stop_housekeeping_ = true;
    }
    housekeeping_cv_.notify_all();
    fleet_thread_.join();
  }
  // Jobs see closing_ and stop issuing chunk operations; what is in flight completes within
  // op_timeout_s (librados's own timeout). One deadline for everything, then cancel what is left
  // (a cancelled operation completes at once).
  const uint64_t deadline = Aio::NowNs() + (uint64_t{options_.op_timeout_s} + 5) * 1'000'000'000ull;
  auto remaining = [deadline] {
    const uint64_t now = Aio::NowNs();
    return deadline > now ? deadline - now : 0;
  };
  {
    std::unique_lock lock(jobs_mu_);
    if (!jobs_cv_.wait_for(lock, std::chrono::nanoseconds(remaining()),
                           [&] { return running_jobs_ == 0; })) {
      lock.unlock();
      Log(TIER_LOG_WARN, "rados: close: operations still in flight after op_timeout_s; cancelling");
      if (aio_) aio_->CancelAll();
      lock.lock();
      jobs_cv_.wait(lock, [&] { return running_jobs_ == 0; });
    }
  }
  if (reaper_ && !reaper_->WaitIdle(remaining())) {
    Log(TIER_LOG_WARN, "rados: close: background removals unfinished; the sweep removes the rest");
  }
  if (fleet_) {
    // Everything this server held (reservations, pins) goes back now, not after the lease.
    Status left = fleet_->Leave();
    if (!left.ok()) Log(TIER_LOG_WARN, "rados: close: fleet: " + left.message());
  }
  if (reaper_) reaper_->Stop();
  if (aio_ && !aio_->WaitIdle(remaining())) aio_->CancelAll();
  if (aio_) aio_->WaitIdle(UINT64_MAX / 4);
  if (runners_) runners_->Shutdown();
  if (workers_) workers_->Shutdown();
  aio_.reset();  // before the I/O context it uses
  reaper_.reset();
  cluster_.reset();
}

void RadosProvider::Log(tier_log_level level, const std::string& message) const {
  if (TIER_HAS_SLOT(host_, tier_host_services, log)) {
    host_->log(host_->host_context, level, message.c_str());
  }
}

uint64_t RadosProvider::Deadline() const {
  return Aio::NowNs() + (uint64_t{options_.op_timeout_s} + 1) * 1'000'000'000ull;
}

uint64_t RadosProvider::UnixNowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t RadosProvider::NewSpillId() {
  std::lock_guard lock(mu_);
  uint64_t id = 0;
  while (id == 0) id = rng_();
  return id;
}

void RadosProvider::PublishUsage() {
  uint64_t used, entries;
  {
    std::lock_guard lock(mu_);
    used = counted_bytes_;
    entries = counted_entries_;
  }
  metrics_->SetUsage(used, options_.capacity_bytes, entries);
}

Status RadosProvider::Info(tier_info* out) {
  if (out == nullptr) return Status::InvalidArgument("rados: info: NULL out");
  if (TIER_HAS_FIELD(out, tier_info, capabilities)) {
    out->capabilities =
        TIER_CAP_PERSISTENT | TIER_CAP_CHECKSUMS | TIER_CAP_SHARED |
        (options_.compression != CompressionMode::kOff ? uint32_t{TIER_CAP_COMPRESSION} : 0u);
  }
  if (TIER_HAS_FIELD(out, tier_info, name)) out->name = "rados";
  if (TIER_HAS_FIELD(out, tier_info, version)) out->version = "0.1.0";
  if (TIER_HAS_FIELD(out, tier_info, io_path)) out->io_path = "librados";
  if (TIER_HAS_FIELD(out, tier_info, buffer_alignment)) out->buffer_alignment = 1;
  if (TIER_HAS_FIELD(out, tier_info, max_inflight_ops)) out->max_inflight_ops = kMaxInflightOps;
  if (TIER_HAS_FIELD(out, tier_info, reserved)) out->reserved = 0;
  return Status::Ok();
}

Status RadosProvider::Stats(tier_stats* out) {
  if (out == nullptr) return Status::InvalidArgument("rados: stats: NULL out");
  std::lock_guard lock(mu_);
  if (TIER_HAS_FIELD(out, tier_stats, reserved)) out->reserved = 0;
  if (TIER_HAS_FIELD(out, tier_stats, capacity_bytes))
    out->capacity_bytes = options_.capacity_bytes;
  if (TIER_HAS_FIELD(out, tier_stats, used_bytes)) out->used_bytes = counted_bytes_;
  if (TIER_HAS_FIELD(out, tier_stats, entries)) out->entries = counted_entries_;
  if (TIER_HAS_FIELD(out, tier_stats, inflight_ops)) out->inflight_ops = inflight_ops_.load();
  return Status::Ok();
}

template <typename J>
bool RadosProvider::QueueAccepted(std::unique_ptr<J> job, void (RadosProvider::*run)(J*)) {
  {
    std::lock_guard lock(jobs_mu_);
    ++running_jobs_;
  }
  job->accepted_ns = Aio::NowNs();
  J* raw = job.release();
  try {
    runners_->Post([this, raw, run] { (this->*run)(raw); });
    return true;
  } catch (...) {
    delete raw;
    JobFinished();
    return false;
  }
}

template bool RadosProvider::QueueAccepted<RadosProvider::SpillJob>(
    std::unique_ptr<SpillJob>, void (RadosProvider::*)(SpillJob*));
template bool RadosProvider::QueueAccepted<RadosProvider::RestoreJob>(
    std::unique_ptr<RestoreJob>, void (RadosProvider::*)(RestoreJob*));

void RadosProvider::Complete(tier_done_fn done, void* user_data, uint64_t accepted_ns,
                             const Status& status, uint64_t logical_bytes, uint64_t stored_bytes,
                             bool spill) {
  const uint64_t duration_ns = Aio::NowNs() - accepted_ns;
  if (spill) {
    metrics_->Spill(status.code());
    if (status.ok()) {
      metrics_->SpillBytes(logical_bytes, stored_bytes);
      metrics_->SpillSeconds(static_cast<double>(duration_ns) / 1e9);
    }
  } else {
    metrics_->Restore(status.code());
    if (status.ok()) {
      metrics_->RestoreBytes(logical_bytes, stored_bytes);
      metrics_->RestoreSeconds(static_cast<double>(duration_ns) / 1e9);
    }
  }
  inflight_ops_.fetch_sub(1);
  tier_completion completion{};
  completion.struct_size = sizeof(completion);
  completion.status = status.code();
  completion.message = status.message().c_str();
  completion.logical_bytes = status.ok() ? logical_bytes : 0;
  completion.stored_bytes = status.ok() ? stored_bytes : 0;
  completion.duration_ns = duration_ns;
  done(user_data, &completion);
}

void RadosProvider::JobFinished() {
  std::lock_guard lock(jobs_mu_);
  if (--running_jobs_ == 0) jobs_cv_.notify_all();
}

}  // namespace tier::rados
