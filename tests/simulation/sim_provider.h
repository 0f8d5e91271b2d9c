// sim_provider.h -- the simulation's cold tier: an in-process provider (the C ABI of
// tier_provider.h, reached through libtier_sim_bridge.so) whose store survives close and reopen
// (a persistent tier) and whose every answer is scripted by the run:
//   - a spill or restore is refused at submit (BUSY, NO_SPACE, IO_ERROR), completes inside the
//     call, or is held until the run delivers it (a delay of any number of steps), on the test's
//     thread or on a thread of its own (a completion on a foreign thread);
//   - a held one completes OK or with IO_ERROR / NO_SPACE (spills) / DATA_LOSS (restores, which
//     then drop the stored copy, as a checksumming provider does);
//   - with `never` on, some are accepted and never completed until the run's end (the Host must
//     meet its deadline instead).
// What a call does is decided from the run's seed, the key and how many times that key was asked
// (not from a shared generator), so the Host's call threads cannot change a run's choices.
// Bytes are copied when the operation completes, not when it is submitted: a Host that let go of a
// buffer before the provider finished would be caught (under ASan, at once).
#pragma once

#include <tier_provider.h>

#include "stored_checkpoint.h"

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tier::simulation {

// What the tier holds: kept by the run across the Host's close and reopen.
struct ColdStore {
  using Stored = test::StoredCheckpoint;
  std::map<tier_key, Stored, test::KeyLess> entries;
  uint64_t used_bytes = 0;
};

struct ProviderScript {
  uint64_t seed = 0;
  uint32_t refuse_percent = 5;   // refused at submit
  uint32_t inline_percent = 45;  // completed inside the call
  uint32_t fail_percent = 15;    // of completions: an error status
  uint32_t never_percent = 0;    // accepted and never completed (needs a short deadline)
  uint64_t capacity_bytes = 1ull << 30;
};

class SimProvider {
 public:
  SimProvider(ColdStore* store, ProviderScript script) : store_(store), script_(script) {}
  ~SimProvider();

  // The option that attaches an instance opened through the bridge to this object.
  std::pair<std::string, std::string> Option() const;
  static const tier_provider* Table();

  // Held completions (never ones excluded), oldest first.
  size_t held() const;
  // Completes held operation `index` with its scripted status; on its own thread when `foreign`
  // (joined before this returns). Scheduler thread.
  void Deliver(size_t index, bool foreign);
  // Completes everything held or never-completed (the run's end, a close): on a foreign thread.
  void DeliverAll();
  // Accepted operations whose completion has not run, never ones included.
  size_t accepted() const;
  // Calls of the provider running right now (on the Host's threads), not counting blocked ones.
  size_t executing() const;
  // While armed, every spill, restore and remove (the Host's serial call lane) and every
  // plan_restore and stat (its parallel lane) waits at entry until the run lets it in, one at a
  // time: the Host's two call threads then answer in an order the run decides, not the
  // scheduler of the machine. Disarmed, calls run at once and complete inside the call (Open,
  // Close: nobody would deliver a held completion).
  enum class Lane { kSerial = 0, kParallel = 1, kNone = 2 };
  void Arm(bool armed);
  size_t blocked(Lane lane) const;
  bool ReleaseOne(Lane lane);
  bool opened() const;

  // ---- the ABI, called through Table() -----------------------------------------------------
  struct Pending {
    bool restore = false;
    tier_key key{};
    std::vector<tier_segment> segments;
    tier_done_fn done = nullptr;
    void* user = nullptr;
    tier_status result = TIER_OK;
    bool never = false;
  };
  tier_status Spill(const tier_key* key, const tier_segment* segments, uint32_t count,
                    tier_done_fn done, void* user, tier_error* error);
  tier_status Restore(const tier_key* key, const tier_segment* segments, uint32_t count,
                      tier_done_fn done, void* user, tier_error* error);
  tier_status Remove(const tier_key* key, tier_error* error);
  tier_status Stat(const tier_key* key, tier_stat_result* out, tier_segment_info* segments,
                   uint32_t capacity, tier_error* error);
  tier_status Stats(tier_stats* out);
  tier_status Enumerate(tier_enumerate_fn fn, void* user);
  tier_status Plan(const tier_key* key, uint64_t prefill_ns, tier_plan* out);
  void MarkOpen(bool open);
  void Enter(Lane lane);
  void Leave();

 private:
  // The scripted fate of the next call of `kind` on `key`: a number in [0, 2^32). mu_ held.
  uint32_t Fate(const tier_key& key, uint32_t kind);
  tier_status Submit(bool restore, const tier_key* key, const tier_segment* segments,
                     uint32_t count, tier_done_fn done, void* user, tier_error* error);
  // Runs the completion: copies the bytes, calls done. Without mu_ held.
  void Complete(Pending p);

  ColdStore* store_;
  ProviderScript script_;
  mutable std::mutex mu_;
  std::vector<Pending> held_;              // guarded by mu_
  std::vector<Pending> never_;             // guarded by mu_
  size_t executing_ = 0;                   // guarded by mu_
  std::map<std::string, uint32_t> asked_;  // key bytes + kind -> calls so far; guarded by mu_
  bool open_ = false;                      // guarded by mu_
  bool armed_ = false;                     // guarded by mu_
  bool holding_ = false;                   // completions may be held; guarded by mu_
  size_t blocked_[2] = {0, 0};             // calls waiting at entry, per lane; guarded by mu_
  size_t turns_[2] = {0, 0};               // entries granted, not yet taken; guarded by mu_
  std::condition_variable turn_cv_;
};

}  // namespace tier::simulation
