// conformance_fixture.h -- the AbiConformance fixture: opens the target provider for each test
// and offers checkpoints with verifiable bytes and completion records that count callbacks.
//
// Every wait is bounded by the per-operation deadline (--tier-op-timeout-s, default 30 s): an
// accepted spill or restore that never completes, or a close that never returns, fails its test
// at the deadline, and the rest of that provider's tests are skipped instead of stalling the run.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <tier/host/host_services.h>
#include <tier/host/metrics_registry.h>
#include <tier/host/plugin_loader.h>
#include "conformance_target.h"
#include "test_support.h"
#include "tier_provider.h"

namespace tier::conformance {

// The per-operation deadline. Any thread.
std::chrono::seconds OpDeadline();
// True once an operation of the provider at `path` missed its deadline (its later tests skip).
bool TargetIsStuck(const std::string& path);

// What one completion wrote. Heap-allocated and leaked when its operation never completed, so a
// late completion (after its test gave up) still writes into live memory.
struct OpState {
  std::atomic<bool> started{false};  // set first thing in the callback
  std::atomic<int> calls{0};
  std::mutex mutex;
  std::condition_variable cv;
  tier_status status = -1;
  std::string message;
  uint64_t logical_bytes = 0;
  uint64_t stored_bytes = 0;
  uint64_t duration_ns = 0;
  std::atomic<int>* started_counter = nullptr;  // borrowed; bumped at the callback's start
};

// One asynchronous operation's completion, recorded straight from the C callback so the test can
// check it ran exactly once. Pass Callback with cookie() as the user data. The callback itself
// fails the running test on a NULL completion, a NULL message, a failure without a message or a
// second call.
class OpRecord {
 public:
  OpRecord();
  ~OpRecord();
  OpRecord(const OpRecord&) = delete;
  OpRecord& operator=(const OpRecord&) = delete;

  static void Callback(void* user_data, const tier_completion* completion);
  void* cookie() { return state_; }
  // Counts this operation's callback start in `counter` too (borrowed; set before submitting).
  void CountStartIn(std::atomic<int>* counter) { state_->started_counter = counter; }
  // Waits up to OpDeadline(); true if it completed. On a timeout it fails the test naming `what`.
  bool Wait(const char* what = "operation");
  bool started() const { return state_->started.load(); }

 private:
  OpState* state_;

 public:
  // The completion's fields (read them after Wait, or after close returned).
  std::atomic<int>& calls;
  tier_status& status;
  std::string& message;
  uint64_t& logical_bytes;
  uint64_t& stored_bytes;
  uint64_t& duration_ns;
};

// A checkpoint whose segment bytes derive from its key (checkpoint_bytes.h).
struct TestCheckpoint {
  tier_key key{};
  std::vector<tier_segment_info> layout;
  std::vector<std::vector<std::byte>> buffers;

  std::vector<tier_segment> Segments();       // over the buffers as filled
  std::vector<tier_segment> EmptySegments();  // zeroed buffers, for a restore
  bool Matches() const;                       // buffers hold the key's bytes
  uint64_t logical_bytes() const;
};

// Six kinds, odd lengths, a manifest: the shape every provider must round-trip.
TestCheckpoint MakeCheckpoint(const std::string& label, uint64_t scale_bytes = 64 * 1024);
// A checkpoint with the given layout.
TestCheckpoint MakeCheckpoint(const std::string& label, std::vector<tier_segment_info> layout);

// In an AbiConformance test: skips it for an absent tier (capacity 0), which has nothing to read
// back.
#define SKIP_IF_ABSENT()                                        \
  if (absent())                                                 \
  GTEST_SKIP() << GetParam().name                               \
               << " is an absent tier (capacity 0): it stores " \
                  "nothing, so there is nothing to read back"

class AbiConformance : public ::testing::TestWithParam<Target> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Opens (or reopens) an instance with the target's options over `namespace_id` (the target's
  // namespace when not given); fails the test on error.
  tier_instance* Open(const std::optional<std::string>& namespace_id = std::nullopt);
  // Closes the instance, bounded by the deadline (a close that never returns fails the test and
  // leaves the instance behind).
  void Close();
  tier_status TryOpen(const std::optional<std::string>& namespace_id, tier_instance** out,
                      tier_error* error);
  // TryOpen with another host table and options put before the target's.
  tier_status TryOpenWith(const tier_host_services* host,
                          const std::optional<std::string>& namespace_id,
                          const std::vector<std::string>& extra_options, tier_instance** out,
                          tier_error* error);

  const tier_provider* table() const { return library_->table(); }
  tier_instance* instance() const { return instance_; }
  bool absent() const { return absent_; }
  bool persistent() const { return persistent_; }
  const tier_info& info() const { return info_; }
  // The target's {tmpdir} (empty when its options name none).
  std::string tmpdir() const { return tmpdir_ ? tmpdir_->path() : std::string(); }

  // Submits and waits; the returned status is the refusal or the completion's status.
  tier_status Spill(TestCheckpoint& checkpoint);
  tier_status Restore(TestCheckpoint& checkpoint);
  tier_stats Stats();
  std::vector<tier_key> EnumerateKeys();
  // Runs `call` (a synchronous provider call) on another thread and waits up to the deadline;
  // false (and the test fails) if it did not return. `call` must own what it touches.
  bool ReturnsWithinDeadline(const char* what, std::function<void()> call);

  MetricsRegistry metrics_;
  HostServices host_{&metrics_};
  std::shared_ptr<PluginLibrary> library_;
  std::unique_ptr<test::ScopedTempDir> tmpdir_;
  std::vector<std::string> options_;  // with {tmpdir} substituted
  tier_instance* instance_ = nullptr;
  tier_info info_{};
  bool absent_ = false;
  bool persistent_ = false;
};

bool SameKey(const tier_key& a, const tier_key& b);

}  // namespace tier::conformance
