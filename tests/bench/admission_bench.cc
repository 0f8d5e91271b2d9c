// Admission with a 100k-entry catalog: Host::Admit through the public API (prefix hashes, the
// catalog's longest-prefix lookup with exact block comparison, pinning, the state copy of a device
// hit, metrics), and the catalog lookups alone. The pool holds one byte per page and layer: only
// the decision is timed.
#include <benchmark/benchmark.h>
#include <tier/device/cpu_transfer_engine.h>
#include <tier/host/cost_model.h>
#include <tier/host/host.h>
#include <tier/host/identity.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>

#include "catalog.h"
#include "kv_pool.h"
#include "latency_recorder.h"

namespace tier::bench {
namespace {

constexpr uint64_t kCheckpointsPerSession = 50;
constexpr uint64_t kBlocksBetweenCheckpoints = 4;  // 4 x 512 tokens
constexpr uint64_t kTokensPerBlock = 512;
constexpr uint64_t kScale = 1ull << 20;  // ~one byte per page and layer (a page of a layer: 1 MiB)

ModelProfile SmallProfile() {
  ModelProfile p;
  p.name = "bench";
  p.model = "bench";
  p.gpu = "none";
  p.kv_dtype = "int8-g64";
  p.tokens_per_page = 512;  // one page per block
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

// A Host whose catalog holds `entries` checkpoints on Device: sessions of 50 checkpoints each,
// every 4 blocks (2,048 tokens) of a session's own block sequence, so session s's checkpoints are
// prefixes of one another (up to 200 blocks, 102k tokens).
struct World {
  explicit World(uint64_t entries) : profile(SmallProfile()) {
    sessions = (entries + kCheckpointsPerSession - 1) / kCheckpointsPerSession;
    auto made = device::MakeCpuTransferEngine({});
    engine = std::move(made).value();
    const uint32_t pages =
        static_cast<uint32_t>(sessions * (kCheckpointsPerSession * kBlocksBetweenCheckpoints + 3));
    pool = std::move(sim::KvPool::Create(engine.get(), profile, kScale, pages + 1024)).value();
    HostOptions o;
    o.namespace_id = "bench";
    o.profile = profile;
    o.pool = pool->view();
    o.engine = engine;
    o.device_capacity_bytes = ~0ull >> 4;  // every checkpoint stays on Device
    o.host_capacity_bytes = 1ull << 30;
    o.bytes_scale = kScale;
    host = std::move(Host::Open(std::move(o))).value();
    lane = std::move(pool->NewStateSet()).value();
    for (uint64_t s = 0; s < sessions; ++s) {
      const std::vector<uint64_t> blocks = SessionBlocks(s, kCheckpointsPerSession);
      std::vector<uint32_t> session_pages;
      pool->Allocate(static_cast<uint32_t>(blocks.size()), &session_pages);
      for (uint64_t c = 1; c <= kCheckpointsPerSession && sealed < entries; ++c) {
        const uint64_t n = c * kBlocksBetweenCheckpoints;
        SealRequest r;
        r.blocks = std::span(blocks).first(n);
        r.tokens = n * kTokensPerBlock;
        r.pages = std::span(session_pages).first(n);
        r.state = lane->buffers;
        const Sealed done = host->Seal(r);
        if (done.status.ok())
          ++sealed;
        else if (sealed == 0)
          std::fprintf(stderr, "seal: %s\n", done.status.ToString().c_str());
        auto entry = std::make_unique<CheckpointEntry>();  // the same identity, for BM_Catalog*
        entry->key = PrefixKey("bench", r.blocks);
        entry->blocks.assign(r.blocks.begin(), r.blocks.end());
        catalog.Insert(std::move(entry));
      }
      pool->HeldByHost(session_pages);
      Settle();
    }
  }
  void Settle() {
    std::vector<Event> events;
    while (host->Busy()) {
      host->WaitForWork(1000000);
      host->Poll(&events);
    }
    host->Poll(&events);
  }
  static std::vector<uint64_t> SessionBlocks(uint64_t session, uint64_t checkpoints) {
    std::vector<uint64_t> blocks(checkpoints * kBlocksBetweenCheckpoints + 3);
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = (session << 20) * 977 + i + 1;
    return blocks;
  }
  AdmitRequest Request(std::span<const uint64_t> blocks) {
    AdmitRequest r;
    r.blocks = blocks;
    r.now_ns = 1;
    r.allocate_pages = [this](uint32_t n, std::vector<uint32_t>* out) {
      return pool->Allocate(n, out);
    };
    r.state = lane->buffers;
    return r;
  }
  ModelProfile profile;
  std::shared_ptr<device::TransferEngine> engine;
  std::unique_ptr<sim::KvPool> pool;
  std::unique_ptr<Host> host;
  std::unique_ptr<sim::KvPool::StateSet> lane;
  Catalog catalog;
  uint64_t sessions = 0;
  uint64_t sealed = 0;
};

World& SharedWorld(uint64_t entries) {
  static std::unique_ptr<World> world;
  if (!world || world->sealed != entries) {
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
    Admission r = w.host->Admit(w.Request(blocks));
    latency.Add(std::chrono::steady_clock::now() - t0);
    if (r.outcome != Outcome::kDeviceHit) {
      state.SkipWithError((std::string("expected a device hit, got ") + OutcomeName(r.outcome) +
                           " (" + RootReasonName(r.root_reason) + ")")
                              .c_str());
      break;
    }
    w.host->Release(r.id);
  }
  latency.Report(state);
  state.counters["entries"] = double(w.sealed);
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
    Admission r = w.host->Admit(w.Request(blocks));
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
  for (CheckpointEntry* e : w.catalog.Entries()) keys.push_back(e->key);
  std::shuffle(keys.begin(), keys.end(), std::mt19937_64(2));
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(w.catalog.Find(keys[i++ % keys.size()]));
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
    benchmark::DoNotOptimize(w.catalog.LongestPrefixMatches(requests[r], hashes[r], limit));
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
