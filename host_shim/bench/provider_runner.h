// provider_runner.h -- the provider as the server uses it: loaded with dlopen through the tier
// ABI (PluginLibrary, ProviderInstance), one checkpoint spilled or restored at a time and waited
// for, timed from submission to completion.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <tier/host/host_services.h>
#include <tier/host/metrics_registry.h>
#include <tier/host/plugin_loader.h>
#include <tier/host/provider_instance.h>
#include "checkpoint_shape.h"
#include "segment_buffers.h"
#include "segment_cipher.h"

namespace tier::bench {

struct OpTiming {
  uint64_t wall_ns = 0;        // submit to completion, measured here
  uint64_t logical_bytes = 0;  // as the completion reported
  uint64_t stored_bytes = 0;
};

class ProviderRunner {
 public:
  // Loads `plugin` and opens an instance over `namespace_id` with `options`. The error says which.
  // `encryption_key_file` (--encryption-key-file): every spill is sealed and every restore opened
  // as the Host does with HostOptions::encryption (SegmentCipher), inside the timed interval.
  static Result<std::unique_ptr<ProviderRunner>> Open(const std::string& plugin,
                                                      const std::string& namespace_id,
                                                      const ProviderOptions& options,
                                                      const std::string& encryption_key_file = "");
  ~ProviderRunner();

  Result<OpTiming> Spill(const tier_key& key, const CheckpointShape& shape,
                         const SegmentBuffers& buffers);
  Result<OpTiming> Restore(const tier_key& key, const CheckpointShape& shape,
                           SegmentBuffers& buffers);
  Status Remove(const tier_key& key);

  const std::string& io_path() const { return io_path_; }
  const std::string& provider_name() const { return name_; }
  ProviderInstance& instance() { return *instance_; }

 private:
  ProviderRunner() = default;
  MetricsRegistry registry_;
  std::unique_ptr<HostServices> host_;
  std::shared_ptr<PluginLibrary> library_;
  std::unique_ptr<ProviderInstance> instance_;
  std::unique_ptr<SegmentCipher> cipher_;  // null: plaintext, as before
  std::string io_path_;
  std::string name_;
};

}  // namespace tier::bench
