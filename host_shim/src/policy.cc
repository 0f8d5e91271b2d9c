#include "policy.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace tier {
namespace {

// A superseded checkpoint keeps at least this much of its value: it still serves a branch, or
// its session if the child is lost, so it stays ordered among the superseded.
constexpr double kMinSupersededWeight = 1e-3;

struct LeverName {
  const char* name;
  bool ValueLevers::*field;
};
constexpr LeverName kLevers[] = {{"superseded", &ValueLevers::superseded},
                                 {"shared_use", &ValueLevers::shared_use},
                                 {"net_of_restore", &ValueLevers::net_of_restore},
                                 {"cold_admission", &ValueLevers::cold_admission},
                                 {"adaptive_age", &ValueLevers::adaptive_age}};

ValueLevers AllLevers(bool on) {
  ValueLevers levers;
  for (const LeverName& l : kLevers) levers.*l.field = on;
  return levers;
}

}  // namespace

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

Result<ValueLevers> ParseValueLevers(const std::string& text) {
  ValueLevers levers = AllLevers(false);
  std::stringstream words(text);
  std::string word;
  bool any = false;
  while (std::getline(words, word, ',')) {
    any = true;
    if (word == "all" || word == "none") {
      levers = AllLevers(word == "all");
      continue;
    }
    const bool off = !word.empty() && word[0] == '-';
    const std::string name = off ? word.substr(1) : word;
    const LeverName* found = nullptr;
    for (const LeverName& l : kLevers) {
      if (name == l.name) found = &l;
    }
    if (found == nullptr) {
      return Status::InvalidArgument("value lever '" + word +
                                     "': expected all, none, superseded, shared_use, "
                                     "net_of_restore, cold_admission or adaptive_age (- turns "
                                     "one off)");
    }
    levers.*found->field = !off;
  }
  if (!any) return Status::InvalidArgument("value levers '': expected all, none or a list");
  return levers;
}

std::string ValueLeversName(const ValueLevers& levers) {
  std::string out;
  for (const LeverName& l : kLevers) {
    if (!(levers.*l.field)) continue;
    if (!out.empty()) out += ",";
    out += l.name;
  }
  return out.empty() ? "none" : out;
}

double PolicyOrder::GdsfPriority(const CheckpointEntry& entry) const {
  const double cost = static_cast<double>(entry.prefill_saved_ns);
  const double size = static_cast<double>(std::max<uint64_t>(1, entry.logical_bytes));
  // Frequency counts the reference that brought it in: 1 at the seal, + 1 per reuse.
  return inflation_ + static_cast<double>(1 + entry.uses) * cost / size;
}

bool PolicyOrder::Superseded(const CheckpointEntry& entry) const {
  return policy_ == Policy::kValue && levers_.superseded && entry.superseded;
}

double PolicyOrder::half_life_s() const {
  if (!levers_.adaptive_age || reuse_gaps_ == 0) return prior_half_life_s_;
  // The prior counts as one observation, so a few early gaps do not swing it.
  return (prior_half_life_s_ + reuse_gap_sum_s_) / static_cast<double>(reuse_gaps_ + 1);
}

double PolicyOrder::Value(const CheckpointEntry& entry, uint64_t now_ns,
                          uint64_t restore_ns) const {
  switch (policy_) {
    case Policy::kLru:
      return static_cast<double>(entry.last_use_ns);
    case Policy::kGdsf:
      return entry.gdsf_priority;
    case Policy::kValue:
      break;
  }
  double saved_ns = static_cast<double>(entry.prefill_saved_ns);
  if (levers_.net_of_restore) saved_ns = std::max(0.0, saved_ns - static_cast<double>(restore_ns));
  double value = saved_ns / static_cast<double>(std::max<uint64_t>(1, entry.logical_bytes));
  if (levers_.shared_use) {
    // Every reuse so far, or every sibling a shared prefix (or a branch point) seeded.
    const bool seeds = entry.shared_prefix || entry.children >= 2;
    const uint64_t seeded = seeds ? entry.children : 0;
    value *= 1.0 + static_cast<double>(std::max(entry.uses, seeded));
  }
  const double age_s =
      now_ns > entry.last_use_ns ? static_cast<double>(now_ns - entry.last_use_ns) / 1e9 : 0.0;
  value /= 1.0 + age_s / half_life_s();
  if (Superseded(entry)) value *= SupersededWeight();
  return value;
}

double PolicyOrder::SupersededWeight() const {
  // Laplace-smoothed rates, so that the weight starts at 1 and moves with evidence.
  const double live = (static_cast<double>(live_uses_) + 1) / (static_cast<double>(inserted_) + 1);
  const double sup =
      (static_cast<double>(superseded_uses_) + 1) / (static_cast<double>(superseded_) + 1);
  return std::clamp(sup / live, kMinSupersededWeight, 1.0);
}

void PolicyOrder::OnSuperseded(const CheckpointEntry&) {
  ++superseded_;
}

void PolicyOrder::OnInsert(CheckpointEntry* entry, uint64_t now_ns) {
  ++inserted_;
  entry->last_use_ns = std::max(entry->last_use_ns, now_ns);
  entry->gdsf_priority = GdsfPriority(*entry);
}

void PolicyOrder::OnUse(CheckpointEntry* entry, uint64_t now_ns) {
  if (entry->last_use_ns > 0 && now_ns > entry->last_use_ns) {
    reuse_gap_sum_s_ += static_cast<double>(now_ns - entry->last_use_ns) / 1e9;
    ++reuse_gaps_;
  }
  ++entry->uses;
  if (entry->superseded) {
    ++superseded_uses_;
  } else {
    ++live_uses_;
  }
  entry->last_use_ns = std::max(entry->last_use_ns, now_ns);
  entry->gdsf_priority = GdsfPriority(*entry);
}

void PolicyOrder::OnTouch(CheckpointEntry* entry, uint64_t now_ns) {
  entry->last_use_ns = std::max(entry->last_use_ns, now_ns);
  entry->gdsf_priority = GdsfPriority(*entry);
}

void PolicyOrder::OnLeave(const CheckpointEntry& entry) {
  if (policy_ == Policy::kGdsf) inflation_ = std::max(inflation_, entry.gdsf_priority);
}

}  // namespace tier
