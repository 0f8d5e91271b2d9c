#include "cold_tier.h"

namespace tier {

const char* IoPhaseName(IoPhase phase) {
  switch (phase) {
    case IoPhase::kIdle:
      return "idle";
    case IoPhase::kAdmission:
      return "admission";
    case IoPhase::kPressure:
      return "pressure";
    case IoPhase::kStartup:
      return "startup";
  }
  return "unknown";
}

ColdTier::PhaseScope::PhaseScope(ColdTier* tier, IoPhase phase) : tier_(tier) {
  if (tier_ == nullptr) return;
  saved_ = tier_->phase_;
  tier_->phase_ = phase;
}

ColdTier::PhaseScope::~PhaseScope() {
  if (tier_ != nullptr) tier_->phase_ = saved_;
}

Result<tier_plan> ColdTier::PlanRestore(const tier_key& key, uint64_t predicted_prefill_ns) {
  Count();
  return instance_->PlanRestore(key, predicted_prefill_ns);
}

Result<std::unique_ptr<PendingSpill>> ColdTier::Spill(const tier_key& key,
                                                      std::span<const tier_segment> segments) {
  Count();
  auto promise = std::make_shared<std::promise<Completion>>();
  auto pending = std::make_unique<PendingSpill>();
  pending->result = promise->get_future();
  Status accepted =
      instance_->Spill(key, segments, [promise](const Completion& c) { promise->set_value(c); });
  if (!accepted.ok()) return accepted;
  return pending;
}

Completion ColdTier::RestoreAndWait(const tier_key& key, std::span<const tier_segment> segments) {
  Count();
  return instance_->RestoreAndWait(key, segments);
}

Status ColdTier::Remove(const tier_key& key) {
  Count();
  return instance_->Remove(key);
}

Result<tier_stats> ColdTier::Stats() {
  Count();
  return instance_->Stats();
}

Status ColdTier::Enumerate(const std::function<bool(const tier_entry&)>& visit) {
  Count();
  return instance_->Enumerate(visit);
}

}  // namespace tier
