// planner.h -- the Device -> Host -> Cold planner over the one catalog.
//
// Pressure walks one value order across all tiers (prefill time a checkpoint saves per logical
// byte, aged by recency) and degrades monotonically: a Device copy is demoted to Host, a Host-only
// checkpoint is spilled to Cold, a Cold checkpoint is removed. A Host copy is released only after
// the provider reports its spill complete; a failed spill keeps the Host copy; nothing pinned (in
// use by a request or an operation) is ever dropped. Admission finds the longest exact-prefix
// checkpoint: Device is ready, Host needs a transfer, Cold asks the provider's plan_restore and
// either restores (Cold -> Host -> Device, bytes verified) or prefills from the root. Provider I/O
// happens only here, at admission and under pressure. Single-threaded: one planner thread.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "catalog.h"
#include "cold_tier.h"
#include <tier/host/cost_model.h>
#include "device_tier.h"
#include "server_metrics.h"

namespace tier::device {
class HostArena;
}

namespace tier {

struct PlannerConfig {
  std::string namespace_id;                     // the model/layout fingerprint keys are made in
  uint64_t device_capacity_bytes = 8ull << 30;  // logical bytes of parked checkpoints on Device
  uint64_t host_capacity_bytes = 16ull << 30;   // logical bytes in pinned Host memory
  uint64_t bytes_scale = 1;                     // physical bytes = logical / bytes_scale
  double recency_half_life_s = 300;             // value halves after this much idle virtual time
};

struct AdmissionResult {
  Outcome outcome = Outcome::kRootPrefill;
  RootReason root_reason = RootReason::kNoCheckpoint;  // meaningful for kRootPrefill
  CheckpointEntry* entry = nullptr;  // pinned when set: Release() it when the request ends
  uint64_t cached_tokens = 0;        // tokens the reused checkpoint covers
  uint64_t admission_ns = 0;         // virtual time spent moving state before the prefill
};

// Totals for the replay report. Logical bytes are model-sized; stored bytes are what the
// provider actually wrote or read (scaled by bytes_scale, after compression).
struct PlannerTotals {
  uint64_t spilled_logical_bytes = 0;
  uint64_t spilled_stored_bytes = 0;
  uint64_t restored_logical_bytes = 0;
  uint64_t restored_stored_bytes = 0;
  uint64_t peak_cold_logical_bytes = 0;
  uint64_t peak_cold_stored_bytes = 0;
  uint64_t spills = 0;
  uint64_t spill_failures = 0;
  uint64_t evictions = 0;            // checkpoints dropped from the catalog
  uint64_t verified_restores = 0;    // restores whose bytes were compared
  uint64_t mismatched_restores = 0;  // ... and differed (must stay 0)
  uint64_t readopted = 0;            // cold checkpoints adopted at start
  uint64_t readopted_hits = 0;       // cold restores of re-adopted checkpoints
};

class Planner {
 public:
  // `device` and `metrics` are required; `cold` is null when there is no cold tier. All borrowed.
  Planner(PlannerConfig config, const CostModel& cost, DeviceTier* device, ColdTier* cold,
          ServerMetrics* metrics);
  ~Planner();

  // Learns the cold tier's capacity and re-adopts the checkpoints it still holds (a restart).
  Status Start();

  // Finds and materializes on Device the longest checkpoint that is an exact prefix of `blocks`.
  AdmissionResult Admit(std::span<const uint64_t> blocks, uint64_t now_ns);
  // Unpins what an admission returned.
  void Release(CheckpointEntry* entry);
  // Publishes the checkpoint of blocks[0..k) at `tokens` on Device (making room first). Returns
  // the entry (an existing one is only touched), or nullptr when nothing could make room.
  CheckpointEntry* Seal(std::span<const uint64_t> blocks, uint64_t tokens, bool shared_prefix,
                        uint64_t now_ns);

  // Removes a checkpoint from every tier (a closed session, an invalidated model). False when it
  // is absent or pinned by an operation in progress.
  bool Evict(const tier_key& key);

  double Value(const CheckpointEntry& entry, uint64_t now_ns) const;
  const Catalog& catalog() const { return catalog_; }
  const PlannerTotals& totals() const { return totals_; }
  const PlannerConfig& config() const { return config_; }
  uint64_t cold_capacity_bytes() const { return cold_capacity_bytes_; }

  // Test seam: runs between a cold restore's plan and its execution.
  std::function<void(CheckpointEntry*)> after_plan_hook;

 private:
  std::vector<SegmentSpec> Layout(uint64_t tokens, size_t manifest_bytes) const;
  // Host memory for a checkpoint's segments (nullptr when the arena is exhausted).
  std::unique_ptr<HostCopy> NewHostCopy(const CheckpointEntry& entry);
  // A Host copy holding the checkpoint's bytes (derived from its key; the manifest verbatim).
  std::unique_ptr<HostCopy> FreshBytes(const CheckpointEntry& entry);
  std::vector<tier_segment> Segments(const CheckpointEntry& entry, HostCopy& copy) const;
  bool Verify(const CheckpointEntry& entry, const HostCopy& copy);

  // Each returns whether `logical_bytes` more now fit; virtual time spent is added to *ns.
  bool MakeRoomOnDevice(uint64_t logical_bytes, uint64_t now_ns, uint64_t* ns);
  bool MakeRoomOnHost(uint64_t logical_bytes, uint64_t now_ns);
  bool MakeRoomOnCold(uint64_t stored_bytes, double below_value, uint64_t now_ns);
  // Demotes a Device copy to Host (copying it there first when it is the only copy).
  bool DemoteFromDevice(CheckpointEntry* entry, uint64_t now_ns, uint64_t* ns);
  // Copies `source` to Device for the admitted request and verifies it; keeps it parked on Device
  // (a Device placement) when there is room. False only when the copy fails.
  bool LoadIntoLane(CheckpointEntry* entry, const HostCopy& source, uint64_t now_ns, uint64_t* ns);
  void RemovePlacement(CheckpointEntry* entry, Placement placement, const char* to);
  void Drop(CheckpointEntry* entry, const char* from);
  void ForgetCold(CheckpointEntry* entry);
  AdmissionResult TryColdRestore(CheckpointEntry* entry, uint64_t now_ns, RootReason* skip);
  void UpdateGauges();
  // Keys of unpinned entries placed in `placement`, least valuable first (keys, not pointers:
  // the walk may drop entries).
  std::vector<tier_key> VictimsIn(Placement placement, uint64_t now_ns,
                                  double below_value = -1) const;

  PlannerConfig config_;
  CostModel cost_;
  DeviceTier* device_;
  ColdTier* cold_;
  ServerMetrics* metrics_;
  std::unique_ptr<device::HostArena> arena_;  // the Host tier's (pinned) memory
  Catalog catalog_;
  PlannerTotals totals_;
  uint64_t cold_capacity_bytes_ = 0;  // stored bytes the provider accepts (0 = no cold tier)
};

}  // namespace tier
