// Per-core throughput of what the disk provider does to every 1 MiB chunk: the XXH3-64 checksum,
// zstd compression and decompression at the provider's default level, and the per-segment `auto`
// decision, on the three data kinds tier-bench uses. Single-threaded: GB/s per core.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "codec.h"
#include "data_kinds.h"

namespace tier::bench {
namespace {

constexpr size_t kChunk = 1 << 20;
constexpr size_t kChunks = 16;  // 16 distinct chunks: not all in cache at once
constexpr int kLevel = 1;

const std::vector<std::byte>& Data(DataKind kind) {
  static std::vector<std::byte> data[3];
  auto& d = data[static_cast<int>(kind)];
  if (d.empty()) {
    d.resize(kChunk * kChunks);
    FillSegment(kind, 1, 0, d);
  }
  return d;
}

std::span<const uint8_t> Chunk(DataKind kind, size_t i) {
  return {reinterpret_cast<const uint8_t*>(Data(kind).data()) + (i % kChunks) * kChunk, kChunk};
}

DataKind KindOf(const benchmark::State& state) {
  return static_cast<DataKind>(state.range(0));
}

void BM_Checksum(benchmark::State& state) {
  size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(disk::Checksum(Chunk(KindOf(state), i++)));
  state.SetBytesProcessed(int64_t(state.iterations()) * kChunk);
  state.SetLabel(DataKindName(KindOf(state)));
}

void BM_ZstdCompress(benchmark::State& state) {
  std::vector<uint8_t> out(kChunk + (kChunk >> 7) + 4096);
  size_t i = 0;
  uint64_t stored = 0;
  for (auto _ : state) {
    const uint64_t n = disk::CompressChunk(Chunk(KindOf(state), i++), out, kLevel);
    stored += n == 0 ? kChunk : n;
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * kChunk);
  state.counters["ratio"] = double(state.iterations()) * kChunk / double(stored);
  state.SetLabel(DataKindName(KindOf(state)));
}

void BM_ZstdDecompress(benchmark::State& state) {
  const DataKind kind = KindOf(state);
  std::vector<std::vector<uint8_t>> frames;
  for (size_t c = 0; c < kChunks; ++c) {
    std::vector<uint8_t> out(kChunk + (kChunk >> 7) + 4096);
    out.resize(disk::CompressChunk(Chunk(kind, c), out, kLevel));
    frames.push_back(std::move(out));
  }
  std::vector<uint8_t> dst(kChunk);
  size_t i = 0;
  for (auto _ : state) {
    if (!disk::DecompressChunk(frames[i++ % kChunks], dst)) state.SkipWithError("bad frame");
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * kChunk);
  state.SetLabel(DataKindName(kind));
}

// `auto`: three 64 KiB samples of a 201 MiB segment compressed once per spill per segment.
void BM_CompressionPays(benchmark::State& state) {
  const auto& d = Data(KindOf(state));
  std::span<const uint8_t> segment(reinterpret_cast<const uint8_t*>(d.data()), d.size());
  for (auto _ : state) benchmark::DoNotOptimize(disk::CompressionPays(segment, kLevel));
  state.SetLabel(DataKindName(KindOf(state)));
}

void Kinds(benchmark::internal::Benchmark* b) {
  for (DataKind kind : AllDataKinds()) b->Arg(static_cast<int>(kind));
}

BENCHMARK(BM_Checksum)->Apply(Kinds);
BENCHMARK(BM_ZstdCompress)->Apply(Kinds)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ZstdDecompress)->Apply(Kinds)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CompressionPays)->Apply(Kinds)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tier::bench
