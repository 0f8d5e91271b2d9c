// model_profile.h -- a model/GPU profile: the checkpoint layout (KV bytes per token, StateImage
// parts) and the cost coefficients of NInfer's prefill and transfer formulas, loaded from JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <tier/status.h>
#include "tier_provider.h"

namespace tier {

struct StatePart {
  std::string name;
  uint64_t bytes = 0;
};

struct ModelProfile {
  std::string name;      // e.g. "qwen3.8-27b-int8-rtx5090"
  std::string model;     // "Qwen3.8-27B"
  std::string gpu;       // "RTX 5090"
  std::string kv_dtype;  // "int8-g64"
  uint32_t tokens_per_page = 64;
  uint32_t full_attention_layers = 16;
  uint32_t kv_heads = 4;
  uint32_t head_dim = 256;
  uint64_t kv_bytes_per_token = 0;     // all full-attention layers together
  uint32_t mtp_layers = 0;             // speculative (MTP) layers, each the size of one KV layer
  std::vector<StatePart> state_image;  // recurrent state, conv history, DFlash rings
  uint64_t hidden_state_bytes = 0;
  // Prefill: chunk_ns * ceil(S / chunk_tokens) + token_ns * S + pair_ns * (B*S + S(S+1)/2).
  uint32_t prefill_chunk_tokens = 2048;
  double prefill_chunk_ns = 0;
  double prefill_token_ns = 0;
  double attention_pair_ns = 0;
  double decode_token_ns = 0;  // per generated token per lane
  // Transfer: max(batch_ns + ops * op_ns, bytes * ns_per_byte).
  double transfer_batch_ns = 0;
  double transfer_op_ns = 0;
  double d2h_ns_per_byte = 0;
  double h2d_ns_per_byte = 0;

  // KV bytes of one full-attention layer for `tokens` (rounded up to whole pages).
  uint64_t LayerKvBytes(uint64_t tokens) const;
  // Bytes of the StateImage parts plus the hidden state (independent of the token count).
  uint64_t FixedStateBytes() const;
  // A checkpoint's logical bytes at `tokens` (KV + MTP KV + StateImage + hidden).
  uint64_t CheckpointBytes(uint64_t tokens) const;
  // "qwen3.8-27b-int8-rtx5090/kv=int8-g64/L16xH4xD256/page64": what a namespace must pin.
  std::string LayoutFingerprint() const;
};

// Loads a profile from a JSON file; INVALID_ARGUMENT naming the file and the field otherwise.
Result<ModelProfile> LoadModelProfile(const std::string& path);
// Resolves NAME (a shipped profile, e.g. "qwen3.8-27b-int8-rtx5090") or PATH (contains '/' or
// ends in .json) to a file: $TIER_PROFILE_PATH, <exe>/../share/tier/profiles, the source tree.
std::string ResolveProfilePath(const std::string& name_or_path);
// Names of the shipped profiles found by ResolveProfilePath's search.
std::vector<std::string> ShippedProfileNames();

}  // namespace tier
