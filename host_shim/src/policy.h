// policy.h -- the value order pressure walks across Device, Host and Cold (Policy in types.h).
//
// Lower value leaves first, in every tier, by one order:
//   kLru:   last use (seal, admission, a re-seal of the same checkpoint, a prefetch).
//   kGdsf:  greedy dual size frequency, H = L + uses x prefill cost / size, set when the
//           checkpoint is sealed (uses = 1), used (uses + 1) or sealed again (refreshed); L (the
//           inflation) rises to the H of each checkpoint that leaves a tier under pressure
//           (demoted, spilled, dropped).
//   kValue: root prefill saved per logical byte (net of the restore from the tier it is in),
//           times (1 + uses, or + the siblings a shared prefix seeded), aged by recency (divided
//           by 1 + idle / half-life, the half-life the mean reuse gap seen so far), and a small
//           fraction of that once superseded (ValueLevers in types.h say which parts are on).
// Scheduler thread (it is the Host's).
#pragma once

#include <tier/host/types.h>

#include <cstdint>

#include "catalog.h"

namespace tier {

class PolicyOrder {
 public:
  explicit PolicyOrder(Policy policy, ValueLevers levers = {}, double half_life_s = 300)
      : policy_(policy), levers_(levers), prior_half_life_s_(half_life_s) {}

  // The checkpoint's value now, in a tier from which bringing it back to a lane costs
  // `restore_ns` (0 on Device). Comparable across entries at one `now_ns`.
  double Value(const CheckpointEntry& entry, uint64_t now_ns, uint64_t restore_ns = 0) const;
  // kValue with the superseded lever: its one child extends it and it seeds no siblings.
  bool Superseded(const CheckpointEntry& entry) const;
  // Bookkeeping: a checkpoint was published (or adopted), an admission reused it, or it was
  // sealed again (same identity: only its use time and priority are refreshed).
  void OnInsert(CheckpointEntry* entry, uint64_t now_ns);
  void OnUse(CheckpointEntry* entry, uint64_t now_ns);
  void OnTouch(CheckpointEntry* entry, uint64_t now_ns);
  // A checkpoint left a tier under pressure (GDSF's inflation).
  void OnLeave(const CheckpointEntry& entry);
  // A checkpoint became superseded (its conversation moved on to a child).
  void OnSuperseded(const CheckpointEntry& entry);
  // What a superseded checkpoint keeps of its value: the reuse rate observed on superseded
  // checkpoints relative to that of the others (a workload whose conversations branch keeps
  // more), within [1e-3, 1].
  double SupersededWeight() const;
  Policy policy() const { return policy_; }
  const ValueLevers& levers() const { return levers_; }
  // The recency half-life kValue ages by now (the prior until a reuse was observed).
  double half_life_s() const;
  double inflation() const { return inflation_; }

 private:
  double GdsfPriority(const CheckpointEntry& entry) const;
  Policy policy_;
  ValueLevers levers_;
  double prior_half_life_s_;
  double inflation_ = 0;        // GDSF's L
  double reuse_gap_sum_s_ = 0;  // observed gaps between a checkpoint's last use and its reuse
  uint64_t reuse_gaps_ = 0;
  // Reuse rates: inserted checkpoints and their reuses while live; superseded ones and theirs.
  uint64_t inserted_ = 0, live_uses_ = 0;
  uint64_t superseded_ = 0, superseded_uses_ = 0;
};

}  // namespace tier
