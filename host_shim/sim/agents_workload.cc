#include <algorithm>
#include <cmath>
#include <random>

#include "workload.h"

namespace tier::sim {
namespace {

constexpr uint64_t kBlockTokens = 512;

struct SystemPrompt {
  const char* agent;
  uint64_t tokens;
};
// The three agent frameworks' system heads (BRIEF: one 8-30k stable prefix seeds many sessions).
constexpr SystemPrompt kSystemPrompts[] = {{"pi", 8192}, {"hermes", 16384}, {"opencode", 30000}};

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9e3779b97f4a7c15ull + b + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Content id of block `b` of a session's append-only token stream. A block wholly inside the
// system prompt is shared by every session of that agent; any other block is the session's own.
// A partial last block gets an id of its own (its content differs from the block it becomes).
uint64_t BlockId(uint64_t seed, uint32_t agent, uint64_t system_tokens, uint32_t session,
                 uint64_t block, uint64_t tokens_in_block) {
  if ((block + 1) * kBlockTokens <= system_tokens) return Mix(Mix(seed, 1000 + agent), block);
  const uint64_t id = Mix(Mix(seed, 2000000 + session), block);
  return tokens_in_block == kBlockTokens ? id : Mix(id, tokens_in_block);
}

std::vector<uint64_t> Blocks(uint64_t seed, uint32_t agent, uint64_t system_tokens,
                             uint32_t session, uint64_t tokens, bool whole_blocks_only) {
  std::vector<uint64_t> blocks;
  const uint64_t full = tokens / kBlockTokens;
  for (uint64_t b = 0; b < full; ++b) {
    blocks.push_back(BlockId(seed, agent, system_tokens, session, b, kBlockTokens));
  }
  if (!whole_blocks_only && tokens % kBlockTokens != 0) {
    blocks.push_back(BlockId(seed, agent, system_tokens, session, full, tokens % kBlockTokens));
  }
  return blocks;
}

}  // namespace

Workload GenerateAgentsWorkload(const AgentsWorkloadOptions& options) {
  Workload workload;
  workload.name = "agents";
  workload.block_tokens = kBlockTokens;
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<uint64_t> user_tokens(2000, 12000);
  std::uniform_int_distribution<uint64_t> output_tokens(200, 1500);
  std::uniform_int_distribution<uint64_t> target(
      options.min_history_tokens, std::max(options.min_history_tokens, options.max_history_tokens));
  std::exponential_distribution<double> think(1.0 / std::max(0.001, options.mean_think_s));
  std::uniform_real_distribution<double> start(0, options.session_start_spread_s);
  for (uint32_t s = 0; s < options.sessions; ++s) {
    const uint32_t session = s + 1;
    const uint32_t agent = s % 3;
    const uint64_t system_tokens = kSystemPrompts[agent].tokens;
    const uint64_t goal = target(rng);
    uint64_t history = system_tokens;  // tokens before this turn's new input
    std::optional<size_t> previous;
    const uint64_t start_ns = static_cast<uint64_t>(start(rng) * 1e9);
    while (history < goal) {
      Request r;
      r.session = session;
      r.input_tokens = history + user_tokens(rng);
      r.output_tokens = output_tokens(rng);
      r.blocks = Blocks(options.seed, agent, system_tokens, session, r.input_tokens, false);
      // The answer is appended to the history: the sealed state covers prompt and answer.
      r.seal_blocks = Blocks(options.seed, agent, system_tokens, session,
                             r.input_tokens + r.output_tokens, true);
      if (previous) {
        r.after = previous;
        r.think_ns = static_cast<uint64_t>(think(rng) * 1e9);
      } else {
        r.arrival_ns = start_ns;
      }
      history = r.input_tokens + r.output_tokens;
      previous = workload.requests.size();
      workload.requests.push_back(std::move(r));
    }
  }
  return workload;
}

}  // namespace tier::sim
