// cold_tier.h -- the planner's view of the cold tier: a provider instance whose every call is
// tagged with why it happens. Provider I/O is allowed only at admission, under pressure and at
// start (re-adoption); a call made in any other phase is counted as a violation, so a test can
// prove that nothing reads from the cold tier while a request decodes.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <span>
#include <vector>

#include <tier/host/provider_instance.h>

namespace tier {

enum class IoPhase { kIdle, kAdmission, kPressure, kStartup };
const char* IoPhaseName(IoPhase phase);

// An asynchronous spill: `result` becomes ready when the provider's completion runs.
struct PendingSpill {
  std::future<Completion> result;
};

// Single-threaded (the planner's thread); the provider's completions only fulfil promises.
class ColdTier {
 public:
  explicit ColdTier(ProviderInstance* instance) : instance_(instance) {}

  // Sets the phase for the calls made while the scope lives (scopes nest).
  class PhaseScope {
   public:
    PhaseScope(ColdTier* tier, IoPhase phase);
    ~PhaseScope();
    PhaseScope(const PhaseScope&) = delete;
    PhaseScope& operator=(const PhaseScope&) = delete;

   private:
    ColdTier* tier_;
    IoPhase saved_;
  };

  Result<tier_plan> PlanRestore(const tier_key& key, uint64_t predicted_prefill_ns);
  // Submits a spill; the segment buffers must stay alive until the result is ready.
  Result<std::unique_ptr<PendingSpill>> Spill(const tier_key& key,
                                              std::span<const tier_segment> segments);
  Completion RestoreAndWait(const tier_key& key, std::span<const tier_segment> segments);
  Status Remove(const tier_key& key);
  Result<tier_stats> Stats();
  Status Enumerate(const std::function<bool(const tier_entry&)>& visit);

  ProviderInstance& instance() { return *instance_; }
  // Provider calls per phase; calls_in(kIdle) must stay 0.
  uint64_t calls_in(IoPhase phase) const { return calls_[static_cast<int>(phase)]; }

 private:
  void Count() { ++calls_[static_cast<int>(phase_)]; }
  ProviderInstance* instance_;
  IoPhase phase_ = IoPhase::kIdle;
  uint64_t calls_[4] = {0, 0, 0, 0};
};

}  // namespace tier
