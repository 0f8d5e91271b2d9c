// The disk provider's index with 100k entries: Find by full 32-byte key (what restore, stat and
// plan_restore do under the provider's index mutex), hits and misses.
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <random>

#include "index.h"

namespace tier::bench {
namespace {

disk::KeyBytes RandomKey(std::mt19937_64& rng) {
  disk::KeyBytes key;
  for (size_t i = 0; i < key.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(key.data() + i, &v, 8);
  }
  return key;
}

struct IndexWorld {
  explicit IndexWorld(uint64_t entries) : index(~0ull >> 1, entries) {
    std::mt19937_64 rng(7);
    for (uint64_t i = 0; i < entries; ++i) {
      auto entry = std::make_shared<disk::Entry>();
      entry->key = RandomKey(rng);
      entry->stored_bytes = 4096;
      keys.push_back(entry->key);
      index.Insert(std::move(entry));
    }
    std::shuffle(keys.begin(), keys.end(), rng);
    for (uint64_t i = 0; i < 4096; ++i) absent.push_back(RandomKey(rng));
  }
  disk::Index index;
  std::vector<disk::KeyBytes> keys, absent;
};

IndexWorld& Shared(uint64_t entries) {
  static std::unique_ptr<IndexWorld> world;
  if (!world || world->index.entries() != entries) world = std::make_unique<IndexWorld>(entries);
  return *world;
}

void BM_DiskIndexFindHit(benchmark::State& state) {
  IndexWorld& w = Shared(static_cast<uint64_t>(state.range(0)));
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(w.index.Find(w.keys[i++ % w.keys.size()]));
}

void BM_DiskIndexFindMiss(benchmark::State& state) {
  IndexWorld& w = Shared(static_cast<uint64_t>(state.range(0)));
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(w.index.Find(w.absent[i++ % w.absent.size()]));
}

BENCHMARK(BM_DiskIndexFindHit)->Arg(100000);
BENCHMARK(BM_DiskIndexFindMiss)->Arg(100000);

}  // namespace
}  // namespace tier::bench
