// cost_model.h -- NInfer's cost formulas (BRIEF section 3) over a ModelProfile's coefficients.
#pragma once

#include <cstdint>

#include <tier/host/model_profile.h>

namespace tier {

class CostModel {
 public:
  explicit CostModel(const ModelProfile& profile) : p_(profile) {}

  // Prefill of `new_tokens` on top of `cached_tokens` already in the KV cache:
  // chunk_ns * chunks + token_ns * S + attention_pair_ns * (B*S + S(S+1)/2).
  uint64_t PrefillNs(uint64_t cached_tokens, uint64_t new_tokens) const;
  // What reusing a checkpoint of `tokens` saves: the prefill of those tokens from the root.
  uint64_t RootPrefillNs(uint64_t tokens) const { return PrefillNs(0, tokens); }
  uint64_t DecodeNs(uint64_t output_tokens) const;
  // max(batch_ns + ops * op_ns, bytes * ns_per_byte), device-to-host or host-to-device.
  uint64_t DeviceToHostNs(uint64_t bytes, uint64_t ops) const;
  uint64_t HostToDeviceNs(uint64_t bytes, uint64_t ops) const;

  const ModelProfile& profile() const { return p_; }

 private:
  uint64_t TransferNs(uint64_t bytes, uint64_t ops, double ns_per_byte) const;
  ModelProfile p_;
};

}  // namespace tier
