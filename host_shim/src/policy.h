// policy.h -- the value order pressure walks across Device, Host and Cold (Policy in host.h).
//
// Lower value leaves first. kValue: root-prefill time a checkpoint saves per logical byte, aged by
// recency (divided by 1 + idle_s / half_life_s). kLru: last use only. kGdsf: greedy dual size
// frequency, H = L + uses x prefill cost / size, where L (the inflation) rises to the H of each
// checkpoint that leaves a tier. Scheduler thread (it is the Host's).
#pragma once

#include <tier/host/host.h>

#include <cstdint>

#include "catalog.h"

namespace tier {

class PolicyOrder {
 public:
  explicit PolicyOrder(Policy policy, double half_life_s = 300)
      : policy_(policy), half_life_s_(half_life_s) {}

  // The checkpoint's value now. Comparable across entries at one `now_ns`.
  double Value(const CheckpointEntry& entry, uint64_t now_ns) const;
  // Bookkeeping for the frequency terms: a checkpoint was published, or an admission reused it.
  void OnInsert(CheckpointEntry* entry, uint64_t now_ns);
  void OnUse(CheckpointEntry* entry, uint64_t now_ns);
  // A checkpoint left a tier under pressure (GDSF's inflation).
  void OnLeave(const CheckpointEntry& entry);
  Policy policy() const { return policy_; }

 private:
  double GdsfPriority(const CheckpointEntry& entry) const;
  Policy policy_;
  double half_life_s_;
  double inflation_ = 0;  // GDSF's L
};

}  // namespace tier
