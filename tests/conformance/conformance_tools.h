// conformance_tools.h -- what the timing-independent checks use: a gate that holds a provider's
// completion threads (so what is queued behind them stays in flight until the check ran), buffers
// with a guard page after every segment, and a scan of this process's memory for stored bytes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "conformance_fixture.h"
#include "tier_provider.h"

namespace tier::conformance {

// Holds a provider's completion threads: spills small "blocker" checkpoints whose completion
// blocks (until Release or the deadline) whenever it runs on a thread other than the submitter,
// one after another, until one does not start its completion: every thread that runs completions
// is then blocked, so operations accepted after it stay in flight (their completion cannot start)
// until Release. A provider completing on the caller's thread cannot be held (inline()).
// tier_info.max_inflight_ops with 0 (no limit) as the largest count.
inline uint32_t InflightCap(const tier_info& info) {
  return info.max_inflight_ops == 0 ? UINT32_MAX : info.max_inflight_ops;
}

class CompletionHold {
 public:
  CompletionHold(const tier_provider* table, tier_instance* instance, uint32_t max_inflight_ops);
  ~CompletionHold();  // releases and waits for the blockers
  CompletionHold(const CompletionHold&) = delete;
  CompletionHold& operator=(const CompletionHold&) = delete;

  // True when a blocker was accepted and did not start its completion: the provider is held.
  bool held() const { return held_; }
  // True when a completion ran on the submitting thread (nothing stays in flight).
  bool inline_completions() const { return inline_; }
  // Completions blocked at the gate now.
  int blocked() const { return blocked_->load(); }
  // Why the provider is not held (for a skip), or "".
  std::string why_not_held() const;
  // True if a blocked completion gave up waiting (the gate stayed closed past the deadline).
  bool timed_out() const { return state_->timed_out.load(); }
  // Opens the gate and waits (bounded) until every blocker completed.
  void Release();
  // Completions that run on the calling thread from now on pass the gate (a thread that closes
  // the instance: a close that completes what is queued on its own thread is not held up).
  void PassOnThisThread();

 private:
  struct Gate {
    std::mutex mutex;
    std::condition_variable cv;
    bool open = false;
    std::thread::id passes;  // guarded by mutex
    std::atomic<bool> timed_out{false};
  };
  struct Blocker;
  static void Callback(void* user_data, const tier_completion* completion);

  const tier_provider* table_;
  tier_instance* instance_;
  std::shared_ptr<Gate> state_ = std::make_shared<Gate>();
  std::shared_ptr<std::atomic<int>> blocked_ = std::make_shared<std::atomic<int>>(0);
  std::vector<Blocker*> blockers_;  // leaked if one never completes
  bool held_ = false;
  bool inline_ = false;
  bool released_ = false;
  std::string refusal_;
};

// Segment buffers each ending right before a PROT_NONE page (data start aligned down to the
// provider's buffer_alignment; the gap, if any, holds a canary). A write past a segment faults:
// the fault handler names the segment and ends the run with exit status 1.
class GuardedBuffers {
 public:
  GuardedBuffers(const std::vector<tier_segment_info>& layout, uint64_t alignment);
  ~GuardedBuffers();
  GuardedBuffers(const GuardedBuffers&) = delete;
  GuardedBuffers& operator=(const GuardedBuffers&) = delete;

  std::vector<tier_segment> Segments() const;
  std::span<std::byte> data(size_t i) const;
  void MakeReadOnly();  // after filling them for a spill
  bool CanariesIntact() const;
  void Unmap();  // at once, after the completion: a late write faults too

 private:
  struct Region {
    void* base = nullptr;
    size_t mapped_bytes = 0;
    std::byte* data = nullptr;
    uint64_t length_bytes = 0;
    size_t canary_bytes = 0;
  };
  std::vector<tier_segment_info> layout_;
  std::vector<Region> regions_;
};

// Installs (once) the SIGSEGV/SIGBUS handler that turns a fault in a registered guard page into a
// test-failure exit naming `what`.
void RegisterGuard(const void* page, size_t bytes, const char* what);
void UnregisterGuard(const void* page);

// Flips one byte in every copy of `needle` in this process's private writable anonymous memory,
// except inside `spare` (the caller's own copy of the needle). Returns the copies damaged.
size_t DamageCopiesInProcessMemory(std::span<const std::byte> needle,
                                   std::span<const std::byte> spare);

// Wall clock, Unix nanoseconds.
uint64_t WallNowNs();

// Keys with patterns that collide in naive hash tables: shared prefixes, shared suffixes, a shared
// first 8 or 16 bytes, single-bit differences. Deterministic for `label`.
std::vector<tier_key> CollidingKeys(const std::string& label, size_t count);

}  // namespace tier::conformance
