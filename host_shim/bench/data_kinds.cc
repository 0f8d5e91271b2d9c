#include "data_kinds.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <utility>

namespace tier::bench {
namespace {

constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ull;
constexpr uint64_t kTileBytes = 16ull << 20;  // float kinds repeat this much
constexpr uint64_t kTileAlign = 512;          // keeps BF16 channels (256 x 2 B) in place
constexpr uint64_t kCompareBytes = 1ull << 20;

uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t SegmentSeed(DataKind kind, uint64_t seed, uint32_t segment) {
  return Mix(seed * 0x100000001b3ull + static_cast<uint64_t>(kind) * 0x51ull + segment + 1);
}

// Random: splitmix64 words, random access by word index (counter-based).
void FillRandom(uint64_t seg_seed, uint64_t offset, std::span<std::byte> out) {
  uint64_t word = offset / 8;
  size_t skip = offset % 8, i = 0;
  while (i < out.size()) {
    const uint64_t v = Mix(seg_seed + (word + 1) * kGamma);
    unsigned char bytes[8];
    std::memcpy(bytes, &v, 8);
    if (skip == 0 && i + 8 <= out.size()) {
      std::memcpy(out.data() + i, bytes, 8);
      i += 8;
    } else {
      const size_t n = std::min<size_t>(8 - skip, out.size() - i);
      std::memcpy(out.data() + i, bytes + skip, n);
      i += n;
      skip = 0;
    }
    ++word;
  }
}

uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

std::vector<std::byte> MakeTile(DataKind kind, uint64_t seed) {
  std::vector<std::byte> tile(kTileBytes);
  std::mt19937_64 rng(seed ^ (static_cast<uint64_t>(kind) << 56));
  std::normal_distribution<float> unit(0.0f, 1.0f);
  if (kind == DataKind::kBf16) {
    // K/V-like: per-channel log-normal scale (some outlier channels) times a unit normal.
    constexpr size_t kHeadDim = 256;
    std::lognormal_distribution<float> channel(-1.0f, 0.7f);
    float scale[kHeadDim];
    for (float& s : scale) s = channel(rng);
    auto* out = reinterpret_cast<uint16_t*>(tile.data());
    for (size_t i = 0; i < kTileBytes / 2; ++i) out[i] = ToBf16(unit(rng) * scale[i % kHeadDim]);
  } else {
    auto* out = reinterpret_cast<float*>(tile.data());
    for (size_t i = 0; i < kTileBytes / 4; ++i) out[i] = 0.05f * unit(rng);
  }
  return tile;
}

// Tiles are made once per (kind, seed) and shared by every thread.
const std::vector<std::byte>& Tile(DataKind kind, uint64_t seed) {
  static std::mutex mu;
  static std::map<std::pair<int, uint64_t>, std::unique_ptr<std::vector<std::byte>>> tiles;
  std::lock_guard lock(mu);
  auto& slot = tiles[{static_cast<int>(kind), seed}];
  if (!slot) slot = std::make_unique<std::vector<std::byte>>(MakeTile(kind, seed));
  return *slot;
}

void FillTiled(const std::vector<std::byte>& tile, uint64_t seg_seed, uint64_t offset,
               std::span<std::byte> out) {
  const uint64_t start = (seg_seed % (kTileBytes / kTileAlign)) * kTileAlign;
  uint64_t pos = (start + offset) % kTileBytes;
  size_t i = 0;
  while (i < out.size()) {
    const size_t n = std::min<uint64_t>(kTileBytes - pos, out.size() - i);
    std::memcpy(out.data() + i, tile.data() + pos, n);
    i += n;
    pos = 0;
  }
}

void FillRange(DataKind kind, uint64_t seed, uint32_t segment, uint64_t offset,
               std::span<std::byte> out) {
  const uint64_t seg_seed = SegmentSeed(kind, seed, segment);
  if (kind == DataKind::kRandom) {
    FillRandom(seg_seed, offset, out);
  } else {
    FillTiled(Tile(kind, seed), seg_seed, offset, out);
  }
}

}  // namespace

const char* DataKindName(DataKind kind) {
  switch (kind) {
    case DataKind::kRandom:
      return "random";
    case DataKind::kBf16:
      return "bf16";
    case DataKind::kFp32State:
      return "fp32";
  }
  return "unknown";
}

const char* DataKindDescription(DataKind kind) {
  switch (kind) {
    case DataKind::kRandom:
      return "incompressible (splitmix64)";
    case DataKind::kBf16:
      return "BF16 K/V-like: unit normal x log-normal channel scale";
    case DataKind::kFp32State:
      return "FP32 recurrent-state-like: N(0, 0.05)";
  }
  return "unknown";
}

std::optional<DataKind> ParseDataKind(std::string_view name) {
  for (DataKind kind : AllDataKinds()) {
    if (name == DataKindName(kind)) return kind;
  }
  return std::nullopt;
}

std::vector<DataKind> AllDataKinds() {
  return {DataKind::kRandom, DataKind::kBf16, DataKind::kFp32State};
}

void FillSegment(DataKind kind, uint64_t seed, uint32_t segment, std::span<std::byte> out) {
  FillRange(kind, seed, segment, 0, out);
}

std::optional<uint64_t> FirstMismatch(DataKind kind, uint64_t seed, uint32_t segment,
                                      std::span<const std::byte> data) {
  std::vector<std::byte> expected(std::min<uint64_t>(kCompareBytes, data.size()));
  for (uint64_t offset = 0; offset < data.size(); offset += kCompareBytes) {
    const size_t n = std::min<uint64_t>(kCompareBytes, data.size() - offset);
    FillRange(kind, seed, segment, offset, std::span(expected).first(n));
    if (std::memcmp(expected.data(), data.data() + offset, n) != 0) {
      for (size_t i = 0; i < n; ++i) {
        if (expected[i] != data[offset + i]) return offset + i;
      }
    }
  }
  return std::nullopt;
}

}  // namespace tier::bench
