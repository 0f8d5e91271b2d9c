// Planner admission with a 100k-entry catalog: Planner::Admit (prefix hashes, the catalog's
// longest-prefix lookup with exact block comparison, pinning, metrics), and the catalog lookups
// alone. Device copies are replaced by a no-op Device tier: only the decision is timed.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <random>

#include <tier/device/host_arena.h>

#include "catalog.h"
#include <tier/host/cost_model.h>
#include "device_tier.h"
#include "latency_recorder.h"
#include <tier/host/metrics_registry.h>
#include "planner.h"
#include "server_metrics.h"

namespace tier::bench {
namespace {

constexpr uint64_t kCheckpointsPerSession = 50;
constexpr uint64_t kBlocksBetweenCheckpoints = 4;  // 4 x 512 tokens
constexpr uint64_t kTokensPerBlock = 512;

// Device placement without copies: admission decisions never touch the bytes.
class NoCopyDevice : public DeviceTier {
 public:
  const char* path() const override { return "cpu"; }
  std::string description() const override { return "no-op device (benchmark)"; }
  Result<std::unique_ptr<DeviceCopy>> Upload(const HostCopy&) override {
    return std::unique_ptr<DeviceCopy>(std::make_unique<DeviceCopy>());
  }
  Status Download(const DeviceCopy&, HostCopy*) override { return Status::Ok(); }
  std::shared_ptr<device::HostAllocator> host_allocator() override {
    return device::MakeAlignedHostAllocator();
  }
};

ModelProfile SmallProfile() {
  ModelProfile p;
  p.name = "bench";
  p.model = "bench";
  p.gpu = "none";
  p.kv_dtype = "int8-g64";
  p.full_attention_layers = 16;
  p.kv_bytes_per_token = 33792;
  p.mtp_layers = 1;
  p.state_image = {{"gdn_recurrent", 150994944}, {"conv_history", 2949120}};
  p.hidden_state_bytes = 10240;
  p.prefill_chunk_ns = 2e6;
  p.prefill_token_ns = 25000;
  p.attention_pair_ns = 7.1;
  return p;
}

// A planner whose catalog holds `entries` checkpoints on Device: sessions of 50 checkpoints
// each, every 4 blocks (2,048 tokens) of a session's own block sequence, so session s's
// checkpoints are prefixes of one another (up to 200 blocks, 102k tokens).
struct World {
  explicit World(uint64_t entries) : cost(SmallProfile()), metrics(&registry) {
    PlannerConfig config;
    config.namespace_id = "bench";
    config.device_capacity_bytes = ~0ull >> 2;
    config.host_capacity_bytes = ~0ull >> 2;
    config.bytes_scale = 1ull << 40;  // one byte per segment: only the catalog matters
    planner = std::make_unique<Planner>(config, cost, &device, nullptr, &metrics);
    sessions = (entries + kCheckpointsPerSession - 1) / kCheckpointsPerSession;
    for (uint64_t s = 0; s < sessions; ++s) {
      const std::vector<uint64_t> blocks = SessionBlocks(s, kCheckpointsPerSession);
      for (uint64_t c = 1; c <= kCheckpointsPerSession && planner->catalog().size() < entries;
           ++c) {
        const uint64_t n = c * kBlocksBetweenCheckpoints;
        planner->Seal(std::span(blocks).first(n), n * kTokensPerBlock, false, 0);
      }
    }
  }
  static std::vector<uint64_t> SessionBlocks(uint64_t session, uint64_t checkpoints) {
    std::vector<uint64_t> blocks(checkpoints * kBlocksBetweenCheckpoints + 3);
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = (session << 20) * 977 + i + 1;
    return blocks;
  }
  NoCopyDevice device;
  CostModel cost;
  MetricsRegistry registry;
  ServerMetrics metrics;
  std::unique_ptr<Planner> planner;
  uint64_t sessions = 0;
};

World& SharedWorld(uint64_t entries) {
  static std::unique_ptr<World> world;
  if (!world || world->planner->catalog().size() != entries) {
    world = std::make_unique<World>(entries);
  }
  return *world;
}

// A returning session: its longest checkpoint (200 blocks) plus 3 new blocks.
void BM_AdmitHit(benchmark::State& state) {
  World& w = SharedWorld(static_cast<uint64_t>(state.range(0)));
  std::vector<std::vector<uint64_t>> requests;
  std::mt19937_64 rng(1);
  for (int i = 0; i < 1024; ++i) {
    requests.push_back(World::SessionBlocks(rng() % w.sessions, kCheckpointsPerSession));
  }
  LatencyRecorder latency(1 << 20);
  size_t i = 0;
  for (auto _ : state) {
    const std::vector<uint64_t>& blocks = requests[i++ % requests.size()];
    const auto t0 = std::chrono::steady_clock::now();
    AdmissionResult r = w.planner->Admit(blocks, 1);
    latency.Add(std::chrono::steady_clock::now() - t0);
    if (r.outcome != Outcome::kDeviceHit) state.SkipWithError("expected a device hit");
    w.planner->Release(r.entry);
  }
  latency.Report(state);
  state.counters["entries"] = double(w.planner->catalog().size());
  state.counters["request_blocks"] = double(requests[0].size());
}

// A new conversation: no checkpoint is a prefix, every prefix length is looked up (worst case).
void BM_AdmitMiss(benchmark::State& state) {
  World& w = SharedWorld(static_cast<uint64_t>(state.range(0)));
  std::vector<std::vector<uint64_t>> requests;
  for (uint64_t s = 0; s < 1024; ++s) {
    requests.push_back(World::SessionBlocks(w.sessions + 1 + s, kCheckpointsPerSession));
  }
  LatencyRecorder latency(1 << 20);
  size_t i = 0;
  for (auto _ : state) {
    const std::vector<uint64_t>& blocks = requests[i++ % requests.size()];
    const auto t0 = std::chrono::steady_clock::now();
    AdmissionResult r = w.planner->Admit(blocks, 1);
    latency.Add(std::chrono::steady_clock::now() - t0);
    if (r.outcome != Outcome::kRootPrefill) state.SkipWithError("expected a miss");
  }
  latency.Report(state);
  state.counters["request_blocks"] = double(requests[0].size());
}

// The catalog's exact lookup by key (a hash map of 32-byte keys).
void BM_CatalogFind(benchmark::State& state) {
  World& w = SharedWorld(static_cast<uint64_t>(state.range(0)));
  std::vector<tier_key> keys;
  for (CheckpointEntry* e : w.planner->catalog().Entries()) keys.push_back(e->key);
  std::shuffle(keys.begin(), keys.end(), std::mt19937_64(2));
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(w.planner->catalog().Find(keys[i++ % keys.size()]));
  }
}

// Longest-prefix matching alone, hashes precomputed, over rotating sessions (cold caches as in
// Admit): `limit` candidates as Admit asks for (8), or only the longest (1).
void BM_CatalogLongestPrefix(benchmark::State& state) {
  World& w = SharedWorld(static_cast<uint64_t>(state.range(0)));
  const size_t limit = static_cast<size_t>(state.range(1));
  std::vector<std::vector<uint64_t>> requests, hashes;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 1024; ++i) {
    requests.push_back(World::SessionBlocks(rng() % w.sessions, kCheckpointsPerSession));
    hashes.push_back(PrefixHashes(requests.back()));
  }
  LatencyRecorder latency(1 << 20);
  size_t i = 0;
  for (auto _ : state) {
    const size_t r = i++ % requests.size();
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(
        w.planner->catalog().LongestPrefixMatches(requests[r], hashes[r], limit));
    latency.Add(std::chrono::steady_clock::now() - t0);
  }
  latency.Report(state);
}

void BM_PrefixHashes(benchmark::State& state) {
  const std::vector<uint64_t> blocks = World::SessionBlocks(1, kCheckpointsPerSession);
  for (auto _ : state) benchmark::DoNotOptimize(PrefixHashes(blocks));
  state.counters["blocks"] = double(blocks.size());
}

BENCHMARK(BM_AdmitHit)->Arg(100000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AdmitMiss)->Arg(100000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CatalogFind)->Arg(100000);
BENCHMARK(BM_CatalogLongestPrefix)
    ->Args({100000, 8})
    ->Args({100000, 1})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PrefixHashes)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tier::bench
