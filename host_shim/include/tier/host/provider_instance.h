// provider_instance.h -- a C++ handle on one opened provider instance (RAII over open/close).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <tier/host/plugin_loader.h>
#include <tier/status.h>
#include "tier_provider.h"

namespace tier {

using ProviderOptions = std::vector<std::pair<std::string, std::string>>;

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

// Thread-safe like the provider itself: any method from any thread, except Close()/destruction,
// which must not race with other calls. Callbacks run on provider threads.
class ProviderInstance {
 public:
  using Done = std::function<void(const Completion&)>;

  // Opens an instance of `library` over `namespace_id`. `host` must outlive the instance.
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
  // Blocking forms: submit and wait for the completion (a refusal becomes the completion).
  Completion SpillAndWait(const tier_key& key, std::span<const tier_segment> segments);
  Completion RestoreAndWait(const tier_key& key, std::span<const tier_segment> segments);
  Status Remove(const tier_key& key);
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
};

}  // namespace tier
