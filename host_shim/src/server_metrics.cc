#include "server_metrics.h"

#include <string_view>
#include <utility>

namespace tier {

const char* RootReasonName(RootReason reason) {
  switch (reason) {
    case RootReason::kNoCheckpoint:
      return "no_checkpoint";
    case RootReason::kMiss:
      return "miss";
    case RootReason::kCost:
      return "cost";
    case RootReason::kCorrupt:
      return "corrupt";
    case RootReason::kBusy:
      return "busy";
    case RootReason::kNoRoom:
      return "no_room";
    case RootReason::kStalePlan:
      return "stale_plan";
    case RootReason::kRestoreFailed:
      return "restore_failed";
    case RootReason::kTimeout:
      return "timeout";
  }
  return "unknown";
}

const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kDeviceHit:
      return "device_hit";
    case Outcome::kHostRestore:
      return "host_restore";
    case Outcome::kColdRestore:
      return "cold_restore";
    case Outcome::kRootPrefill:
      return "root_prefill";
  }
  return "unknown";
}

namespace {
// The (from, to) pairs of tier_transitions_total: what the Host does (pressure.cc, admission.cc).
constexpr std::pair<const char*, const char*> kTransitionPairs[] = {
    {"none", "device"},    {"none", "host"},    {"device", "host"},
    {"host", "device"},    {"host", "cold"},    {"cold", "host"},
    {"device", "evicted"}, {"host", "evicted"}, {"cold", "evicted"},
};
}  // namespace

ServerMetrics::ServerMetrics(MetricsRegistry* registry) : registry_(registry) {
  MetricFamily* admissions = registry->Counter(
      "tier_admissions_total", "Requests admitted, by where their state came from.", {"outcome"});
  for (int i = 0; i < kOutcomeCount; ++i) {
    admissions_[i] = registry->Series(admissions, {OutcomeName(static_cast<Outcome>(i))});
  }
  MetricFamily* roots =
      registry->Counter("tier_root_prefills_total",
                        "Admissions that prefilled from the root, by reason.", {"reason"});
  for (int i = 0; i < kRootReasonCount; ++i) {
    root_prefills_[i] = registry->Series(roots, {RootReasonName(static_cast<RootReason>(i))});
  }
  transitions_ = registry->Counter(
      "tier_transitions_total",
      "Checkpoint placements created or dropped, by source and destination tier (none = newly "
      "sealed; evicted = the copy in `from` was dropped, and the checkpoint left the catalog if it "
      "was its last copy).",
      {"from", "to"});
  // Every pair the Host can produce exists from the start (at zero), so rate() and the
  // dashboards see a series before the first transition of each kind.
  for (const auto& [from, to] : kTransitionPairs) registry->Series(transitions_, {from, to});
  spill_failures_ = registry->Counter(
      "tier_spill_failures_total",
      "Host-to-cold spills that failed, by what the Host did (kept_host or dropped).", {"action"});
  for (const char* action : {"kept_host", "dropped"}) registry->Series(spill_failures_, {action});
  close_flush_ = registry->Counter(
      "tier_close_flush_total",
      "Host copies close wrote to a persistent cold tier (written), whose write failed or did "
      "not finish by close_timeout_ns (failed), or that it never started (left: past the "
      "deadline, no room in Cold, or after repeated failures).",
      {"result"});
  for (const char* result : {"written", "failed", "left"}) registry->Series(close_flush_, {result});
  MetricFamily* verified = registry->Counter(
      "tier_restore_verifications_total",
      "Restored checkpoints whose bytes were verified, by result (exact or mismatch).", {"result"});
  restores_verified_[0] = registry->Series(verified, {"mismatch"});
  restores_verified_[1] = registry->Series(verified, {"exact"});
  readopted_ = registry->Series(registry->Counter(
      "tier_readopted_checkpoints_total",
      "Cold checkpoints re-adopted into the catalog at start (survivors of a restart)."));
  MetricFamily* prefetches =
      registry->Counter("tier_prefetches_total",
                        "Prefetch hints that started a Cold -> Host restore (issued), whose "
                        "checkpoint a request then "
                        "found in Host (used), or that left Host unused (wasted).",
                        {"result"});
  const char* const kPrefetchResults[] = {"issued", "used", "wasted"};
  for (int i = 0; i < 3; ++i) prefetches_[i] = registry->Series(prefetches, {kPrefetchResults[i]});
  prefetch_hidden_ = registry->Series(
      registry->Counter("tier_prefetch_hidden_seconds_total",
                        "Cold restore time that prefetches took off the requests that used them."));
  MetricFamily* entries = registry->Gauge("tier_catalog_entries",
                                          "Checkpoints with a placement in each tier.", {"tier"});
  MetricFamily* bytes = registry->Gauge(
      "tier_catalog_bytes", "Logical bytes of the checkpoints placed in each tier.", {"tier"});
  for (Placement p : {kDevice, kHost, kCold}) {
    const int slot = p == kDevice ? 0 : p == kHost ? 1 : 2;
    entries_[slot] = registry->Series(entries, {PlacementName(p)});
    bytes_[slot] = registry->Series(bytes, {PlacementName(p)});
  }
  cold_capacity_ = registry->Series(registry->Gauge(
      "tier_catalog_cold_capacity_bytes",
      "Logical byte budget of the cold tier as the Host sees it (0 = no cold tier)."));
  device_path_ = registry->Gauge(
      "tier_device_path", "Transfer path in use for the Device tier (1 = active).", {"path"});
}

void ServerMetrics::Admission(Outcome outcome) {
  admissions_[static_cast<int>(outcome)]->Add(1);
}

void ServerMetrics::RootPrefill(RootReason reason) {
  root_prefills_[static_cast<int>(reason)]->Add(1);
}

void ServerMetrics::Transition(const char* from, const char* to) {
  registry_->Series(transitions_, {from, to})->Add(1);
}

void ServerMetrics::SpillFailure(const char* action) {
  registry_->Series(spill_failures_, {action})->Add(1);
}

void ServerMetrics::CloseFlush(const char* result, uint64_t checkpoints) {
  registry_->Series(close_flush_, {result})->Add(static_cast<double>(checkpoints));
}

void ServerMetrics::RestoreVerification(bool exact) {
  restores_verified_[exact ? 1 : 0]->Add(1);
}

void ServerMetrics::Readopted(uint64_t entries) {
  readopted_->Add(static_cast<double>(entries));
}

void ServerMetrics::Prefetch(const char* result) {
  const int slot = std::string_view(result) == "issued" ? 0
                   : std::string_view(result) == "used" ? 1
                                                        : 2;
  prefetches_[slot]->Add(1);
}

void ServerMetrics::PrefetchHiddenSeconds(double seconds) {
  prefetch_hidden_->Add(seconds);
}

void ServerMetrics::SetCatalog(const Catalog& catalog, uint64_t cold_capacity_bytes) {
  for (Placement p : {kDevice, kHost, kCold}) {
    const int slot = p == kDevice ? 0 : p == kHost ? 1 : 2;
    entries_[slot]->Set(static_cast<double>(catalog.entries_in(p)));
    bytes_[slot]->Set(static_cast<double>(catalog.logical_bytes_in(p)));
  }
  cold_capacity_->Set(static_cast<double>(cold_capacity_bytes));
}

void ServerMetrics::SetDevicePath(const std::string& path) {
  for (const char* candidate : {"cuda", "cpu"}) {
    registry_->Series(device_path_, {candidate})->Set(path == candidate ? 1 : 0);
  }
}

}  // namespace tier
