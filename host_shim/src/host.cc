// host.cc -- Host's public methods, Open and Close, and Poll: the loop every completion goes
// through.
#include <tier/device/engine_select.h>
#include <tier/host/host.h>
#include <tier/host/identity.h>
#include <tier/host/log.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <thread>

#include <unistd.h>

#include "host_impl.h"

namespace tier {

Host::Host(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Host::~Host() = default;

Result<std::unique_ptr<Host>> Host::Open(HostOptions options) {
  auto impl = Impl::Open(std::move(options));
  if (!impl.ok()) return impl.status();
  return std::unique_ptr<Host>(new Host(std::move(impl).value()));
}

Admission Host::Admit(const AdmitRequest& request) {
  impl_->CheckCaller("Admit");
  if (impl_->tenant_metrics() != nullptr) impl_->tenant_metrics()->Admitted(request.tenant);
  if (request.tenant.empty()) return impl_->Admit(request);
  const std::vector<uint64_t> blocks = TenantBlocks(request.tenant, request.blocks);
  AdmitRequest tenant_request = request;
  tenant_request.blocks = blocks;
  return impl_->Admit(tenant_request);
}
bool Host::Cancel(uint64_t admission_id) {
  impl_->CheckCaller("Cancel");
  return impl_->Cancel(admission_id);
}
void Host::Release(uint64_t admission_id) {
  impl_->CheckCaller("Release");
  impl_->Release(admission_id);
}
Sealed Host::Seal(const SealRequest& request) {
  impl_->CheckCaller("Seal");
  if (impl_->tenant_metrics() != nullptr) impl_->tenant_metrics()->Sealed(request.tenant);
  if (request.tenant.empty()) return impl_->Seal(request);
  const std::vector<uint64_t> blocks = TenantBlocks(request.tenant, request.blocks);
  SealRequest tenant_request = request;
  tenant_request.blocks = blocks;
  return impl_->Seal(tenant_request);
}
uint64_t Host::Prefetch(std::span<const uint64_t> blocks, uint64_t now_ns) {
  impl_->CheckCaller("Prefetch");
  return impl_->Prefetch(blocks, now_ns);
}
uint64_t Host::Prefetch(std::span<const uint64_t> blocks, uint64_t now_ns,
                        std::string_view tenant) {
  impl_->CheckCaller("Prefetch");
  if (tenant.empty()) return impl_->Prefetch(blocks, now_ns);
  return impl_->Prefetch(TenantBlocks(tenant, blocks), now_ns);
}
bool Host::Evict(const tier_key& key) {
  impl_->CheckCaller("Evict");
  return impl_->Evict(key);
}
void Host::ReportVerification(uint64_t admission_id, bool exact) {
  impl_->CheckCaller("ReportVerification");
  impl_->ReportVerification(admission_id, exact);
}
void Host::Poll(std::vector<Event>* events) {
  impl_->CheckCaller("Poll");
  impl_->Poll(events);
}
int Host::event_fd() const {
  return impl_->event_fd();
}
bool Host::WaitForWork(uint64_t timeout_ns) {
  impl_->CheckCaller("WaitForWork");
  return impl_->WaitForWork(timeout_ns);
}
bool Host::Busy() const {
  return impl_->Busy();
}
HostStats Host::Stats() const {
  impl_->CheckCaller("Stats");
  return impl_->Stats();
}
std::optional<CheckpointInfo> Host::Describe(std::span<const uint64_t> blocks) const {
  impl_->CheckCaller("Describe");
  return impl_->Describe(blocks);
}
std::optional<CheckpointInfo> Host::Describe(std::span<const uint64_t> blocks,
                                             std::string_view tenant) const {
  impl_->CheckCaller("Describe");
  if (tenant.empty()) return impl_->Describe(blocks);
  return impl_->Describe(TenantBlocks(tenant, blocks));
}
const HostOptions& Host::options() const {
  return impl_->options();
}
std::string Host::provider_name() const {
  return impl_->provider_name();
}
std::string Host::provider_io_path() const {
  return impl_->provider_io_path();
}
const char* Host::device_path() const {
  return impl_->device_path();
}
device::TransferEngine& Host::engine() {
  return impl_->engine();
}

namespace {

Status CheckOptions(const HostOptions& o) {
  if (o.namespace_id.empty()) return Status::InvalidArgument("HostOptions: namespace_id is empty");
  if (o.bytes_scale == 0) return Status::InvalidArgument("HostOptions: bytes_scale is 0");
  if (o.max_inflight_restores == 0 || o.max_inflight_restores > 1024) {
    return Status::InvalidArgument("HostOptions: max_inflight_restores must be 1 to 1024");
  }
  if (o.provider_threads == 0 || o.provider_threads > 64) {
    return Status::InvalidArgument("HostOptions: provider_threads must be 1 to 64");
  }
  if (o.provider_timeout_ns == 0) {
    return Status::InvalidArgument("HostOptions: provider_timeout_ns is 0");
  }
  if (o.max_probe_keys == 0 || o.max_probe_keys > 4096) {
    return Status::InvalidArgument("HostOptions: max_probe_keys must be 1 to 4096");
  }
  if (!(o.tenant_share >= 0 && o.tenant_share <= 1)) {
    return Status::InvalidArgument("HostOptions: tenant_share must be 0 (off) to 1, not " +
                                   std::to_string(o.tenant_share));
  }
  if (!std::isfinite(o.model_cold_read_bytes_per_second) ||
      o.model_cold_read_bytes_per_second < 0) {
    return Status::InvalidArgument(
        "HostOptions: model_cold_read_bytes_per_second must be a finite number >= 0");
  }
  return Status::Ok();
}

// The profile prices and sizes what the pool holds: a profile of another page size or layer count
// would mis-size every checkpoint and mis-price every restore-or-root decision.
Status CheckProfileMatchesPool(const ModelProfile& p, const KvPool& pool) {
  const std::string profile = "model profile '" + p.name + "'";
  const uint32_t tpp = pool.layout.tokens_per_page();
  if (p.tokens_per_page != tpp) {
    return Status::InvalidArgument(profile + " has " + std::to_string(p.tokens_per_page) +
                                   "-token pages, the KV pool " + std::to_string(tpp) +
                                   "-token pages (HostOptions::profile must describe the pool)");
  }
  const uint32_t layers = p.full_attention_layers + p.mtp_layers;
  if (layers != pool.layout.layer_count()) {
    return Status::InvalidArgument(profile + " has " + std::to_string(layers) + " KV layers (" +
                                   std::to_string(p.full_attention_layers) + " full-attention + " +
                                   std::to_string(p.mtp_layers) + " MTP), the KV pool " +
                                   std::to_string(pool.layout.layer_count()) +
                                   " layers (HostOptions::profile must describe the pool)");
  }
  return Status::Ok();
}

Result<std::shared_ptr<device::TransferEngine>> ChooseEngine(const HostOptions& o) {
  if (o.engine != nullptr) return o.engine;
  auto prefer = device::ParseDevicePreference(o.device);
  if (!prefer.ok()) return Status::InvalidArgument("device: " + prefer.status().message());
  device::EngineOptions engine_options;
  engine_options.prefer = prefer.value();
  device::EngineSelection selection = device::SelectTransferEngine(engine_options);
  if (selection.engine == nullptr) {  // the cause's code (issue 27: no silent CPU fallback)
    const tier_status code = selection.status.ok() ? TIER_UNSUPPORTED : selection.status.code();
    return Status(code, "device " + o.device + ": " + selection.reason);
  }
  Log(TIER_LOG_INFO, "device path: " + selection.path + " (" + selection.engine->description() +
                         "; " + selection.reason + ")");
  return std::shared_ptr<device::TransferEngine>(std::move(selection.engine));
}

// The Host tier's memory: budget/scale plus room for the copies in flight (restores staging,
// demotions, seals) before pressure catches up. The hard bound on Host memory, pinned here at
// Open (issue 27): never on the scheduler thread, never retried after a failure. One chunk of
// the whole bound when the system gives it (a checkpoint's extent must fit in one chunk);
// otherwise smaller chunks, halving down to min(256 MiB, bound / 16), keeping what succeeded.
Result<std::unique_ptr<device::HostArena>> MakeArena(const HostOptions& o,
                                                     device::TransferEngine& engine,
                                                     HostStats* stats) {
  device::HostArenaOptions arena;
  const uint64_t physical = o.host_capacity_bytes / o.bytes_scale;
  const uint64_t bound =
      o.host_memory_bytes != 0 ? o.host_memory_bytes : physical * 2 + (64ull << 20);
  arena.capacity_bytes = (bound + 4095) / 4096 * 4096;
  arena.chunk_bytes = arena.capacity_bytes;
  arena.reserve_bytes = arena.capacity_bytes;
  arena.min_reserve_chunk_bytes = std::max<uint64_t>(
      4096, std::min<uint64_t>(256ull << 20, arena.capacity_bytes / 16) / 4096 * 4096);
  arena.grow = false;
  const uint64_t start_ns = MonotonicNs();
  auto created = device::HostArena::Create(arena, engine.host_allocator());
  const uint64_t took_ns = MonotonicNs() - start_ns;
  if (!created.ok()) {
    return Status::NoSpace("host arena of " + std::to_string(arena.capacity_bytes) +
                           " bytes: " + created.status().ToString());
  }
  const device::HostArena& a = *created.value();
  stats->host_pinned_bytes = a.allocated_bytes();
  stats->host_pin_chunks = a.chunk_count();
  stats->host_pin_ns = took_ns;
  const std::string what = std::string(a.pinned() ? "pinned " : "allocated ") +
                           std::to_string(a.allocated_bytes()) + " of " +
                           std::to_string(arena.capacity_bytes) + " bytes of Host memory (" +
                           a.allocator_name() + ", " + std::to_string(a.chunk_count()) +
                           " chunk(s)) in " + std::to_string(took_ns / 1000000) + " ms";
  if (a.allocated_bytes() == 0) {
    return Status::NoSpace("host arena: " + what + ": the system gave none");
  }
  // Less than the bound: a warning. Pinned (the CUDA path): info. Plain memory: debug.
  Log(a.allocated_bytes() < arena.capacity_bytes ? TIER_LOG_WARN
      : a.pinned()                               ? TIER_LOG_INFO
                                                 : TIER_LOG_DEBUG,
      "host: " + what +
          (a.allocated_bytes() < arena.capacity_bytes
               ? "; the Host tier works within what was pinned (a checkpoint must fit one chunk)"
               : ""));
  return std::move(created.value());
}

}  // namespace

Result<std::unique_ptr<Host::Impl>> Host::Impl::Open(HostOptions options) {
  TIER_RETURN_IF_ERROR(CheckOptions(options));
  auto engine = ChooseEngine(options);
  if (!engine.ok()) return engine.status();
  const uint64_t device_state_bytes =
      options.device_state_bytes != 0
          ? options.device_state_bytes
          : std::min<uint64_t>(options.device_capacity_bytes / options.bytes_scale, 1ull << 30);
  auto device = DeviceTier::Create(engine.value(), options.pool, device_state_bytes);
  if (!device.ok()) return device.status();
  TIER_RETURN_IF_ERROR(CheckProfileMatchesPool(options.profile, options.pool));
  HostStats pinned;
  auto arena = MakeArena(options, *engine.value(), &pinned);
  if (!arena.ok()) return arena.status();

  std::unique_ptr<Impl> impl(new Impl(std::move(options)));
  impl->stats_.host_pinned_bytes = pinned.host_pinned_bytes;
  impl->stats_.host_pin_chunks = pinned.host_pin_chunks;
  impl->stats_.host_pin_ns = pinned.host_pin_ns;
  impl->device_ = std::move(device).value();
  impl->memory_ = std::make_unique<HostMemory>(std::move(arena).value());
  impl->options_.engine = engine.value();
  impl->server_metrics_->SetDevicePath(impl->device_->engine().path_name());
  TIER_RETURN_IF_ERROR(impl->OpenProvider());
  TIER_RETURN_IF_ERROR(impl->StartKvEvents());
  TIER_RETURN_IF_ERROR(impl->Readopt());
  impl->UpdateGauges();
  return impl;
}

Host::Impl::Impl(HostOptions options)
    : options_(std::move(options)),
      cost_(options_.profile),
      queue_(std::make_unique<EventQueue>()),
      policy_(options_.policy, options_.value_levers) {
  if (options_.metrics == nullptr) {
    own_metrics_ = std::make_unique<MetricsRegistry>();
    metrics_ = own_metrics_.get();
  } else {
    metrics_ = options_.metrics;
  }
  services_ = std::make_unique<HostServices>(metrics_);
  server_metrics_ = std::make_unique<ServerMetrics>(metrics_);
  if (!options_.metrics_tenants.empty()) {
    tenant_metrics_ = std::make_unique<TenantMetrics>(metrics_, options_.metrics_tenants);
  }
}

Host::Impl::~Impl() {
  closing_ = true;
  for (auto& [id, op] : ops_) op->cancelled = true;
  // Write what only Host holds to a persistent cold tier, and wait (bounded) for what is in
  // flight: provider calls settle, copies finish.
  const uint64_t deadline = Now() + options_.close_timeout_ns;
  StartCloseFlush();
  std::vector<Event> ignored;
  while (Now() < deadline) {
    ContinueCloseFlush();
    if (!CloseFlushing() && !Busy() && (cold_ == nullptr || cold_->unsettled() == 0)) break;
    WaitForWork(10 * 1000 * 1000);
    Poll(&ignored);
    ignored.clear();
  }
  FinishCloseFlush();
  if (cold_ != nullptr && cold_->unsettled() > 0) {
    Log(TIER_LOG_ERROR, "host: the " + provider_name_ + " provider left " +
                            std::to_string(cold_->unsettled()) +
                            " operation(s) unfinished at close; abandoning the instance (its "
                            "buffers and threads are leaked, never freed under it)");
    cold_->Abandon();
    (void)cold_.release();
    (void)queue_.release();
    (void)memory_.release();  // the arena and the releaser
    services_.reset();        // inert from now on; the abandoned instance retains its table
    (void)own_metrics_.release();
    for (auto& [id, op] : ops_) (void)op.release();
    return;
  }
  // Device copies finish on the engine; entries release their memory after them.
  for (Demotion& d : demotions_) d.copy.Wait().IgnoreError();
  for (SealOp& s : seals_) s.copy.Wait().IgnoreError();
  for (auto& [id, op] : ops_) op->copy.Wait().IgnoreError();
  for (CopyJob& job : lane_copies_) job.Wait().IgnoreError();
  for (HitCheck& c : hit_checks_) c.job.Wait().IgnoreError();
  cold_.reset();         // closes the provider
  catalog_ = Catalog();  // the entries' Host copies go to the releaser
  ops_.clear();
  demotions_.clear();
  seals_.clear();
  memory_->FreeAll();  // frees them all before the arena goes
}

void Host::Impl::CheckCaller(const char* method) const {
  TIER_CHECK_MSG(std::this_thread::get_id() == owner_thread_,
                 "Host::%s called from a thread other than the one that opened the Host (host.h: "
                 "one thread, the scheduler's, makes every call)",
                 method);
  TIER_CHECK_MSG(!in_allocator_,
                 "Host::%s called from inside AdmitRequest::allocate_pages (host.h: the "
                 "allocator must not call back into the Host)",
                 method);
}

uint64_t Host::Impl::Now() const {
  return MonotonicNs();
}

void Host::Impl::Poll(std::vector<Event>* events) {
  // Rounds until nothing moves: a completion may start the next step of an operation.
  for (int round = 0; round < 8; ++round) {
    std::vector<std::function<void()>> work = queue_->Drain();
    for (auto& w : work) w();
    if (cold_ != nullptr) cold_->CheckDeadlines(Now());
    const size_t before = out_.size();
    CheckSeals();
    CheckDemotions();
    CheckHitReads();
    device_->Collect();  // Device placements' memory whose copies are done
    std::erase_if(lane_copies_, [](const CopyJob& job) { return job.Done(); });
    if (lane_copies_.empty()) retired_device_copies_.clear();
    std::vector<uint64_t> copying;
    for (auto& [id, op] : ops_) {
      if (op->stage == Stage::kCopy) copying.push_back(id);
    }
    for (uint64_t id : copying) {
      auto it = ops_.find(id);
      if (it != ops_.end()) CheckCopy(it->second.get());
    }
    RetryWaiting();
    Rebalance();
    if (work.empty() && out_.size() == before) break;
  }
  UpdateGauges();
  for (Event& e : out_) events->push_back(std::move(e));
  out_.clear();
}

bool Host::Impl::WaitForWork(uint64_t timeout_ns) {
  if (queue_->size() > 0) return true;
  // Copies do not signal the queue: wait in short steps while any is in flight.
  const bool copies = !seals_.empty() || !demotions_.empty() ||
                      std::any_of(ops_.begin(), ops_.end(),
                                  [](const auto& kv) { return kv.second->stage == Stage::kCopy; });
  if (!copies) return queue_->Wait(timeout_ns);
  return queue_->Wait(std::min<uint64_t>(timeout_ns, 200 * 1000));
}

bool Host::Impl::Busy() const {
  // Calls past their deadline are over for the Host (only their buffers wait for the provider).
  return !ops_.empty() || !seals_.empty() || !demotions_.empty() || !hit_checks_.empty() ||
         (cold_ != nullptr && cold_->unanswered() > 0) || queue_->size() > 0;
}

Status Host::Impl::StartKvEvents() {
  const KvEventsOptions& o = options_.kv_events;
  if (o.addr.empty()) return Status::Ok();
  std::string topic = o.topic;
  if (topic.empty()) {
    char hostname[256] = {};
    gethostname(hostname, sizeof hostname - 1);
    topic = std::string("kv@") + hostname + "@" + options_.profile.name;
  }
  std::string cold = o.cold_medium;
  if (cold.empty()) {
    cold = provider_name_.empty() ? "COLD" : provider_name_;
    for (char& c : cold) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  std::string media[3] = {"GPU", "CPU", cold};
  auto started = KvEventPublisher::Start(o, std::move(topic), media, options_.block_tokens);
  if (!started.ok()) return started.status();
  kv_events_ = std::move(started).value();
  catalog_.set_kv_events(kv_events_.get());
  return Status::Ok();
}

HostStats Host::Impl::Stats() const {
  HostStats s = stats_;
  if (kv_events_ != nullptr) {
    s.kv_events_queued = kv_events_->queued();
    s.kv_events_published = kv_events_->published();
    s.kv_events_dropped = kv_events_->dropped();
  }
  s.entries = catalog_.size();
  s.device_entries = catalog_.entries_in(kDevice);
  s.host_entries = catalog_.entries_in(kHost);
  s.cold_entries = catalog_.entries_in(kCold);
  s.device_bytes = catalog_.logical_bytes_in(kDevice);
  s.host_bytes = catalog_.logical_bytes_in(kHost);
  s.cold_bytes = catalog_.logical_bytes_in(kCold);
  s.cold_capacity_bytes = LogicalOf(cold_capacity_bytes_);
  s.pending_admissions = ops_.size();
  s.value_half_life_s = policy_.half_life_s();
  s.value_superseded_weight = policy_.SupersededWeight();
  if (cold_ != nullptr) {
    s.inflight_provider_ops = cold_->unsettled();
    s.timeouts = cold_->timeouts();
    s.provider_calls_outside_admission = cold_->calls_in(IoPhase::kIdle);
    if (cold_->cipher() != nullptr) {
      s.encryption_tag_failures = cold_->cipher()->tag_failures();
      s.encryption_unknown_key = cold_->cipher()->unknown_key();
    }
  }
  return s;
}

std::optional<CheckpointInfo> Host::Impl::Describe(std::span<const uint64_t> blocks) const {
  const CheckpointEntry* e = catalog_.Find(PrefixKey(options_.namespace_id, blocks));
  if (e == nullptr || e->doomed) return std::nullopt;
  CheckpointInfo info;
  info.on_device = e->in(kDevice);
  info.on_host = e->in(kHost);
  info.on_cold = e->in(kCold);
  info.tokens = e->tokens;
  info.logical_bytes = e->logical_bytes;
  info.pins = e->pins;
  info.shared_prefix = e->shared_prefix;
  info.remote = e->remote;
  return info;
}

void Host::Impl::ReleasePages(std::span<const uint32_t> pages) {
  std::vector<uint32_t> freed = device_->Drop(pages);
  if (freed.empty() || closing_) return;
  Event e;
  e.kind = Event::kPagesReleased;
  e.pages = std::move(freed);
  Emit(std::move(e));
}

void Host::Impl::UpdateGauges() {
  stats_.peak_cold_logical_bytes =
      std::max(stats_.peak_cold_logical_bytes, catalog_.logical_bytes_in(kCold));
  stats_.peak_cold_stored_bytes =
      std::max(stats_.peak_cold_stored_bytes, catalog_.physical_bytes_in(kCold));
  stats_.peak_device_logical_bytes =
      std::max(stats_.peak_device_logical_bytes, catalog_.logical_bytes_in(kDevice));
  stats_.peak_host_logical_bytes =
      std::max(stats_.peak_host_logical_bytes, catalog_.logical_bytes_in(kHost));
  server_metrics_->SetCatalog(catalog_, LogicalOf(cold_capacity_bytes_));
}

}  // namespace tier
