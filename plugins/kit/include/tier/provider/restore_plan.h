// restore_plan.h -- the plan_restore decision (abi/tier_provider.h) as every provider makes it: a
// stored checkpoint is restored when its estimate is below the predicted prefill and the provider
// takes more operations; anything else skips to the root, saying why. Header-only; pure, any
// thread.
#pragma once

#include <cstdint>

#include "tier_provider.h"

namespace tier::provider {

struct RestorePlan {
  tier_decision decision = TIER_DECISION_SKIP_TO_ROOT;
  tier_reason reason = TIER_REASON_MISS;
  uint64_t estimated_restore_ns = 0;
  uint64_t stored_bytes = 0;
};

// A checkpoint the provider holds: RESTORE (CHEAPER) when `estimated_restore_ns` is below
// `predicted_prefill_ns`, else SKIP (COST); SKIP (BUSY) first when `busy` (max_inflight_ops in
// flight: the restore would be refused).
inline RestorePlan PlanStored(uint64_t stored_bytes, uint64_t estimated_restore_ns,
                              uint64_t predicted_prefill_ns, bool busy) {
  RestorePlan plan;
  plan.stored_bytes = stored_bytes;
  plan.estimated_restore_ns = estimated_restore_ns;
  if (busy) {
    plan.reason = TIER_REASON_BUSY;
  } else if (estimated_restore_ns < predicted_prefill_ns) {
    plan.decision = TIER_DECISION_RESTORE;
    plan.reason = TIER_REASON_CHEAPER;
  } else {
    plan.reason = TIER_REASON_COST;
  }
  return plan;
}

// Nothing to restore: SKIP with `reason` (MISS, CORRUPT, or BUSY when the store did not answer).
inline RestorePlan PlanSkip(tier_reason reason) {
  RestorePlan plan;
  plan.reason = reason;
  return plan;
}

// Writes `plan` into `out`, only the fields out->struct_size covers (reserved set to 0).
inline void WritePlan(const RestorePlan& plan, tier_plan* out) {
  if (TIER_HAS_FIELD(out, tier_plan, decision)) out->decision = plan.decision;
  if (TIER_HAS_FIELD(out, tier_plan, reason)) out->reason = plan.reason;
  if (TIER_HAS_FIELD(out, tier_plan, reserved)) out->reserved = 0;
  if (TIER_HAS_FIELD(out, tier_plan, estimated_restore_ns)) {
    out->estimated_restore_ns = plan.estimated_restore_ns;
  }
  if (TIER_HAS_FIELD(out, tier_plan, stored_bytes)) out->stored_bytes = plan.stored_bytes;
}

}  // namespace tier::provider
