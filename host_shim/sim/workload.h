// workload.h -- requests for a replay: what arrives when, what prefix it carries (as block content
// ids), how much it generates, and which checkpoint the server seals when it finishes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <tier/status.h>

namespace tier::sim {

struct Request {
  uint64_t arrival_ns = 0;      // open loop: when it arrives (ignored when `after` is set)
  std::optional<size_t> after;  // closed loop: index of the request whose completion releases it
  uint64_t think_ns = 0;        // ... plus this much think/tool time
  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  std::vector<uint64_t> blocks;  // content ids of the prompt's blocks (the last may be partial)
  std::vector<uint64_t> seal_blocks;  // identity of the checkpoint sealed when it completes
  uint32_t session = 0;               // for reports (0 when unknown)
};

struct Workload {
  std::string name;
  uint32_t block_tokens = 512;  // tokens per block id
  std::vector<Request> requests;
};

struct AgentsWorkloadOptions {
  uint32_t sessions = 12;
  uint64_t seed = 1;
  uint64_t min_history_tokens = 80000;  // each session grows to a target in [min, max]
  uint64_t max_history_tokens = 120000;
  double mean_think_s = 20;             // exponential think/tool time between turns
  double session_start_spread_s = 120;  // sessions start uniformly within this window
};

// Agent sessions (Hermes/OpenCode/Pi-like): three shared system prefixes of 8k, 16k and 30k
// tokens, histories growing turn by turn to 80-120k tokens, think times between turns (closed
// loop: a turn is sent when the previous answer arrived plus the think time). Deterministic for a
// seed.
Workload GenerateAgentsWorkload(const AgentsWorkloadOptions& options);

// Bounds of a Mooncake trace (checked by LoadMooncakeTrace, listed in --help).
constexpr size_t kMaxTraceLineBytes = 1 << 20;       // one request per line, 1 MiB at most
constexpr uint64_t kMaxTraceInputTokens = 4194304;   // input_length: 1 to 4 Mi tokens
constexpr uint64_t kMaxTraceOutputTokens = 4194304;  // output_length: 0 to 4 Mi tokens
constexpr size_t kMaxTraceRequests = 10000000;       // lines with a request
constexpr uint64_t kMaxTraceHashIds = 50000000;      // hash ids over the whole trace

// A Mooncake-format JSONL trace (timestamp ms, input_length, output_length, hash_ids of
// 512-token blocks; other fields are ignored). `time_scale` stretches arrival times (2 = half the
// arrival rate). Each request seals a checkpoint of its full blocks. INVALID_ARGUMENT naming the
// file, the line, the field and the value as written otherwise (a negative, fractional or
// out-of-range number, a hash id beyond 64 bits, a line over the bound); a directory or a device
// as the trace is refused as such. The trace may be a pipe.
Result<Workload> LoadMooncakeTrace(const std::string& path, double time_scale = 1.0);

}  // namespace tier::sim
