#include "policy.h"

#include <algorithm>

namespace tier {

const char* PolicyName(Policy policy) {
  switch (policy) {
    case Policy::kValue:
      return "value";
    case Policy::kLru:
      return "lru";
    case Policy::kGdsf:
      return "gdsf";
  }
  return "unknown";
}

Result<Policy> ParsePolicy(const std::string& text) {
  if (text == "value") return Policy::kValue;
  if (text == "lru") return Policy::kLru;
  if (text == "gdsf") return Policy::kGdsf;
  return Status::InvalidArgument("policy '" + text + "': expected value, lru or gdsf");
}

double PolicyOrder::GdsfPriority(const CheckpointEntry& entry) const {
  const double cost = static_cast<double>(entry.prefill_saved_ns);
  const double size = static_cast<double>(std::max<uint64_t>(1, entry.logical_bytes));
  return inflation_ + static_cast<double>(std::max<uint64_t>(1, entry.uses)) * cost / size;
}

double PolicyOrder::Value(const CheckpointEntry& entry, uint64_t now_ns) const {
  switch (policy_) {
    case Policy::kLru:
      return static_cast<double>(entry.last_use_ns);
    case Policy::kGdsf:
      return entry.gdsf_priority;
    case Policy::kValue:
      break;
  }
  const double per_byte = static_cast<double>(entry.prefill_saved_ns) /
                          static_cast<double>(std::max<uint64_t>(1, entry.logical_bytes));
  const double age_s =
      now_ns > entry.last_use_ns ? static_cast<double>(now_ns - entry.last_use_ns) / 1e9 : 0.0;
  return per_byte / (1.0 + age_s / half_life_s_);
}

void PolicyOrder::OnInsert(CheckpointEntry* entry, uint64_t now_ns) {
  entry->last_use_ns = std::max(entry->last_use_ns, now_ns);
  entry->gdsf_priority = GdsfPriority(*entry);
}

void PolicyOrder::OnUse(CheckpointEntry* entry, uint64_t now_ns) {
  ++entry->uses;
  entry->last_use_ns = std::max(entry->last_use_ns, now_ns);
  entry->gdsf_priority = GdsfPriority(*entry);
}

void PolicyOrder::OnLeave(const CheckpointEntry& entry) {
  if (policy_ == Policy::kGdsf) inflation_ = std::max(inflation_, entry.gdsf_priority);
}

}  // namespace tier
