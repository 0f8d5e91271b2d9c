// provider_instance.h -- a C++ handle on one opened provider instance (RAII over open/close).
// TOOL-LEVEL: not part of the integration API (host_shim/README.md, "Headers"); for the tools and
// tests built on the library (tier-host, tier-bench, the tests). tier::Host (host.h) opens and
// drives the provider itself.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <tier/host/plugin_loader.h>
#include <tier/host/types.h>
#include <tier/status.h>
#include "tier_provider.h"

namespace tier {

// What an asynchronous spill or restore reported through its completion.
struct Completion {
  Status status;
  uint64_t logical_bytes = 0;
  uint64_t stored_bytes = 0;
  uint64_t duration_ns = 0;
};

struct StatResult {
  tier_stat_result stat{};
  std::vector<tier_segment_info> segments;
};

// An owned copy of what enumerate reported for one checkpoint (the tier_entry pointers are
// borrowed for the callback only). The 1.1 times are 0 when the provider did not set them.
struct EntryCopy {
  tier_key key{};
  uint64_t logical_bytes = 0;
  uint64_t stored_bytes = 0;
  std::vector<tier_segment_info> segments;
  std::vector<std::byte> manifest;
  bool has_manifest = false;
  uint64_t created_unix_ns = 0;
  uint64_t last_used_unix_ns = 0;

  static EntryCopy Of(const tier_entry& entry);
  // A tier_entry pointing into this copy (valid while it lives).
  tier_entry view() const;
};

// Thread-safe like the provider itself: any method from any thread, except Close()/destruction,
// which must not race with other calls. Callbacks run on provider threads.
class ProviderInstance {
 public:
  using Done = std::function<void(const Completion&)>;

  // Opens an instance of `library` over `namespace_id`. `host` must be alive at the call; a
  // HostServices table is then retained for as long as the provider may call it (past this
  // object when it is abandoned); any other host's table must outlive every call of the instance.
  static Result<std::unique_ptr<ProviderInstance>> Open(std::shared_ptr<PluginLibrary> library,
                                                        const tier_host_services* host,
                                                        const std::string& namespace_id,
                                                        const ProviderOptions& options);
  ~ProviderInstance();  // Close()
  ProviderInstance(const ProviderInstance&) = delete;
  ProviderInstance& operator=(const ProviderInstance&) = delete;

  // Cancels and waits for everything in flight, then frees the instance. Idempotent.
  void Close();

  Result<tier_info> Info() const;
  Result<tier_stats> Stats() const;
  // NOT_FOUND when absent. Fetches the whole segment table.
  Result<StatResult> Stat(const tier_key& key) const;
  // Asynchronous: on OK, `done` runs exactly once (maybe before the call returns); otherwise never.
  Status Spill(const tier_key& key, std::span<const tier_segment> segments, Done done);
  Status Restore(const tier_key& key, std::span<const tier_segment> segments, Done done);
  // Blocking forms for tools: submit and wait for the completion (a refusal becomes the
  // completion) at most `timeout_ns`. Past it the completion says so (IO_ERROR, timed out) and
  // the buffers stay borrowed by the provider: the caller must then keep them alive (leak them)
  // and not close this instance (abandon it, Close() would wait for the operation).
  Completion SpillAndWait(const tier_key& key, std::span<const tier_segment> segments,
                          uint64_t timeout_ns = kDefaultWaitNs);
  Completion RestoreAndWait(const tier_key& key, std::span<const tier_segment> segments,
                            uint64_t timeout_ns = kDefaultWaitNs);
  static constexpr uint64_t kDefaultWaitNs = 30ull * 1000 * 1000 * 1000;
  // Accepted spills and restores whose completion the provider has not delivered yet: 0 inside
  // (and after) the last one's `done`, so a waiter woken by it reads 0. Any thread.
  uint64_t outstanding() const { return outstanding_->load(); }
  // Leaves the provider instance open and never calls it again (a provider stuck in an
  // operation: closing would wait for it forever); the host services it was handed stay
  // retained for good (inert once their HostServices is gone). Owner's thread.
  void Abandon();
  Status Remove(const tier_key& key);
  // ABI 1.1 probe, in batches of TIER_PROBE_MAX_KEYS: found[i] is 1 when keys[i] is stored.
  // UNSUPPORTED when the provider has no probe slot. May block (a network store).
  Result<std::vector<uint8_t>> Probe(std::span<const tier_key> keys) const;
  bool has_probe() const;
  // `visit` returns false to stop early. Runs on the calling thread.
  Status Enumerate(const std::function<bool(const tier_entry&)>& visit) const;
  Result<tier_plan> PlanRestore(const tier_key& key, uint64_t predicted_prefill_ns) const;

  const PluginLibrary& library() const { return *library_; }
  const std::string& namespace_id() const { return namespace_id_; }

 private:
  ProviderInstance() = default;
  std::shared_ptr<PluginLibrary> library_;
  tier_instance* instance_ = nullptr;
  std::string namespace_id_;
  std::shared_ptr<const void> services_;  // HostServices::Retain of the table given to open
  // Shared with every pending completion: it may run after this object is gone (abandoned).
  std::shared_ptr<std::atomic<uint64_t>> outstanding_ = std::make_shared<std::atomic<uint64_t>>(0);
};

}  // namespace tier
