// seal.cc -- Seal and Evict: a finished request's state becomes a checkpoint of the one catalog.
//
// On Device when the engine can keep its state buffers in device memory: the Host takes a
// reference on the pages and copies the state (device to device). Otherwise on Host: the pages are
// gathered and the state copied into a Host copy, and the pages go back to the server when the
// copies are done. Either way the checkpoint is served only once its copies are done.
#include <tier/host/identity.h>
#include <tier/host/log.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "host_impl.h"
#include "manifest.h"

namespace tier {
namespace {

constexpr uint64_t kServerManifestMaxBytes = 32 * 1024;

bool StateKindAllowed(const StateBuffer& b, uint32_t spec_layers) {
  switch (b.kind) {
    case TIER_SEGMENT_STATE_IMAGE:
    case TIER_SEGMENT_HIDDEN_STATE:
      return true;
    case TIER_SEGMENT_SPEC_KV:
      return b.index >= spec_layers;  // below: the pool's speculative layers
    case TIER_SEGMENT_OTHER:
      return b.index >= 1;  // 0: the server manifest
    default:
      return false;
  }
}

}  // namespace

Status Host::Impl::CheckSeal(const SealRequest& r) const {
  if (r.blocks.empty()) return Status::InvalidArgument("seal: no blocks");
  if (r.tokens == 0) return Status::InvalidArgument("seal: 0 tokens");
  if (r.blocks.size() > r.tokens) {
    return Status::InvalidArgument("seal: " + std::to_string(r.blocks.size()) + " blocks but " +
                                   std::to_string(r.tokens) +
                                   " tokens (every block id covers at least one token)");
  }
  if (const uint64_t bt = options_.block_tokens; bt > 0) {
    const uint64_t full = r.blocks.size() * bt;
    if (r.tokens < full || r.tokens >= full + bt) {
      return Status::InvalidArgument(
          "seal: " + std::to_string(r.blocks.size()) + " blocks of " + std::to_string(bt) +
          " tokens (HostOptions::block_tokens) cover " + std::to_string(full) + " to " +
          std::to_string(full + bt - 1) + " tokens, the seal has " + std::to_string(r.tokens) +
          " tokens over " + std::to_string(r.pages.size()) + " pages");
    }
  }
  const uint32_t pages = device_->PagesFor(r.tokens);
  if (r.pages.size() != pages) {
    return Status::InvalidArgument("seal: " + std::to_string(r.tokens) + " tokens need " +
                                   std::to_string(pages) + " pages, got " +
                                   std::to_string(r.pages.size()));
  }
  TIER_RETURN_IF_ERROR(device_->CheckPages(r.pages, true).Annotate("seal"));
  const uint32_t spec_layers = device_->kv_layers() - device_->pool().main_kv_layers;
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (const StateBuffer& b : r.state) {
    if (!StateKindAllowed(b, spec_layers)) {
      return Status::InvalidArgument("seal: state buffer of kind " + std::to_string(b.kind) +
                                     " index " + std::to_string(b.index) + " is not allowed");
    }
    if (!seen.insert({b.kind, b.index}).second) {
      return Status::InvalidArgument("seal: two state buffers of kind " + std::to_string(b.kind) +
                                     " index " + std::to_string(b.index));
    }
    if (b.bytes > 0 && b.data == nullptr) {
      return Status::InvalidArgument("seal: state buffer without data");
    }
  }
  if (r.server_manifest.size() > kServerManifestMaxBytes) {
    return Status::InvalidArgument("seal: server manifest of " +
                                   std::to_string(r.server_manifest.size()) +
                                   " bytes (at most 32 KiB)");
  }
  if (device_->kv_layers() + r.state.size() + 2 > TIER_MAX_SEGMENTS) {
    return Status::InvalidArgument("seal: more segments than a provider must accept");
  }
  return Status::Ok();
}

std::unique_ptr<CheckpointEntry> Host::Impl::NewEntry(const SealRequest& r, const tier_key& key,
                                                      std::vector<StateBuffer>* state) {
  auto entry = std::make_unique<CheckpointEntry>();
  entry->key = key;
  entry->blocks.assign(r.blocks.begin(), r.blocks.end());
  entry->tokens = r.tokens;
  entry->shared_prefix = r.shared_prefix;
  entry->tenant.assign(r.tenant.begin(), r.tenant.end());
  entry->page_count = static_cast<uint32_t>(r.pages.size());
  entry->server_manifest.assign(r.server_manifest.begin(), r.server_manifest.end());
  // The checkpoint it extends: the longest published one that is a prefix of it.
  if (r.blocks.size() > 1) {
    const std::vector<uint64_t> hashes = PrefixHashes(r.blocks);
    CheckpointEntry* parent = catalog_.LongestMatch(r.blocks, hashes, r.blocks.size() - 1);
    if (parent != nullptr) {
      entry->has_parent = true;
      entry->parent_key = parent->key;  // the catalog counts the child at Insert
    }
  }
  // Canonical segment order (startup.cc relies on it): KV layers, state by (kind, index),
  // manifest, server manifest.
  *state = r.state;
  std::sort(state->begin(), state->end(), [](const StateBuffer& a, const StateBuffer& b) {
    return a.kind != b.kind ? a.kind < b.kind : a.index < b.index;
  });
  for (uint32_t l = 0; l < device_->kv_layers(); ++l) {
    entry->segments.push_back(device_->LayerSegment(l, entry->page_count));
  }
  entry->kv_segments = device_->kv_layers();
  for (const StateBuffer& b : *state) entry->segments.push_back({b.kind, b.index, b.bytes});
  uint64_t physical = 0;
  for (const SegmentSpec& s : entry->segments) physical += s.physical_bytes;
  Manifest manifest;
  manifest.namespace_id = options_.namespace_id;
  manifest.tokens = r.tokens;
  manifest.blocks = entry->blocks;
  manifest.shared_prefix = r.shared_prefix;
  manifest.has_parent = entry->has_parent;
  manifest.parent_key = entry->parent_key;
  manifest.bytes_scale = options_.bytes_scale;
  manifest.logical_bytes = LogicalOf(physical);
  entry->manifest = EncodeManifest(manifest);
  entry->segments.push_back({TIER_SEGMENT_MANIFEST, 0, entry->manifest.size()});
  if (!entry->server_manifest.empty()) {
    entry->segments.push_back({TIER_SEGMENT_OTHER, 0, entry->server_manifest.size()});
  }
  for (const SegmentSpec& s : entry->segments) entry->physical_bytes += s.physical_bytes;
  entry->logical_bytes = LogicalOf(entry->segments);
  entry->prefill_saved_ns = cost_.RootPrefillNs(entry->tokens);
  return entry;
}

uint64_t Host::Impl::LogicalOf(const std::vector<SegmentSpec>& segments) const {
  uint64_t logical = 0;
  for (const SegmentSpec& s : segments) {
    const bool manifest =
        s.kind == TIER_SEGMENT_MANIFEST || (s.kind == TIER_SEGMENT_OTHER && s.index == 0);
    logical += manifest ? s.physical_bytes : LogicalOf(s.physical_bytes);
  }
  return logical;
}

Result<std::shared_ptr<HostCopy>> Host::Impl::HostCopyMakingRoom(const CheckpointEntry& entry) {
  auto copy = memory_->NewHostCopy(entry);
  if (copy.ok()) return copy;
  // The pinned memory is full while the logical Host budget may not be: let go of Host copies
  // that another tier backs (Cold or Device), least valuable first, until it fits. Each costs only
  // a slower restore later; the alternative loses `entry` (a refused seal, a dropped demotion) or
  // keeps a request waiting (a restore).
  for (const tier_key& key : VictimsIn(kHost)) {
    CheckpointEntry* victim = catalog_.Find(key);
    if (victim == &entry || !(victim->in(kCold) || victim->in(kDevice))) continue;
    policy_.OnLeave(*victim);
    DropHost(victim, "evicted");
    copy = memory_->NewHostCopy(entry);
    if (copy.ok()) return copy;
  }
  return copy;
}

void Host::Impl::WriteManifests(const CheckpointEntry& entry, HostCopy* copy) const {
  for (size_t i = entry.kv_segments; i < entry.segments.size(); ++i) {
    const SegmentSpec& s = entry.segments[i];
    const std::vector<std::byte>* bytes = s.kind == TIER_SEGMENT_MANIFEST ? &entry.manifest
                                          : s.kind == TIER_SEGMENT_OTHER && s.index == 0
                                              ? &entry.server_manifest
                                              : nullptr;
    if (bytes == nullptr) continue;
    TIER_CHECK(copy->segment(i).size() == bytes->size());
    if (!bytes->empty()) std::memcpy(copy->segment(i).data(), bytes->data(), bytes->size());
  }
}

Sealed Host::Impl::Seal(const SealRequest& r) {
  clock_ns_ = std::max(clock_ns_, r.now_ns);
  Sealed sealed;
  sealed.id = next_id_++;
  sealed.status = CheckSeal(r);
  if (!sealed.status.ok()) return sealed;
  const tier_key key = PrefixKey(options_.namespace_id, r.blocks);
  if (CheckpointEntry* existing = catalog_.Find(key); existing != nullptr) {
    if (existing->doomed) {
      sealed.status = Status::Busy("seal: the checkpoint is being removed");
      return sealed;
    }
    policy_.OnTouch(existing, r.now_ns);
    if (r.shared_prefix) Catalog::MarkShared(existing);
    sealed.existed = true;
    return sealed;
  }
  sealed.status = device_->OrderAfter(r.order_after).Annotate("seal");  // issue 27: before copies
  if (!sealed.status.ok()) return sealed;
  std::vector<StateBuffer> state;
  CheckpointEntry* entry = catalog_.Insert(NewEntry(r, key, &state));
  TIER_CHECK(entry != nullptr);
  policy_.OnInsert(entry, r.now_ns);
  if (entry->has_parent) {
    const CheckpointEntry* parent = catalog_.Find(entry->parent_key);
    if (parent != nullptr && parent->superseded) {
      ++stats_.superseded_checkpoints;
      policy_.OnSuperseded(*parent);
    }
  }
  std::string device_why, host_why;
  if (!SealOnDevice(entry, r, state, &sealed, &device_why) &&
      !SealOnHost(entry, r, state, &sealed, &host_why)) {
    Log(TIER_LOG_DEBUG, "host: no room to publish " + KeyHex(key));
    catalog_.Erase(entry);
    // Refused now, never pending (host.h, Seal): nothing was taken; the server keeps its pages.
    sealed.status = Status::NoSpace("seal: no room on Device or Host: Device: " + device_why +
                                    "; Host: " + host_why);
    return sealed;
  }
  Rebalance();
  return sealed;
}

bool Host::Impl::SealOnDevice(CheckpointEntry* entry, const SealRequest& r,
                              std::span<const StateBuffer> state, Sealed* sealed,
                              std::string* why) {
  if (entry->logical_bytes > options_.device_capacity_bytes) {
    *why = "its " + std::to_string(entry->logical_bytes) +
           " logical bytes exceed device_capacity_bytes " +
           std::to_string(options_.device_capacity_bytes);
    return false;
  }
  CopyJob job;
  // The arena takes back what a failure part-way took only after the copies queued into it are
  // done (issue 27: no free under the engine's worker, no wait on the scheduler thread).
  auto buffers = device_->CopyStateOnDevice(state, &job);
  if (!buffers.ok()) {
    *why = buffers.status().ToString();
    return false;
  }
  device_->Hold(r.pages);
  entry->device_copy = std::make_unique<DeviceCopy>();
  entry->device_copy->pages.assign(r.pages.begin(), r.pages.end());
  entry->device_copy->state = std::move(buffers).value();
  catalog_.AddPlacement(entry, kDevice);
  server_metrics_->Transition("none", "device");
  entry->sealing = true;
  sealed->on_device = true;
  std::shared_ptr<HostCopy> verify;
  if (options_.verify_held_pages) {  // the pages as sealed: checked whenever they are read
    auto scratch = memory_->NewKvScratch(*entry);
    auto gathered = scratch.ok() ? device_->ToHost(r.pages, {}, *scratch.value())
                                 : Result<CopyJob>(scratch.status());
    if (gathered.ok()) {
      for (const device::Transfer& t : gathered.value().transfers()) job.Add(t);
      verify = std::move(scratch).value();
    } else {
      Log(TIER_LOG_DEBUG, "host: the pages of " + KeyHex(entry->key) +
                              " are not verified: " + gathered.status().ToString());
    }
  }
  sealed->copied = job.Last();
  seals_.push_back({sealed->id, entry->key, std::move(job), {}, nullptr, std::move(verify)});
  return true;
}

bool Host::Impl::SealOnHost(CheckpointEntry* entry, const SealRequest& r,
                            std::span<const StateBuffer> state, Sealed* sealed, std::string* why) {
  // Larger than the Host budget: only as a way down to a cold tier (the arena is the bound).
  const bool cold = cold_ != nullptr && cold_capacity_bytes_ > 0;
  if (entry->logical_bytes > options_.host_capacity_bytes && !cold) {
    *why = "its " + std::to_string(entry->logical_bytes) +
           " logical bytes exceed host_capacity_bytes " +
           std::to_string(options_.host_capacity_bytes) + " and there is no cold tier";
    return false;
  }
  auto copy = HostCopyMakingRoom(*entry);
  if (!copy.ok()) {
    *why = "it needs " + std::to_string(entry->physical_bytes) +
           " bytes of pinned Host memory; host_memory_bytes is " +
           std::to_string(memory_->capacity_bytes()) + " with " +
           std::to_string(memory_->used_bytes()) +
           " in use (Host copies, restores staging, demotions, seals in flight): retry after a "
           "later Poll() (pressure frees it as spills complete) or raise host_memory_bytes";
    return false;
  }
  std::shared_ptr<HostCopy> host_copy = std::move(copy).value();
  auto job = device_->ToHost(r.pages, state, *host_copy);
  if (!job.ok()) {
    Log(TIER_LOG_WARN, "host: sealing " + KeyHex(entry->key) + ": " + job.status().ToString());
    *why = job.status().ToString();
    return false;
  }
  WriteManifests(*entry, host_copy.get());
  device_->Hold(r.pages);  // until the gather has read them
  entry->sealing = true;
  sealed->copied = job.value().Last();
  seals_.push_back({sealed->id, entry->key, std::move(job).value(),
                    std::vector<uint32_t>(r.pages.begin(), r.pages.end()), host_copy, nullptr});
  return true;
}

void Host::Impl::CheckSeals() {
  std::vector<SealOp> pending;
  for (SealOp& s : seals_) {
    if (!s.copy.Done()) {
      pending.push_back(std::move(s));
      continue;
    }
    const Status copied = s.copy.Wait();
    CheckpointEntry* entry = catalog_.Find(s.key);
    TIER_CHECK(entry != nullptr && entry->sealing);
    entry->sealing = false;
    if (copied.ok() && s.host_copy != nullptr) {
      entry->host_copy = std::move(s.host_copy);
      catalog_.AddPlacement(entry, kHost);
      server_metrics_->Transition("none", "host");
    }
    if (copied.ok() && s.verify_copy != nullptr) {
      entry->page_sums = PageSums(*s.verify_copy, entry->page_count);
    }
    if (!s.held_pages.empty()) ReleasePages(s.held_pages);
    if (!copied.ok()) {
      Log(TIER_LOG_WARN, "host: sealing " + KeyHex(s.key) + " failed: " + copied.ToString());
      entry->doomed = true;
    }
    Event event;
    event.kind = Event::kSealed;
    event.id = s.id;
    Emit(std::move(event));
    DropIfDoomed(entry);
  }
  seals_ = std::move(pending);
}

bool Host::Impl::Evict(const tier_key& key) {
  CheckpointEntry* entry = catalog_.Find(key);
  if (entry == nullptr || entry->doomed) return false;
  entry->doomed = true;  // hidden from lookups at once
  DropIfDoomed(entry);
  return true;
}

}  // namespace tier
