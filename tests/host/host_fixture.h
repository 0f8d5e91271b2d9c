// planner_fixture.h -- a planner over a tiny model profile (sizes easy to reason about) and a
// provider chosen per test.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cold_tier.h"
#include <tier/host/cost_model.h>
#include "device_tier.h"
#include <tier/host/host_services.h>
#include <tier/host/metrics_registry.h>
#include "planner.h"
#include <tier/host/plugin_loader.h>
#include <tier/host/provider_instance.h>
#include "server_metrics.h"

namespace tier::test {

// 2 layers of 64 bytes per token, a 1000-byte state image, a 100-byte hidden state.
ModelProfile TinyProfile();

class PlannerTest : public ::testing::Test {
 protected:
  // Builds the planner over `plugin` with Device and Host budgets in logical bytes.
  void Build(const std::string& plugin, const ProviderOptions& options, uint64_t device_bytes,
             uint64_t host_bytes);
  // Logical bytes of a checkpoint of `blocks` blocks (the manifest estimated at 200 bytes).
  uint64_t Bytes(size_t blocks) const { return profile_.CheckpointBytes(blocks * 512) + 200; }
  void TearDown() override;

  // Blocks {base, base+1, ...} of length n.
  static std::vector<uint64_t> Blocks(uint64_t base, size_t n);
  CheckpointEntry* Seal(const std::vector<uint64_t>& blocks, uint64_t now_s);
  // Seals the one-block checkpoint `blocks` at t=1 s, then three newer one-block checkpoints, so
  // that with Device and Host budgets of 1.5 checkpoints it is pushed down to Cold (asserted).
  void SealAndPushToCold(const std::vector<uint64_t>& blocks);
  CheckpointEntry* Find(const std::vector<uint64_t>& blocks) const;
  uint8_t PlacementsOf(const std::vector<uint64_t>& blocks) const;
  double Counter(const std::string& series) const;  // value of a line of the exposition, or -1

  ModelProfile profile_ = TinyProfile();
  CostModel cost_{profile_};
  MetricsRegistry registry_;
  HostServices host_{&registry_};
  ServerMetrics metrics_{&registry_};
  std::unique_ptr<DeviceTier> device_;
  std::shared_ptr<PluginLibrary> library_;
  std::unique_ptr<ProviderInstance> instance_;
  std::unique_ptr<ColdTier> cold_;
  std::unique_ptr<Planner> planner_;
};

}  // namespace tier::test
