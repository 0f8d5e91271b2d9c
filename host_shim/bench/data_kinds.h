// data_kinds.h -- deterministic segment contents of the three kinds tier-bench measures:
// incompressible random bytes, BF16-like KV values and FP32-like recurrent state. The same
// (kind, seed, segment) always gives the same bytes, so a restore is checked byte for byte and a
// child process can regenerate what the parent spilled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tier::bench {

enum class DataKind { kRandom, kBf16, kFp32State };

// "random", "bf16", "fp32".
const char* DataKindName(DataKind kind);
// One-line description for reports ("incompressible (splitmix64)", ...).
const char* DataKindDescription(DataKind kind);
std::optional<DataKind> ParseDataKind(std::string_view name);
std::vector<DataKind> AllDataKinds();

// Fills `out` with the bytes of segment number `segment` of a checkpoint of `kind` made from
// `seed`. random: a splitmix64 stream (incompressible). bf16: BF16 values of a unit normal times a
// log-normal per-channel scale (head_dim 256), the shape zstd gains ~20% on. fp32: FP32 N(0, 0.05)
// (recurrent-state-like, full-entropy mantissas). The float kinds repeat a 16 MiB tile generated
// from the seed, started at a per-segment offset: each 1 MiB chunk (the provider's unit of
// compression) is a slice of a realistic distribution, and 3.5 GB fill in about a second. Pure;
// any thread.
void FillSegment(DataKind kind, uint64_t seed, uint32_t segment, std::span<std::byte> out);

// The first offset where `data` differs from FillSegment(kind, seed, segment), or nullopt.
std::optional<uint64_t> FirstMismatch(DataKind kind, uint64_t seed, uint32_t segment,
                                      std::span<const std::byte> data);

}  // namespace tier::bench
