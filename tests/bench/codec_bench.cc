// Per-core throughput of what the disk provider does to every 1 MiB chunk: the XXH3-64 checksum,
// zstd compression and decompression at the provider's default level, and the per-segment `auto`
// choice, on the three data kinds tier-bench uses. Single-threaded: GB/s per core.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "codec.h"
#include "compression_policy.h"
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

// The zstd codec under test: plain, or over 2- or 4-byte planes (state.range(1) = 0, 2, 4).
uint32_t CodecOf(const benchmark::State& state) {
  return state.range(1) == 2   ? disk::kCodecZstdShuffle2
         : state.range(1) == 4 ? disk::kCodecZstdShuffle4
                               : disk::kCodecZstd;
}

std::string Label(const benchmark::State& state) {
  return std::string(DataKindName(KindOf(state))) +
         (state.range(1) == 0 ? " zstd" : " zstd+shuffle" + std::to_string(state.range(1)));
}

void BM_ZstdCompress(benchmark::State& state) {
  std::vector<uint8_t> out(kChunk + (kChunk >> 7) + 4096);
  size_t i = 0;
  uint64_t stored = 0;
  for (auto _ : state) {
    const uint64_t n =
        disk::CompressChunkAs(CodecOf(state), Chunk(KindOf(state), i++), out, kLevel);
    stored += n == 0 ? kChunk : n;
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * kChunk);
  state.counters["ratio"] = double(state.iterations()) * kChunk / double(stored);
  state.SetLabel(Label(state));
}

// Decompression (and unshuffle) into a chunk: the restore side, per core.
void BM_ZstdDecompress(benchmark::State& state) {
  std::vector<std::vector<uint8_t>> frames;
  for (size_t c = 0; c < kChunks; ++c) {
    std::vector<uint8_t> out(kChunk + (kChunk >> 7) + 4096);
    out.resize(disk::CompressChunkAs(CodecOf(state), Chunk(KindOf(state), c), out, kLevel));
    frames.push_back(std::move(out));
  }
  std::vector<uint8_t> dst(kChunk);
  size_t i = 0;
  for (auto _ : state) {
    if (!disk::DecompressChunkAs(CodecOf(state), frames[i++ % kChunks], dst)) {
      state.SkipWithError("bad frame");
    }
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * kChunk);
  state.SetLabel(Label(state));
}

// `auto`'s per-segment choice: three 64 KiB samples compressed three ways, the winner's
// decompression timed (the guard a spill runs once per segment).
void BM_ChooseCodec(benchmark::State& state) {
  const auto& d = Data(KindOf(state));
  std::span<const uint8_t> segment(reinterpret_cast<const uint8_t*>(d.data()), d.size());
  uint32_t codec = 0;
  for (auto _ : state) codec = disk::ChooseCodec(segment, kLevel, true, 1e6).codec;
  state.SetLabel(std::string(DataKindName(KindOf(state))) + " -> codec " + std::to_string(codec));
}

void Kinds(benchmark::internal::Benchmark* b) {
  for (DataKind kind : AllDataKinds()) b->Arg(static_cast<int>(kind));
}

BENCHMARK(BM_Checksum)->Apply(Kinds);
// (kind, shuffle element bytes): zstd alone on every kind, and zstd over byte planes where the
// element size fits the data (2 for BF16, 4 for FP32).
void KindsAndShuffles(benchmark::internal::Benchmark* b) {
  for (DataKind kind : AllDataKinds()) b->Args({static_cast<int>(kind), 0});
  b->Args({static_cast<int>(DataKind::kBf16), 2});
  b->Args({static_cast<int>(DataKind::kFp32State), 4});
}

BENCHMARK(BM_ZstdCompress)->Apply(KindsAndShuffles)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ZstdDecompress)->Apply(KindsAndShuffles)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ChooseCodec)->Apply(Kinds)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tier::bench
