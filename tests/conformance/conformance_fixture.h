// conformance_fixture.h -- the AbiConformance fixture: opens the target provider for each test
// and offers checkpoints with verifiable bytes and completion records that count callbacks.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "conformance_target.h"
#include <tier/host/host_services.h>
#include <tier/host/metrics_registry.h>
#include <tier/host/plugin_loader.h>
#include "test_support.h"
#include "tier_provider.h"

namespace tier::conformance {

// One asynchronous operation's completion, recorded straight from the C callback so the test can
// check it ran exactly once.
struct OpRecord {
  std::atomic<int> calls{0};
  std::mutex mutex;
  std::condition_variable cv;
  tier_status status = -1;
  std::string message;
  uint64_t logical_bytes = 0;
  uint64_t stored_bytes = 0;

  static void Callback(void* user_data, const tier_completion* completion);
  // Waits up to a generous bound (a deadlock guard, not a timing check); true if it completed.
  bool Wait();
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

class AbiConformance : public ::testing::TestWithParam<Target> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Opens (or reopens) an instance with the target's options; fails the test on error.
  tier_instance* Open(const std::string& namespace_id = "");
  void Close();
  tier_status TryOpen(const std::string& namespace_id, tier_instance** out, tier_error* error);

  const tier_provider* table() const { return library_->table(); }
  tier_instance* instance() const { return instance_; }
  bool absent() const { return absent_; }
  bool persistent() const { return persistent_; }

  // Submits and waits; the returned status is the refusal or the completion's status.
  tier_status Spill(TestCheckpoint& checkpoint);
  tier_status Restore(TestCheckpoint& checkpoint);
  tier_stats Stats();
  std::vector<tier_key> EnumerateKeys();

  MetricsRegistry metrics_;
  HostServices host_{&metrics_};
  std::shared_ptr<PluginLibrary> library_;
  std::unique_ptr<test::ScopedTempDir> tmpdir_;
  std::vector<std::string> options_;  // with {tmpdir} substituted
  tier_instance* instance_ = nullptr;
  bool absent_ = false;
  bool persistent_ = false;
};

bool SameKey(const tier_key& a, const tier_key& b);

}  // namespace tier::conformance
