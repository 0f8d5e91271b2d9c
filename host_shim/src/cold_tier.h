// cold_tier.h -- the Host's asynchronous, deadline-bound view of one provider instance.
//
// Every call returns at once. The provider is called on CallThreads (or completes on its own
// threads); the answer reaches the scheduler thread through the EventQueue, and the caller's
// `done` runs there exactly once: with the provider's answer, or with `timed_out` when the
// deadline passed first. What a call borrowed (segment buffers) must stay alive until `settled`
// runs, which is when the provider has really finished -- after a timeout that may be much later,
// or never for a provider that hangs (then Close() abandons the instance instead of waiting).
//
// Every call is tagged with why it happens (IoPhase). Cold I/O belongs to admission, prefetch,
// pressure, eviction and start-up; a call in any other phase (kIdle) is counted as a violation, so
// a test can prove nothing reads the cold tier while requests decode.
#pragma once

#include <tier/host/provider_instance.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "call_threads.h"
#include "event_queue.h"
#include "segment_cipher.h"

namespace tier {

enum class IoPhase { kIdle, kAdmission, kPrefetch, kPressure, kEviction, kStartup };
constexpr int kIoPhaseCount = 6;
const char* IoPhaseName(IoPhase phase);

template <typename T>
struct Answer {
  Result<T> result;
  bool timed_out = false;  // the deadline passed before the provider answered
};

class ColdTier {
 public:
  struct Options {
    uint32_t threads = 2;                         // parallel call threads (plus one serial)
    uint64_t timeout_ns = 30ull * 1000000000ull;  // every call's deadline
    // Encryption at rest (HostOptions::encryption): when set, a spill hands the provider sealed
    // copies (SegmentCipher, on the call thread), a restore is read into the caller's buffers and
    // opened there on the provider's completion thread (a failed tag is DATA_LOSS), and
    // stat/enumerate report the plaintext lengths and the opened manifest. Callers see plaintext.
    std::shared_ptr<const SegmentCipher> cipher;
  };
  template <typename T>
  using Done = std::function<void(Answer<T>)>;

  // Takes the opened instance. `queue` must outlive this object. Owner's (scheduler) thread.
  ColdTier(std::unique_ptr<ProviderInstance> instance, EventQueue* queue, Options options);
  // Closes the instance; requires unsettled() == 0 (else call Abandon() and leak this object).
  ~ColdTier();
  ColdTier(const ColdTier&) = delete;
  ColdTier& operator=(const ColdTier&) = delete;

  // Asynchronous calls. Scheduler thread; `done` and `settled` run on it (from Poll).
  // `timeout_ns` (PlanRestore, Restore): this call's deadline when shorter than the default
  // (0 = Options::timeout_ns): an admission waits no longer than the prefill it would replace.
  void PlanRestore(const tier_key& key, uint64_t predicted_prefill_ns, IoPhase phase,
                   Done<tier_plan> done, uint64_t timeout_ns = 0);
  void Probe(std::vector<tier_key> keys, IoPhase phase, Done<std::vector<uint8_t>> done);
  void Stat(const tier_key& key, IoPhase phase, Done<StatResult> done);
  // OK or NOT_FOUND count as done (true when something was removed).
  void Remove(const tier_key& key, IoPhase phase, Done<bool> done);
  // `segments` point at buffers the caller keeps alive until `settled`.
  void Spill(const tier_key& key, std::vector<tier_segment> segments, IoPhase phase,
             Done<Completion> done, std::function<void()> settled);
  void Restore(const tier_key& key, std::vector<tier_segment> segments, IoPhase phase,
               Done<Completion> done, std::function<void()> settled, uint64_t timeout_ns = 0);

  // Blocking calls bounded by the deadline, for start-up (Host::Open). Owner's thread.
  Result<tier_info> InfoWithin();
  Result<tier_stats> StatsWithin();
  Status EnumerateWithin(const std::function<bool(const tier_entry&)>& visit);

  // Answers every call past its deadline with timed_out. Scheduler thread (Poll).
  void CheckDeadlines(uint64_t now_ns);
  // Calls whose provider has not finished (answered or not), blocking ones included.
  size_t unsettled() const { return calls_.size() + stuck_blocking_; }
  // Calls not yet answered.
  size_t unanswered() const;
  uint64_t calls_in(IoPhase phase) const { return calls_by_phase_[static_cast<int>(phase)]; }
  uint64_t timeouts() const { return timeouts_; }
  bool has_probe() const;
  const SegmentCipher* cipher() const { return options_.cipher.get(); }
  ProviderInstance& instance() { return *instance_; }
  // Gives up on a provider that does not finish: neither the instance nor the call threads are
  // touched again; the caller must leak this object. Owner's thread.
  void Abandon();

 private:
  struct Call {
    IoPhase phase = IoPhase::kIdle;
    uint64_t deadline_ns = 0;
    bool answered = false;
    std::function<void()> on_timeout;
    std::function<void()> settled;
  };
  uint64_t Begin(IoPhase phase, std::function<void()> on_timeout, std::function<void()> settled,
                 uint64_t timeout_ns);
  uint64_t TimeoutOf(uint64_t timeout_ns) const;  // min(timeout_ns, default), 0 = default
  // Runs `answer` unless the call was answered already (by its deadline), then `settled`.
  void Finish(uint64_t id, const std::function<void()>& answer);
  // Posts Finish(id, answer) to the scheduler thread. Any thread.
  void PostFinish(uint64_t id, std::function<void()> answer);
  // Submits spill or restore on the serial lane.
  using Submit = Status (ProviderInstance::*)(const tier_key&, std::span<const tier_segment>,
                                              ProviderInstance::Done);
  void SubmitAsync(Submit submit, const tier_key& key, std::vector<tier_segment> segments,
                   IoPhase phase, Done<Completion> done, std::function<void()> settled,
                   uint64_t timeout_ns);
  // Encryption: the provider's view of a checkpoint's segments and back.
  void SubmitSealed(Submit submit, const tier_key& key, std::vector<tier_segment> segments,
                    std::function<void(const Completion&)> finish);
  void OpenEntry(EntryCopy& copy) const;
  template <typename T>
  Result<T> Blocking(std::function<Result<T>()> call);

  std::unique_ptr<ProviderInstance> instance_;
  EventQueue* queue_;
  Options options_;
  std::unique_ptr<CallThreads> threads_;
  std::unordered_map<uint64_t, Call> calls_;  // scheduler thread only
  uint64_t next_call_ = 1;
  uint64_t calls_by_phase_[kIoPhaseCount] = {};
  uint64_t timeouts_ = 0;
  size_t stuck_blocking_ = 0;  // blocking calls that passed their deadline
  bool abandoned_ = false;
};

}  // namespace tier
