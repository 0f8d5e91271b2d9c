#include "planner.h"

#include <tier/device/host_arena.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstring>

#include "checkpoint_bytes.h"
#include "host_services.h"
#include "log.h"
#include "manifest.h"

namespace tier {
namespace {

// What the planner expects a spill to take in the cold tier, before the provider says: the data
// plus room for headers, a 4 KiB-aligned start per segment and per 1 MiB chunk. The provider's own
// NO_SPACE remains the authority (the planner then makes more room once and retries).
// Shorter checkpoints an admission falls back to when a longer one cannot be used.
constexpr int kMaxCandidates = 8;

uint64_t ColdBytesNeeded(const CheckpointEntry& entry) {
  return entry.physical_bytes + entry.physical_bytes / 256 + 8192 * (entry.segments.size() + 2) +
         entry.manifest.size();
}

uint64_t ScaledBytes(uint64_t logical, uint64_t scale) {
  if (logical == 0) return 0;
  return std::max<uint64_t>(1, (logical + scale - 1) / scale);
}

}  // namespace

Planner::Planner(PlannerConfig config, const CostModel& cost, DeviceTier* device, ColdTier* cold,
                 ServerMetrics* metrics)
    : config_(std::move(config)), cost_(cost), device_(device), cold_(cold), metrics_(metrics) {
  if (config_.bytes_scale == 0) config_.bytes_scale = 1;
  // The arena bounds memory; the planner's logical accounting decides what lives in Host. Room
  // for alignment padding and the transient copies of a promotion or a publication.
  device::HostArenaOptions arena;
  const uint64_t physical = config_.host_capacity_bytes / config_.bytes_scale;
  arena.capacity_bytes = (physical * 2 + (64ull << 20) + 4095) / 4096 * 4096;
  arena.chunk_bytes = std::min<uint64_t>(256ull << 20, arena.capacity_bytes);
  auto created = device::HostArena::Create(arena, device_->host_allocator());
  if (!created.ok()) {
    Log(TIER_LOG_ERROR, "planner: host arena: " + created.status().ToString());
    std::abort();
  }
  arena_ = std::move(created.value());
}

Planner::~Planner() = default;

double Planner::Value(const CheckpointEntry& entry, uint64_t now_ns) const {
  const double per_byte = static_cast<double>(entry.prefill_saved_ns) /
                          static_cast<double>(std::max<uint64_t>(1, entry.logical_bytes));
  const double age_s =
      now_ns > entry.last_use_ns ? static_cast<double>(now_ns - entry.last_use_ns) / 1e9 : 0.0;
  return per_byte / (1.0 + age_s / config_.recency_half_life_s);
}

std::vector<SegmentSpec> Planner::Layout(uint64_t tokens, size_t manifest_bytes) const {
  const ModelProfile& p = cost_.profile();
  const uint64_t scale = config_.bytes_scale;
  std::vector<SegmentSpec> layout;
  const uint64_t layer_bytes = p.LayerKvBytes(tokens);
  for (uint32_t l = 0; l < p.full_attention_layers; ++l) {
    layout.push_back({TIER_SEGMENT_MAIN_KV, l, layer_bytes, ScaledBytes(layer_bytes, scale)});
  }
  for (uint32_t m = 0; m < p.mtp_layers; ++m) {
    layout.push_back({TIER_SEGMENT_SPEC_KV, m, layer_bytes, ScaledBytes(layer_bytes, scale)});
  }
  for (uint32_t i = 0; i < p.state_image.size(); ++i) {
    const uint64_t bytes = p.state_image[i].bytes;
    layout.push_back({TIER_SEGMENT_STATE_IMAGE, i, bytes, ScaledBytes(bytes, scale)});
  }
  layout.push_back({TIER_SEGMENT_HIDDEN_STATE, 0, p.hidden_state_bytes,
                    ScaledBytes(p.hidden_state_bytes, scale)});
  // The manifest is real data (the identity), never scaled.
  layout.push_back({TIER_SEGMENT_MANIFEST, 0, manifest_bytes, manifest_bytes});
  return layout;
}

std::unique_ptr<HostCopy> Planner::NewHostCopy(const CheckpointEntry& entry) {
  std::vector<uint64_t> sizes;
  for (const SegmentSpec& s : entry.segments) sizes.push_back(s.physical_bytes);
  auto copy = HostCopy::Allocate(arena_.get(), sizes);
  if (!copy.ok()) {
    Log(TIER_LOG_WARN, "planner: " + copy.status().ToString());
    return nullptr;
  }
  return copy.take();
}

std::unique_ptr<HostCopy> Planner::FreshBytes(const CheckpointEntry& entry) {
  auto copy = NewHostCopy(entry);
  if (copy == nullptr) return nullptr;
  for (size_t i = 0; i < entry.segments.size(); ++i) {
    const SegmentSpec& s = entry.segments[i];
    if (s.kind == TIER_SEGMENT_MANIFEST) {
      std::memcpy(copy->segment(i).data(), entry.manifest.data(), entry.manifest.size());
    } else {
      FillSegmentBytes(entry.key, s.kind, s.index, copy->segment(i));
    }
  }
  return copy;
}

std::vector<tier_segment> Planner::Segments(const CheckpointEntry& entry, HostCopy& copy) const {
  std::vector<tier_segment> segments;
  segments.reserve(entry.segments.size());
  for (size_t i = 0; i < entry.segments.size(); ++i) {
    const SegmentSpec& s = entry.segments[i];
    segments.push_back({s.kind, s.index, s.physical_bytes, copy.segment(i).data()});
  }
  return segments;
}

bool Planner::Verify(const CheckpointEntry& entry, const HostCopy& copy) {
  bool exact = copy.segment_count() == entry.segments.size();
  for (size_t i = 0; exact && i < entry.segments.size(); ++i) {
    const SegmentSpec& s = entry.segments[i];
    const std::span<const std::byte> bytes = copy.segment(i);
    if (bytes.size() != s.physical_bytes) {
      exact = false;
    } else if (s.kind == TIER_SEGMENT_MANIFEST) {
      exact = std::memcmp(bytes.data(), entry.manifest.data(), entry.manifest.size()) == 0;
    } else {
      exact = SegmentBytesMatch(entry.key, s.kind, s.index, bytes);
    }
  }
  ++totals_.verified_restores;
  if (!exact) ++totals_.mismatched_restores;
  metrics_->RestoreVerification(exact);
  return exact;
}

Status Planner::Start() {
  if (cold_ == nullptr) return Status::Ok();
  ColdTier::PhaseScope phase(cold_, IoPhase::kStartup);
  auto stats = cold_->Stats();
  if (!stats.ok()) return stats.status();
  cold_capacity_bytes_ = stats.value().capacity_bytes;
  if (cold_capacity_bytes_ == 0) return Status::Ok();
  uint64_t adopted = 0, refused = 0;
  Status walked = cold_->Enumerate([&](const tier_entry& e) {
    if (e.manifest == nullptr) {
      ++refused;
      return true;
    }
    auto manifest = DecodeManifest({static_cast<const std::byte*>(e.manifest), e.manifest_bytes});
    if (!manifest.ok() || manifest.value().namespace_id != config_.namespace_id ||
        manifest.value().bytes_scale != config_.bytes_scale) {
      ++refused;
      return true;
    }
    const Manifest& m = manifest.value();
    auto entry = std::make_unique<CheckpointEntry>();
    entry->key = PrefixKey(config_.namespace_id, m.blocks);
    // Exact identity: the key the blocks give must be the key the provider stored.
    if (std::memcmp(entry->key.bytes, e.key.bytes, TIER_KEY_BYTES) != 0) {
      ++refused;
      return true;
    }
    entry->blocks = m.blocks;
    entry->tokens = m.tokens;
    entry->shared_prefix = m.shared_prefix;
    entry->has_parent = m.has_parent;
    entry->parent_key = m.parent_key;
    entry->manifest.assign(static_cast<const std::byte*>(e.manifest),
                           static_cast<const std::byte*>(e.manifest) + e.manifest_bytes);
    entry->segments = Layout(m.tokens, entry->manifest.size());
    for (const SegmentSpec& s : entry->segments) {
      entry->logical_bytes += s.logical_bytes;
      entry->physical_bytes += s.physical_bytes;
    }
    // The stored segment table must be the one this profile and scale produce.
    bool same_table = e.segment_count == entry->segments.size();
    for (uint32_t i = 0; same_table && i < e.segment_count; ++i) {
      same_table =
          std::any_of(entry->segments.begin(), entry->segments.end(), [&](const SegmentSpec& s) {
            return s.kind == e.segments[i].kind && s.index == e.segments[i].index &&
                   s.physical_bytes == e.segments[i].length_bytes;
          });
    }
    if (!same_table) {
      ++refused;
      return true;
    }
    entry->prefill_saved_ns = cost_.RootPrefillNs(entry->tokens);
    entry->cold_stored_bytes = e.stored_bytes;
    entry->placements = kCold;
    entry->readopted = true;
    if (catalog_.Insert(std::move(entry)) != nullptr) ++adopted;
    return true;
  });
  if (!walked.ok()) return walked;
  totals_.readopted = adopted;
  metrics_->Readopted(adopted);
  Log(TIER_LOG_INFO,
      "planner: re-adopted " + std::to_string(adopted) + " cold checkpoint(s) of namespace '" +
          config_.namespace_id + "'" +
          (refused > 0 ? ", ignored " + std::to_string(refused) + " of another layout or scale"
                       : std::string()));
  UpdateGauges();
  return Status::Ok();
}

std::vector<tier_key> Planner::VictimsIn(Placement placement, uint64_t now_ns,
                                         double below_value) const {
  std::vector<std::pair<double, tier_key>> keyed;
  for (CheckpointEntry* e : catalog_.Entries()) {
    if (!e->in(placement) || e->pins > 0) continue;
    const double value = Value(*e, now_ns);
    if (below_value >= 0 && value >= below_value) continue;
    keyed.emplace_back(value, e->key);
  }
  std::sort(keyed.begin(), keyed.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first
                              : std::memcmp(a.second.bytes, b.second.bytes, TIER_KEY_BYTES) < 0;
  });
  std::vector<tier_key> keys;
  keys.reserve(keyed.size());
  for (const auto& [value, key] : keyed) keys.push_back(key);
  return keys;
}

void Planner::UpdateGauges() {
  totals_.peak_cold_logical_bytes =
      std::max(totals_.peak_cold_logical_bytes, catalog_.logical_bytes_in(kCold));
  totals_.peak_cold_stored_bytes =
      std::max(totals_.peak_cold_stored_bytes, catalog_.physical_bytes_in(kCold));
  metrics_->SetCatalog(catalog_, cold_capacity_bytes_ * config_.bytes_scale);
}

void Planner::RemovePlacement(CheckpointEntry* entry, Placement placement, const char* to) {
  catalog_.RemovePlacement(entry, placement);
  metrics_->Transition(PlacementName(placement), to);
}

void Planner::Drop(CheckpointEntry* entry, const char* from) {
  assert(entry->pins == 0);
  if (entry->in(kCold) && cold_ != nullptr) {
    Status removed = cold_->Remove(entry->key);
    if (!removed.ok() && removed.code() != TIER_NOT_FOUND) {
      Log(TIER_LOG_WARN,
          "planner: cold remove of " + KeyHex(entry->key) + " failed: " + removed.ToString());
    }
  }
  for (Placement p : {kDevice, kHost, kCold}) {
    if (entry->in(p)) catalog_.RemovePlacement(entry, p);
  }
  metrics_->Transition(from, "evicted");
  ++totals_.evictions;
  catalog_.Erase(entry);
}

bool Planner::MakeRoomOnCold(uint64_t stored_bytes, double below_value, uint64_t now_ns) {
  if (cold_ == nullptr || cold_capacity_bytes_ == 0) return false;
  if (stored_bytes > cold_capacity_bytes_) return false;
  ColdTier::PhaseScope phase(cold_, IoPhase::kPressure);
  auto stats = cold_->Stats();
  if (!stats.ok()) return false;
  uint64_t used = stats.value().used_bytes;
  if (used + stored_bytes <= cold_capacity_bytes_) return true;
  for (const tier_key& key : VictimsIn(kCold, now_ns, below_value)) {
    if (used + stored_bytes <= cold_capacity_bytes_) break;
    CheckpointEntry* victim = catalog_.Find(key);
    if (victim == nullptr || !victim->in(kCold) || victim->pins > 0) continue;
    const uint64_t freed = victim->cold_stored_bytes;
    Status removed = cold_->Remove(victim->key);
    if (!removed.ok() && removed.code() != TIER_NOT_FOUND) {
      Log(TIER_LOG_WARN,
          "planner: cold remove of " + KeyHex(victim->key) + " failed: " + removed.ToString());
      continue;
    }
    used = used > freed ? used - freed : 0;
    catalog_.RemovePlacement(victim, kCold);  // the provider no longer has it
    if (victim->placements == 0) {
      Drop(victim, "cold");
    } else {
      metrics_->Transition("cold", "evicted");
    }
  }
  return used + stored_bytes <= cold_capacity_bytes_;
}

bool Planner::MakeRoomOnHost(uint64_t logical_bytes, uint64_t now_ns) {
  const uint64_t capacity = config_.host_capacity_bytes;
  if (logical_bytes > capacity) return false;
  if (catalog_.logical_bytes_in(kHost) + logical_bytes <= capacity) return true;
  ColdTier::PhaseScope phase(cold_, IoPhase::kPressure);
  const std::vector<tier_key> victims = VictimsIn(kHost, now_ns);

  struct InFlight {
    CheckpointEntry* entry;
    std::unique_ptr<PendingSpill> spill;
  };
  // Rounds: release or spill victims until enough bytes are on their way out, wait for the
  // spills, and go again if some failed (their Host copies stay).
  for (bool progress = true;
       progress && catalog_.logical_bytes_in(kHost) + logical_bytes > capacity;) {
    progress = false;
    std::vector<InFlight> in_flight;
    uint64_t releasing = 0;  // Host bytes freed once the in-flight spills complete
    uint64_t reserving = 0;  // cold bytes the in-flight spills may take
    auto over = [&] {
      return catalog_.logical_bytes_in(kHost) - releasing + logical_bytes > capacity;
    };
    for (const tier_key& key : victims) {
      if (!over()) break;
      CheckpointEntry* victim = catalog_.Find(key);
      if (victim == nullptr || !victim->in(kHost) || victim->pins > 0) continue;
      if (victim->in(kDevice) || victim->in(kCold)) {
        RemovePlacement(victim, kHost, "evicted");  // another copy remains: free to release
        progress = true;
        continue;
      }
      if (victim->spill_failed) continue;  // its Host copy stays unless nothing else can go
      // The Host copy is the last one: spill it to Cold if the tier can take it, else drop it.
      const uint64_t need = ColdBytesNeeded(*victim);
      if (!MakeRoomOnCold(reserving + need, Value(*victim, now_ns), now_ns)) {
        Drop(victim, "host");
        progress = true;
        continue;
      }
      auto segments = Segments(*victim, *victim->host_copy);
      auto spill = cold_->Spill(victim->key, segments);
      if (!spill.ok() && spill.status().code() == TIER_NO_SPACE &&
          MakeRoomOnCold(reserving + 2 * need, Value(*victim, now_ns), now_ns)) {
        spill = cold_->Spill(victim->key, segments);  // the provider's overhead was larger
      }
      progress = true;
      if (!spill.ok()) {
        ++totals_.spill_failures;
        victim->spill_failed = true;
        metrics_->SpillFailure("kept_host");
        Log(TIER_LOG_WARN, "planner: spill of " + KeyHex(victim->key) +
                               " refused: " + spill.status().ToString() + " (Host copy kept)");
        continue;
      }
      ++victim->pins;  // the operation uses the Host copy until it completes
      releasing += victim->logical_bytes;
      reserving += need;
      in_flight.push_back({victim, spill.take()});
    }
    for (InFlight& op : in_flight) {
      const Completion done = op.spill->result.get();
      CheckpointEntry* e = op.entry;
      --e->pins;
      if (done.status.ok()) {
        ++totals_.spills;
        totals_.spilled_logical_bytes += e->logical_bytes;
        totals_.spilled_stored_bytes += done.stored_bytes;
        e->cold_stored_bytes = done.stored_bytes;
        catalog_.AddPlacement(e, kCold);
        metrics_->Transition("host", "cold");
        catalog_.RemovePlacement(e, kHost);  // released only now that the provider has it all
      } else {
        ++totals_.spill_failures;
        e->spill_failed = true;
        metrics_->SpillFailure("kept_host");
        Log(TIER_LOG_WARN, "planner: spill of " + KeyHex(e->key) +
                               " failed: " + done.status.ToString() + " (Host copy kept)");
      }
    }
  }
  UpdateGauges();
  // Failed spills kept their Host copies; if Host is still over, drop the least valuable.
  if (catalog_.logical_bytes_in(kHost) + logical_bytes > capacity) {
    for (const tier_key& key : victims) {
      if (catalog_.logical_bytes_in(kHost) + logical_bytes <= capacity) break;
      CheckpointEntry* victim = catalog_.Find(key);
      if (victim == nullptr || !victim->in(kHost) || victim->pins > 0) continue;
      if (victim->spill_failed) metrics_->SpillFailure("dropped");
      Drop(victim, "host");
    }
  }
  UpdateGauges();
  return catalog_.logical_bytes_in(kHost) + logical_bytes <= capacity;
}

bool Planner::DemoteFromDevice(CheckpointEntry* entry, uint64_t now_ns, uint64_t* ns) {
  if (!entry->in(kHost)) {
    ++entry->pins;  // keep it while Host makes room
    const bool room = MakeRoomOnHost(entry->logical_bytes, now_ns);
    --entry->pins;
    if (!room) return false;
    auto host = NewHostCopy(*entry);
    if (host == nullptr) return false;
    Status copied = device_->Download(*entry->device_copy, host.get());
    if (!copied.ok()) {
      Log(TIER_LOG_WARN, "planner: device-to-host copy failed: " + copied.ToString());
      return false;
    }
    *ns += cost_.DeviceToHostNs(entry->logical_bytes, entry->segments.size());
    entry->host_copy = std::move(host);
    catalog_.AddPlacement(entry, kHost);
    metrics_->Transition("device", "host");
  }
  catalog_.RemovePlacement(entry, kDevice);
  return true;
}

bool Planner::MakeRoomOnDevice(uint64_t logical_bytes, uint64_t now_ns, uint64_t* ns) {
  const uint64_t capacity = config_.device_capacity_bytes;
  if (logical_bytes > capacity) return false;
  if (catalog_.logical_bytes_in(kDevice) + logical_bytes <= capacity) return true;
  ColdTier::PhaseScope phase(cold_, IoPhase::kPressure);
  for (const tier_key& key : VictimsIn(kDevice, now_ns)) {
    if (catalog_.logical_bytes_in(kDevice) + logical_bytes <= capacity) break;
    CheckpointEntry* victim = catalog_.Find(key);
    if (victim == nullptr || !victim->in(kDevice) || victim->pins > 0) continue;
    if (!DemoteFromDevice(victim, now_ns, ns)) {
      // Host cannot take it. A cold copy remains, or it is dropped.
      if (victim->in(kCold)) {
        RemovePlacement(victim, kDevice, "evicted");
      } else {
        Drop(victim, "device");
      }
    }
  }
  UpdateGauges();
  return catalog_.logical_bytes_in(kDevice) + logical_bytes <= capacity;
}

bool Planner::LoadIntoLane(CheckpointEntry* entry, const HostCopy& source, uint64_t now_ns,
                           uint64_t* ns) {
  if (entry->in(kDevice)) return true;
  auto copy = device_->Upload(source);
  if (!copy.ok()) {
    Log(TIER_LOG_WARN, "planner: host-to-device copy failed: " + copy.status().ToString());
    return false;
  }
  // Verify what reached the device by reading it back through the same path.
  auto check = NewHostCopy(*entry);
  if (check == nullptr || !device_->Download(*copy.value(), check.get()).ok() ||
      !Verify(*entry, *check)) {
    return false;
  }
  *ns += cost_.HostToDeviceNs(entry->logical_bytes, entry->segments.size());
  // The request runs from this copy either way; it stays parked on Device only if there is room.
  if (MakeRoomOnDevice(entry->logical_bytes, now_ns, ns)) {
    entry->device_copy = copy.take();
    catalog_.AddPlacement(entry, kDevice);
    metrics_->Transition("host", "device");
  }
  return true;
}

void Planner::ForgetCold(CheckpointEntry* entry) {
  // The provider no longer holds it (or dropped it as corrupt): the catalog must stop believing
  // it does.
  catalog_.RemovePlacement(entry, kCold);
  if (entry->placements == 0 && entry->pins == 0) {
    Drop(entry, "cold");
  } else {
    metrics_->Transition("cold", "evicted");
  }
}

AdmissionResult Planner::TryColdRestore(CheckpointEntry* entry, uint64_t now_ns, RootReason* skip) {
  AdmissionResult result;
  ColdTier::PhaseScope phase(cold_, IoPhase::kAdmission);
  const tier_key key = entry->key;
  // Providers compare against stored (scaled) bytes: scale the prediction the same way.
  const uint64_t predicted_ns = cost_.RootPrefillNs(entry->tokens);
  auto plan = cold_->PlanRestore(key, predicted_ns / config_.bytes_scale);
  if (!plan.ok() || plan.value().decision != TIER_DECISION_RESTORE) {
    const tier_reason reason = plan.ok() ? plan.value().reason : tier_reason{TIER_REASON_BUSY};
    *skip = reason == TIER_REASON_MISS      ? RootReason::kMiss
            : reason == TIER_REASON_COST    ? RootReason::kCost
            : reason == TIER_REASON_CORRUPT ? RootReason::kCorrupt
                                            : RootReason::kBusy;
    if (reason == TIER_REASON_MISS || reason == TIER_REASON_CORRUPT) ForgetCold(entry);
    return result;
  }
  const uint64_t planned_generation = entry->generation;
  const bool host_room = MakeRoomOnHost(entry->logical_bytes, now_ns);
  if (after_plan_hook) after_plan_hook(entry);
  // A plan is only good for the catalog it was made against.
  CheckpointEntry* now = catalog_.Find(key);
  if (now == nullptr || now != entry || now->generation != planned_generation) {
    *skip = RootReason::kStalePlan;
    Log(TIER_LOG_DEBUG, "planner: stale plan for " + KeyHex(key) + ", prefilling from the root");
    return result;
  }
  // Without room to keep a Host copy the restore still stages through host memory (the arena
  // keeps slack for it); only an exhausted arena stops it.
  auto buffers = NewHostCopy(*entry);
  if (buffers == nullptr) {
    *skip = RootReason::kNoRoom;
    return result;
  }
  ++entry->pins;
  auto segments = Segments(*entry, *buffers);
  const Completion done = cold_->RestoreAndWait(key, segments);
  if (!done.status.ok()) {
    --entry->pins;
    *skip = done.status.code() == TIER_DATA_LOSS   ? RootReason::kCorrupt
            : done.status.code() == TIER_NOT_FOUND ? RootReason::kMiss
            : done.status.code() == TIER_BUSY      ? RootReason::kBusy
                                                   : RootReason::kRestoreFailed;
    Log(TIER_LOG_WARN, "planner: cold restore of " + KeyHex(key) +
                           " failed: " + done.status.ToString() + "; prefilling from the root");
    if (*skip == RootReason::kCorrupt || *skip == RootReason::kMiss) ForgetCold(entry);
    return result;
  }
  if (!Verify(*entry, *buffers)) {
    --entry->pins;
    *skip = RootReason::kCorrupt;
    Log(TIER_LOG_ERROR,
        "planner: cold restore of " + KeyHex(key) + " returned wrong bytes; not served");
    return result;
  }
  totals_.restored_logical_bytes += entry->logical_bytes;
  totals_.restored_stored_bytes += done.stored_bytes;
  if (entry->readopted) ++totals_.readopted_hits;
  // Measured wall time of the real (scaled) restore, scaled back to the logical size.
  result.admission_ns = done.duration_ns * config_.bytes_scale;
  if (!LoadIntoLane(entry, *buffers, now_ns, &result.admission_ns)) {
    --entry->pins;
    *skip = RootReason::kRestoreFailed;
    return result;
  }
  if (host_room) {
    entry->host_copy = std::move(buffers);
    catalog_.AddPlacement(entry, kHost);
    metrics_->Transition("cold", "host");
  }
  result.outcome = Outcome::kColdRestore;
  result.entry = entry;  // stays pinned
  return result;
}

AdmissionResult Planner::Admit(std::span<const uint64_t> blocks, uint64_t now_ns) {
  ColdTier::PhaseScope phase(cold_, IoPhase::kAdmission);
  const std::vector<uint64_t> hashes = PrefixHashes(blocks);
  AdmissionResult result;
  bool skipped = false;
  // Candidates longest first, found one at a time: most admissions stop at the first.
  size_t max_blocks = blocks.size();
  for (int tries = 0; tries < kMaxCandidates && max_blocks > 0; ++tries) {
    CheckpointEntry* entry = catalog_.LongestMatch(blocks, hashes, max_blocks);
    if (entry == nullptr) break;
    max_blocks = entry->blocks.size() - 1;
    AdmissionResult attempt;
    if (entry->in(kDevice)) {
      ++entry->pins;
      attempt.outcome = Outcome::kDeviceHit;
      attempt.entry = entry;
    } else if (entry->in(kHost)) {
      ++entry->pins;
      uint64_t ns = 0;
      if (LoadIntoLane(entry, *entry->host_copy, now_ns, &ns)) {
        attempt.outcome = Outcome::kHostRestore;
        attempt.entry = entry;
        attempt.admission_ns = ns;
      } else {
        --entry->pins;
        if (!skipped) result.root_reason = RootReason::kRestoreFailed;
        skipped = true;
        continue;
      }
    } else if (entry->in(kCold) && cold_ != nullptr) {
      RootReason reason = RootReason::kNoCheckpoint;
      attempt = TryColdRestore(entry, now_ns, &reason);
      if (attempt.entry == nullptr) {
        if (!skipped) result.root_reason = reason;
        skipped = true;
        if (reason == RootReason::kStalePlan) break;  // abort cleanly: prefill from the root
        continue;
      }
    } else {
      continue;
    }
    attempt.entry->last_use_ns = now_ns;
    attempt.cached_tokens = attempt.entry->tokens;
    metrics_->Admission(attempt.outcome);
    UpdateGauges();
    return attempt;
  }
  result.outcome = Outcome::kRootPrefill;
  metrics_->Admission(Outcome::kRootPrefill);
  metrics_->RootPrefill(result.root_reason);
  UpdateGauges();
  return result;
}

bool Planner::Evict(const tier_key& key) {
  CheckpointEntry* entry = catalog_.Find(key);
  if (entry == nullptr || entry->pins > 0) return false;
  ColdTier::PhaseScope phase(cold_, IoPhase::kPressure);
  Drop(entry, entry->in(kDevice) ? "device" : entry->in(kHost) ? "host" : "cold");
  UpdateGauges();
  return true;
}

void Planner::Release(CheckpointEntry* entry) {
  if (entry == nullptr) return;
  assert(entry->pins > 0);
  --entry->pins;
}

CheckpointEntry* Planner::Seal(std::span<const uint64_t> blocks, uint64_t tokens,
                               bool shared_prefix, uint64_t now_ns) {
  const tier_key key = PrefixKey(config_.namespace_id, blocks);
  if (CheckpointEntry* existing = catalog_.Find(key); existing != nullptr) {
    existing->last_use_ns = now_ns;
    existing->shared_prefix = existing->shared_prefix || shared_prefix;
    return existing;
  }
  auto entry = std::make_unique<CheckpointEntry>();
  entry->key = key;
  entry->blocks.assign(blocks.begin(), blocks.end());
  entry->tokens = tokens;
  entry->shared_prefix = shared_prefix;
  // The checkpoint it extends: the longest published one that is a prefix of it.
  const std::vector<uint64_t> hashes = PrefixHashes(blocks);
  if (blocks.size() > 1) {
    auto parents = catalog_.LongestPrefixMatches(blocks.first(blocks.size() - 1),
                                                 std::span(hashes).first(blocks.size() - 1), 1);
    if (!parents.empty()) {
      entry->has_parent = true;
      entry->parent_key = parents[0]->key;
    }
  }
  Manifest manifest;
  manifest.namespace_id = config_.namespace_id;
  manifest.tokens = tokens;
  manifest.blocks = entry->blocks;
  manifest.shared_prefix = shared_prefix;
  manifest.has_parent = entry->has_parent;
  manifest.parent_key = entry->parent_key;
  manifest.bytes_scale = config_.bytes_scale;
  manifest.logical_bytes = cost_.profile().CheckpointBytes(tokens);
  entry->manifest = EncodeManifest(manifest);
  entry->segments = Layout(tokens, entry->manifest.size());
  for (const SegmentSpec& s : entry->segments) {
    entry->logical_bytes += s.logical_bytes;
    entry->physical_bytes += s.physical_bytes;
  }
  entry->prefill_saved_ns = cost_.RootPrefillNs(tokens);
  entry->last_use_ns = now_ns;

  // The engine produced this state on the Device: publish it there, or on Host if Device is full
  // of pinned state.
  uint64_t ignored_ns = 0;
  auto bytes = FreshBytes(*entry);
  if (bytes == nullptr) return nullptr;
  if (MakeRoomOnDevice(entry->logical_bytes, now_ns, &ignored_ns)) {
    auto copy = device_->Upload(*bytes);
    if (copy.ok()) {
      entry->device_copy = copy.take();
      entry->placements = kDevice;
    }
  }
  if (entry->placements == 0 && MakeRoomOnHost(entry->logical_bytes, now_ns)) {
    entry->host_copy = std::move(bytes);
    entry->placements = kHost;
  }
  if (entry->placements == 0) {
    Log(TIER_LOG_DEBUG, "planner: no room to publish " + KeyHex(key));
    return nullptr;
  }
  const char* to = entry->placements == kDevice ? "device" : "host";
  CheckpointEntry* raw = catalog_.Insert(std::move(entry));
  metrics_->Transition("none", to);
  UpdateGauges();
  return raw;
}

}  // namespace tier
