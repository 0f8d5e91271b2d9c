// pressure.cc -- keeping Device, Host and Cold within their budgets by one value order.
//
// Rebalance() runs after every change and in every Poll(). It starts what brings a tier back
// under its budget and never waits: a Device copy with no other copy is demoted to Host (gathered
// on the engine), a Host copy with no other copy is spilled to Cold (the provider), anything with
// another copy just drops this one, and what nothing can take is dropped, least valuable first. A
// Host copy is released only when its spill completed; a failed spill keeps it and backs off.
// Budgets are targets the moving copies may overshoot for a moment; the host arena is the bound.
#include <tier/host/identity.h>
#include <tier/host/log.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "host_impl.h"

namespace tier {
namespace {

constexpr uint64_t kSecondNs = 1000ull * 1000 * 1000;
constexpr uint64_t kFirstBackoffNs = kSecondNs;
constexpr uint64_t kMaxBackoffNs = 60 * kSecondNs;
constexpr uint64_t kFailureLogIntervalNs = 10 * kSecondNs;

}  // namespace

uint64_t Host::Impl::ColdBytesNeeded(const CheckpointEntry& entry) const {
  // The data plus room for headers, a 4 KiB-aligned start per segment and per 1 MiB chunk. The
  // provider's own NO_SPACE remains the authority.
  return entry.physical_bytes + entry.physical_bytes / 256 + 8192 * (entry.segments.size() + 2) +
         entry.manifest.size();
}

uint64_t Host::Impl::ColdReadNs(const CheckpointEntry& entry) const {
  const double rate = options_.model_cold_read_bytes_per_second > 0
                          ? options_.model_cold_read_bytes_per_second
                          : observed_cold_read_bytes_per_second_;
  return static_cast<uint64_t>(static_cast<double>(entry.logical_bytes) / rate * 1e9);
}

uint64_t Host::Impl::RestoreNsFrom(const CheckpointEntry& entry, Placement placement) const {
  if (placement == kDevice) return 0;
  const uint64_t transfer_ns = cost_.HostToDeviceNs(entry.logical_bytes, entry.segments.size());
  return placement == kHost ? transfer_ns : ColdReadNs(entry) + transfer_ns;
}

double Host::Impl::ValueIn(const CheckpointEntry& entry, Placement placement) const {
  return policy_.Value(entry, clock_ns_, RestoreNsFrom(entry, placement));
}

uint64_t Host::Impl::BytesIn(const CheckpointEntry& entry, Placement placement) const {
  return placement == kCold ? entry.cold_stored_bytes : entry.logical_bytes;
}

uint64_t Host::Impl::BudgetOf(Placement placement) const {
  switch (placement) {
    case kDevice:
      return options_.device_capacity_bytes;
    case kHost:
      return options_.host_capacity_bytes;
    default:
      return cold_capacity_bytes_;
  }
}

std::vector<tier_key> Host::Impl::VictimsIn(Placement placement, double below_value) const {
  std::vector<Victim> victims;
  for (CheckpointEntry* e : catalog_.Entries()) {
    if (!e->in(placement) || !e->idle()) continue;
    if (placement == kCold && e->remote) continue;  // another server's: gc's to remove
    const double value = ValueIn(*e, placement);
    if (below_value >= 0 && value >= below_value) continue;
    victims.push_back({e->prefetched && placement == kHost, value, e});
  }
  std::sort(victims.begin(), victims.end(), [](const Victim& a, const Victim& b) {
    if (a.prefetched != b.prefetched) return !a.prefetched;
    if (a.value != b.value) return a.value < b.value;
    return std::memcmp(a.entry->key.bytes, b.entry->key.bytes, TIER_KEY_BYTES) < 0;
  });
  if (options_.tenant_share > 0) TenantsOverShareFirst(placement, &victims);
  std::vector<tier_key> keys;
  keys.reserve(victims.size());
  for (const Victim& v : victims) keys.push_back(v.entry->key);
  return keys;
}

void Host::Impl::TenantsOverShareFirst(Placement placement, std::vector<Victim>* victims) const {
  // What each tenant holds in the tier (busy checkpoints too: they count, they cannot go).
  std::unordered_map<std::string_view, uint64_t> held_bytes;
  for (CheckpointEntry* e : catalog_.Entries()) {
    if (e->in(placement) && !(placement == kCold && e->remote)) {
      held_bytes[e->tenant] += BytesIn(*e, placement);
    }
  }
  const auto share_bytes =
      static_cast<uint64_t>(options_.tenant_share * static_cast<double>(BudgetOf(placement)));
  // One pass in value order: a victim whose tenant is (still) over its share comes first, and
  // takes its bytes off its tenant; the rest keep their order after them.
  std::vector<Victim> first, then;
  for (const Victim& v : *victims) {
    uint64_t& held = held_bytes[v.entry->tenant];
    if (!v.prefetched && held > share_bytes) {
      held -= std::min(held, BytesIn(*v.entry, placement));
      first.push_back(v);
    } else {
      then.push_back(v);
    }
  }
  first.insert(first.end(), then.begin(), then.end());
  *victims = std::move(first);
}

void Host::Impl::Rebalance() {
  if (closing_) return;
  RebalanceDevice();
  RebalanceHost();
  UpdateGauges();
}

void Host::Impl::RebalanceDevice() {
  const uint64_t capacity = options_.device_capacity_bytes;
  auto over = [&] { return catalog_.logical_bytes_in(kDevice) > capacity + demoting_bytes_; };
  if (!over()) return;
  for (const tier_key& key : VictimsIn(kDevice)) {
    if (!over()) break;
    CheckpointEntry* e = catalog_.Find(key);
    if (e->in(kHost) || e->in(kCold)) {
      DropDevice(e, "evicted");  // another copy remains
      policy_.OnLeave(*e);
    } else {
      policy_.OnLeave(*e);
      StartDemotion(e);
    }
  }
}

void Host::Impl::StartDemotion(CheckpointEntry* e) {
  auto copy = HostCopyMakingRoom(*e);
  if (!copy.ok()) {
    Log(TIER_LOG_DEBUG,
        "host: no host memory to demote " + KeyHex(e->key) + ": " + copy.status().ToString());
    Drop(e, "device", IoPhase::kPressure);  // Host cannot take it: it leaves
    return;
  }
  std::shared_ptr<HostCopy> host_copy = std::move(copy).value();
  auto gathered = device_->ToHost(e->device_copy->pages, {}, *host_copy);
  auto state = gathered.ok() ? device_->DeviceStateToHost(*e->device_copy, *host_copy)
                             : Result<CopyJob>(gathered.status());
  if (!state.ok()) {
    Log(TIER_LOG_WARN, "host: demoting " + KeyHex(e->key) + ": " + state.status().ToString());
    if (gathered.ok()) gathered.value().Wait().IgnoreError();
    Drop(e, "device", IoPhase::kPressure);
    return;
  }
  WriteManifests(*e, host_copy.get());
  Demotion d;
  d.key = e->key;
  d.host_copy = std::move(host_copy);
  d.copy = std::move(gathered).value();
  for (const device::Transfer& t : state.value().transfers()) d.copy.Add(t);
  ++e->ops;
  demoting_bytes_ += e->logical_bytes;
  demotions_.push_back(std::move(d));
}

void Host::Impl::CheckDemotions() {
  std::vector<Demotion> pending;
  for (Demotion& d : demotions_) {
    if (!d.copy.Done()) {
      pending.push_back(std::move(d));
      continue;
    }
    const Status copied = d.copy.Wait();
    CheckpointEntry* e = catalog_.Find(d.key);
    TIER_CHECK(e != nullptr && e->ops > 0 && e->in(kDevice));
    --e->ops;
    TIER_CHECK(demoting_bytes_ >= e->logical_bytes);
    demoting_bytes_ -= e->logical_bytes;
    if (!copied.ok()) {
      Log(TIER_LOG_WARN, "host: device-to-host copy of " + KeyHex(d.key) +
                             " failed: " + copied.ToString() + " (Device copy kept)");
    } else if (!HeldPagesIntact(e, *d.host_copy, "its demotion")) {
      // Not placed in Host: the bytes are not what was sealed; it leaves once idle.
    } else {
      e->host_copy = std::move(d.host_copy);
      catalog_.AddPlacement(e, kHost);
      server_metrics_->Transition("device", "host");
      // A Device hit taken while the copy ran shares these pages (and reads the state buffers)
      // with a live request: they stay the server's until its Release. Pressure drops this Device
      // copy once the entry is idle again (it has a Host copy now).
      if (e->pins == 0) DropDevice(e, nullptr);
    }
    DropIfDoomed(e);
  }
  demotions_ = std::move(pending);
}

Host::Impl::ColdAdmission Host::Impl::ColdAdmissionFor(const CheckpointEntry& e) const {
  if (policy_.policy() != Policy::kValue || !policy_.levers().cold_admission) {
    return ColdAdmission::kAdmitted;
  }
  // Superseded, where superseded checkpoints have rarely come back so far.
  if (policy_.Superseded(e) && policy_.SupersededWeight() < 0.1) {
    return ColdAdmission::kSuperseded;
  }
  if (RestoreNsFrom(e, kCold) >= e.prefill_saved_ns) return ColdAdmission::kNotWorthRestore;
  return ColdAdmission::kAdmitted;
}

void Host::Impl::RebalanceHost() {
  const uint64_t capacity = options_.host_capacity_bytes;
  auto over = [&] { return catalog_.logical_bytes_in(kHost) > capacity + releasing_bytes_; };
  if (!over()) return;
  const uint64_t now = Now();
  for (const tier_key& key : VictimsIn(kHost)) {
    if (!over()) break;
    CheckpointEntry* e = catalog_.Find(key);
    policy_.OnLeave(*e);
    if (e->in(kDevice) || e->in(kCold)) {
      DropHost(e, "evicted");  // another copy remains
      continue;
    }
    const bool may_spill = cold_ != nullptr && cold_capacity_bytes_ > 0 &&
                           now >= spill_backoff_until_ns_ &&
                           (!e->spill_failed || now >= e->spill_retry_after_ns);
    const ColdAdmission admission = may_spill ? ColdAdmissionFor(*e) : ColdAdmission::kAdmitted;
    if (admission != ColdAdmission::kAdmitted) {
      // Not written: unlikely to come back (its conversation moved on), or its restore would
      // cost its prefill. Saves the NVMe the write.
      if (admission == ColdAdmission::kSuperseded) {
        ++stats_.cold_admission_superseded;
      } else {
        ++stats_.cold_admission_not_worth;
      }
      Drop(e, "host", IoPhase::kPressure);
      continue;
    }
    const uint64_t need = ColdBytesNeeded(*e);
    if (may_spill && need <= cold_capacity_bytes_ && MakeRoomOnCold(need, ValueIn(*e, kCold))) {
      StartSpill(e);
      continue;
    }
    // Nothing can take it (no cold tier, no room worth making, or spills backing off after
    // failures): the least valuable goes, by value, not by retrying.
    if (e->spill_failed) server_metrics_->SpillFailure("dropped");
    Drop(e, "host", IoPhase::kPressure);
  }
}

bool Host::Impl::MakeRoomOnCold(uint64_t stored_bytes, double below_value) {
  // `stored_bytes` more, next to what is stored and what spills in flight reserved.
  if (cold_ == nullptr || cold_capacity_bytes_ == 0) return false;
  uint64_t used = spill_reserved_bytes_;  // what spills in flight may take
  for (CheckpointEntry* e : catalog_.Entries()) {
    if (e->in(kCold) && !e->remote) used += e->cold_stored_bytes;
  }
  const uint64_t need = stored_bytes;
  if (used + need <= cold_capacity_bytes_) return true;
  for (const tier_key& key : VictimsIn(kCold, below_value)) {
    if (used + need <= cold_capacity_bytes_) break;
    CheckpointEntry* victim = catalog_.Find(key);
    used -= std::min(used, victim->cold_stored_bytes);
    policy_.OnLeave(*victim);
    if (victim->placements == kCold) {
      Drop(victim, "cold", IoPhase::kPressure);
    } else {
      DropCold(victim, IoPhase::kPressure);
    }
  }
  return used + need <= cold_capacity_bytes_;
}

bool Host::Impl::FreeHostMemoryFor(const CheckpointEntry& wanted) {
  // Under way: each ends in a Poll() that retries the waiting restores (a spill frees its copy,
  // the others change what pressure may spill next).
  if (spills_in_flight_ > 0 || !seals_.empty() || !demotions_.empty()) return true;
  for (const auto& [id, op] : ops_) {
    if (op->stage == Stage::kRestore) return true;
  }
  // A Host copy that a ready admission uses frees when the server releases it: the restore waits
  // for it, bounded by its admission deadline. (Not one that pending admissions pin: they may be
  // waiting themselves.)
  for (const auto& [id, key] : used_) {
    const CheckpointEntry* e = catalog_.Find(key);
    if (e != nullptr && e != &wanted && e->host_copy != nullptr) return true;
  }
  // The arena is full of Host copies the logical Host budget lets stay: spill one, so that its
  // memory frees when the provider has it.
  const uint64_t now = Now();
  if (cold_ == nullptr || cold_capacity_bytes_ == 0 || now < spill_backoff_until_ns_) return false;
  for (const tier_key& key : VictimsIn(kHost)) {
    CheckpointEntry* e = catalog_.Find(key);
    if (e == &wanted || e->in(kCold) || e->in(kDevice)) continue;
    if (e->spill_failed && now < e->spill_retry_after_ns) continue;
    if (ColdAdmissionFor(*e) != ColdAdmission::kAdmitted) continue;
    const uint64_t need = ColdBytesNeeded(*e);
    if (need > cold_capacity_bytes_ || !MakeRoomOnCold(need, ValueIn(*e, kCold))) continue;
    policy_.OnLeave(*e);
    StartSpill(e);
    return true;
  }
  return false;
}

void Host::Impl::StartSpill(CheckpointEntry* e) {
  const uint64_t need = ColdBytesNeeded(*e);
  std::shared_ptr<HostCopy> copy = e->host_copy;
  std::vector<tier_segment> segments;
  for (size_t i = 0; i < e->segments.size(); ++i) {
    const SegmentSpec& s = e->segments[i];
    segments.push_back({s.kind, s.index, s.physical_bytes, copy->segment(i).data()});
  }
  ++e->ops;
  ++spills_in_flight_;
  releasing_bytes_ += e->logical_bytes;
  spill_reserved_bytes_ += need;
  const tier_key key = e->key;
  cold_->Spill(
      key, std::move(segments), IoPhase::kPressure,
      [this, key, need](Answer<Completion> answer) { OnSpilled(key, need, std::move(answer)); },
      [copy] {});  // the Host copy outlives a late completion
}

void Host::Impl::OnSpilled(tier_key key, uint64_t need, Answer<Completion> answer) {
  CheckpointEntry* e = catalog_.Find(key);
  TIER_CHECK(e != nullptr && e->ops > 0 && e->in(kHost));
  --e->ops;
  --spills_in_flight_;
  releasing_bytes_ -= e->logical_bytes;
  spill_reserved_bytes_ -= need;
  const Completion& done = answer.result.value();
  // On a shared tier, ALREADY_EXISTS means another server stored this key (the same identity)
  // first: the fleet has it in Cold, as this server would have. Verified like any remote
  // checkpoint at its first restore (its manifest), so the Host copy can go.
  const bool stored_by_peer =
      shared_tier_ && !answer.timed_out && done.status.code() == TIER_ALREADY_EXISTS;
  if (stored_by_peer) {
    ++stats_.spills_already_stored;
    e->verified_manifest = false;
    e->cold_stored_bytes = need;
    e->spill_failed = false;
    catalog_.AddPlacement(e, kCold);
    server_metrics_->Transition("host", "cold");
    DropHost(e, nullptr);
  } else if (answer.timed_out || !done.status.ok()) {
    SpillFailed(e, done.status, answer.timed_out);
  } else {
    ++stats_.spills;
    stats_.spilled_logical_bytes += e->logical_bytes;
    stats_.spilled_stored_bytes += done.stored_bytes;
    stats_.cold_write_bytes += done.stored_bytes;
    stats_.cold_write_logical_bytes += e->logical_bytes;
    if (e->has_parent) {
      const CheckpointEntry* parent = catalog_.Find(e->parent_key);
      if (parent != nullptr && parent->in(kCold)) {
        stats_.cold_write_parent_kv_logical_bytes += KvLogicalBytes(*parent);
      }
    }
    e->cold_stored_bytes = done.stored_bytes;
    e->spill_failed = false;
    spill_backoff_ns_ = 0;
    catalog_.AddPlacement(e, kCold);
    server_metrics_->Transition("host", "cold");
    DropHost(e, nullptr);  // released only now that the provider has all of it
  }
  DropIfDoomed(e);
}

void Host::Impl::SpillFailed(CheckpointEntry* e, const Status& status, bool timed_out) {
  ++stats_.spill_failures;
  server_metrics_->SpillFailure("kept_host");
  const uint64_t now = Now();
  e->spill_failed = true;
  spill_backoff_ns_ =
      spill_backoff_ns_ == 0 ? kFirstBackoffNs : std::min(kMaxBackoffNs, spill_backoff_ns_ * 2);
  spill_backoff_until_ns_ = now + spill_backoff_ns_;
  e->spill_retry_after_ns = now + kMaxBackoffNs;
  // One line now and then, not two per failure (a full disk fails every spill).
  const std::string why = timed_out ? "timed out" : status.ToString();
  if (now >= spill_failures_logged_at_ns_ + kFailureLogIntervalNs) {
    Log(TIER_LOG_WARN,
        "host: spill of " + KeyHex(e->key) + " failed: " + why +
            " (Host copy kept; spills back off " + std::to_string(spill_backoff_ns_ / kSecondNs) +
            " s)" +
            (spill_failures_unlogged_ > 0 ? "; " + std::to_string(spill_failures_unlogged_) +
                                                " more failed since the last report"
                                          : std::string()));
    spill_failures_logged_at_ns_ = now;
    spill_failures_unlogged_ = 0;
  } else {
    ++spill_failures_unlogged_;
  }
}

uint64_t Host::Impl::KvLogicalBytes(const CheckpointEntry& e) const {
  uint64_t kv = 0;
  for (uint32_t i = 0; i < e.kv_segments && i < e.segments.size(); ++i) {
    kv += e.segments[i].physical_bytes;
  }
  return LogicalOf(kv);
}

void Host::Impl::DropDevice(CheckpointEntry* e, const char* to) {
  if (!e->in(kDevice)) return;
  TIER_CHECK_MSG(e->pins == 0, "host: dropping the Device pages of %s while %u request(s) use it",
                 KeyHex(e->key).c_str(), e->pins);
  const std::vector<uint32_t> pages = e->device_copy->pages;
  // A device hit's state copy may still read the state buffers (a server that released before
  // waiting on state_copy): they are freed once no such copy runs.
  if (!lane_copies_.empty()) retired_device_copies_.push_back(std::move(e->device_copy));
  catalog_.RemovePlacement(e, kDevice);  // frees its device state buffers
  ReleasePages(pages);
  if (to != nullptr) server_metrics_->Transition("device", to);
}

void Host::Impl::DropHost(CheckpointEntry* e, const char* to) {
  if (!e->in(kHost)) return;
  if (e->prefetched) {
    e->prefetched = false;
    ++stats_.prefetches_wasted;
    server_metrics_->Prefetch("wasted");
  }
  catalog_.RemovePlacement(e, kHost);
  if (to != nullptr) server_metrics_->Transition("host", to);
}

void Host::Impl::DropCold(CheckpointEntry* e, IoPhase phase) {
  if (!e->in(kCold)) return;
  catalog_.RemovePlacement(e, kCold);
  server_metrics_->Transition("cold", "evicted");
  if (cold_ == nullptr) return;
  const tier_key key = e->key;
  cold_->Remove(key, phase, [key](Answer<bool> answer) {
    if (answer.timed_out || !answer.result.ok()) {
      Log(TIER_LOG_WARN,
          "host: cold remove of " + KeyHex(key) + " failed: " +
              (answer.timed_out ? std::string("timed out") : answer.result.status().ToString()));
    }
  });
}

void Host::Impl::Drop(CheckpointEntry* e, const char* from, IoPhase phase) {
  TIER_CHECK(e->idle());
  Log(TIER_LOG_DEBUG, std::string("host: dropping ") + KeyHex(e->key) + " from " + from + " (" +
                          IoPhaseName(phase) + ")");
  DropDevice(e, nullptr);
  DropHost(e, nullptr);
  if (e->in(kCold)) {
    catalog_.RemovePlacement(e, kCold);
    if (cold_ != nullptr && !e->remote) {
      const tier_key key = e->key;
      cold_->Remove(key, phase, [key](Answer<bool> answer) {
        if (answer.timed_out || !answer.result.ok()) {
          Log(TIER_LOG_WARN, "host: cold remove of " + KeyHex(key) + " failed");
        }
      });
    }
  }
  server_metrics_->Transition(from, "evicted");
  policy_.OnLeave(*e);
  ++stats_.evictions;
  catalog_.Erase(e);
}

void Host::Impl::DropIfDoomed(CheckpointEntry* e) {
  if (e == nullptr || !e->doomed || !e->idle()) return;
  const char* from = e->in(kDevice) ? "device" : e->in(kHost) ? "host" : "cold";
  if (e->placements == 0) {
    catalog_.Erase(e);  // nothing left to remove: it only leaves the catalog
    return;
  }
  Drop(e, from, IoPhase::kEviction);
}

}  // namespace tier
