#include <tier/host/cost_model.h>

#include <algorithm>

namespace tier {

uint64_t CostModel::PrefillNs(uint64_t cached_tokens, uint64_t new_tokens) const {
  if (new_tokens == 0) return 0;
  const double b = static_cast<double>(cached_tokens);
  const double s = static_cast<double>(new_tokens);
  const double chunks =
      static_cast<double>((new_tokens + p_.prefill_chunk_tokens - 1) / p_.prefill_chunk_tokens);
  const double pairs = b * s + s * (s + 1) / 2;
  return static_cast<uint64_t>(p_.prefill_chunk_ns * chunks + p_.prefill_token_ns * s +
                               p_.attention_pair_ns * pairs);
}

uint64_t CostModel::DecodeNs(uint64_t output_tokens) const {
  return static_cast<uint64_t>(p_.decode_token_ns * static_cast<double>(output_tokens));
}

uint64_t CostModel::TransferNs(uint64_t bytes, uint64_t ops, double ns_per_byte) const {
  const double per_op = p_.transfer_batch_ns + static_cast<double>(ops) * p_.transfer_op_ns;
  return static_cast<uint64_t>(std::max(per_op, static_cast<double>(bytes) * ns_per_byte));
}

uint64_t CostModel::DeviceToHostNs(uint64_t bytes, uint64_t ops) const {
  return TransferNs(bytes, ops, p_.d2h_ns_per_byte);
}

uint64_t CostModel::HostToDeviceNs(uint64_t bytes, uint64_t ops) const {
  return TransferNs(bytes, ops, p_.h2d_ns_per_byte);
}

}  // namespace tier
