#include "check.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <tier/host/format.h>
#include <tier/host/host_services.h>
#include "checkpoint_bytes.h"

namespace tier {
namespace {

uint64_t g_timeout_ns = ProviderInstance::kDefaultWaitNs;  // the deadline of this check's waits

struct CheckSegment {
  tier_segment_kind kind;
  uint32_t index;
  uint64_t length_bytes;
};

// Odd lengths on purpose: providers must not assume page- or block-multiples.
constexpr CheckSegment kSegments[] = {
    {TIER_SEGMENT_MAIN_KV, 0, 65536},      {TIER_SEGMENT_MAIN_KV, 1, 100003},
    {TIER_SEGMENT_SPEC_KV, 16, 4097},      {TIER_SEGMENT_STATE_IMAGE, 0, (1u << 20) + 3},
    {TIER_SEGMENT_HIDDEN_STATE, 0, 10240}, {TIER_SEGMENT_MANIFEST, 0, 200}};

class Checkpoint {
 public:
  explicit Checkpoint(const tier_key& key) : key_(key) {
    for (const CheckSegment& s : kSegments) {
      buffers_.emplace_back(s.length_bytes);
      sim::FillSegmentBytes(key, s.kind, s.index, buffers_.back());
    }
  }
  // Segment descriptors over the owned buffers (zeroed first when `for_restore`).
  std::vector<tier_segment> Segments(bool for_restore) {
    std::vector<tier_segment> segments;
    for (size_t i = 0; i < buffers_.size(); ++i) {
      if (for_restore) std::fill(buffers_[i].begin(), buffers_[i].end(), std::byte{0});
      segments.push_back(
          {kSegments[i].kind, kSegments[i].index, kSegments[i].length_bytes, buffers_[i].data()});
    }
    return segments;
  }
  // Index of the first segment whose bytes differ from the key's, or -1.
  int FirstMismatch() const {
    for (size_t i = 0; i < buffers_.size(); ++i) {
      if (!sim::SegmentBytesMatch(key_, kSegments[i].kind, kSegments[i].index, buffers_[i])) {
        return static_cast<int>(i);
      }
    }
    return -1;
  }
  uint64_t logical_bytes() const {
    uint64_t total = 0;
    for (const auto& b : buffers_) total += b.size();
    return total;
  }

 private:
  tier_key key_;
  std::vector<std::vector<std::byte>> buffers_;
};

class Reporter {
 public:
  explicit Reporter(std::ostream& out) : out_(out) {}
  void Step(const char* step, bool passed, const std::string& detail) {
    out_ << "  " << step << std::string(11 - std::min<size_t>(10, std::strlen(step)), ' ')
         << (passed ? "ok    " : "FAILED") << "  " << detail << "\n";
    failures_ += passed ? 0 : 1;
  }
  int failures() const { return failures_; }

 private:
  std::ostream& out_;
  int failures_ = 0;
};

bool SameTable(std::vector<tier_segment_info> got) {
  std::vector<tier_segment_info> want;
  for (const CheckSegment& s : kSegments) want.push_back({s.kind, s.index, s.length_bytes});
  auto order = [](const tier_segment_info& a, const tier_segment_info& b) {
    return a.kind != b.kind ? a.kind < b.kind : a.index < b.index;
  };
  std::sort(got.begin(), got.end(), order);
  std::sort(want.begin(), want.end(), order);
  return got.size() == want.size() &&
         std::equal(got.begin(), got.end(), want.begin(), [](const auto& a, const auto& b) {
           return a.kind == b.kind && a.index == b.index && a.length_bytes == b.length_bytes;
         });
}

// Times `key` is listed by enumerate, or -1 when enumerate itself failed (`*error` says why).
int CountListed(ProviderInstance& instance, const tier_key& key, bool* manifest_ok,
                std::string* error) {
  int listed = 0;
  *manifest_ok = false;
  Status walked = instance.Enumerate([&](const tier_entry& entry) {
    if (std::memcmp(entry.key.bytes, key.bytes, TIER_KEY_BYTES) != 0) return true;
    ++listed;
    *manifest_ok = entry.manifest != nullptr && entry.manifest_bytes == 200 &&
                   sim::SegmentBytesMatch(key, TIER_SEGMENT_MANIFEST, 0,
                                          {static_cast<const std::byte*>(entry.manifest), 200});
    return true;
  });
  if (!walked.ok()) {
    *error = "enumerate failed: " + walked.ToString();
    return -1;
  }
  return listed;
}

void CheckAbsentTier(ProviderInstance& instance, const tier_key& key, Checkpoint& checkpoint,
                     Reporter& report) {
  auto segments = checkpoint.Segments(false);
  Completion spill = instance.SpillAndWait(key, segments, g_timeout_ns);
  report.Step("spill", spill.status.code() == TIER_NO_SPACE,
              "declined: " + spill.status.ToString());
  auto stat = instance.Stat(key);
  report.Step("stat", stat.status().code() == TIER_NOT_FOUND, stat.status().ToString());
  auto plan = instance.PlanRestore(key, 3600ull * 1000000000ull);
  const bool skip = plan.ok() && plan.value().decision == TIER_DECISION_SKIP_TO_ROOT &&
                    plan.value().reason == TIER_REASON_MISS;
  report.Step("plan", skip,
              plan.ok() ? std::string(tier_decision_name(plan.value().decision)) + " (" +
                              tier_reason_name(plan.value().reason) + ")"
                        : plan.status().ToString());
  auto restore_segments = checkpoint.Segments(true);
  Completion restore = instance.RestoreAndWait(key, restore_segments, g_timeout_ns);
  report.Step("restore", restore.status.code() == TIER_NOT_FOUND, restore.status.ToString());
  bool manifest_ok = false;
  std::string error;
  const int listed = CountListed(instance, key, &manifest_ok, &error);
  report.Step("enumerate", listed == 0,
              listed < 0 ? error : "listed " + std::to_string(listed) + " time(s)");
  Status removed = instance.Remove(key);
  report.Step("remove", removed.code() == TIER_NOT_FOUND, removed.ToString());
}

void CheckStoringTier(ProviderInstance& instance, const tier_key& key, Checkpoint& checkpoint,
                      Reporter& report) {
  auto segments = checkpoint.Segments(false);
  Completion spill = instance.SpillAndWait(key, segments, g_timeout_ns);
  report.Step("spill", spill.status.ok() && spill.logical_bytes == checkpoint.logical_bytes(),
              spill.status.ok() ? std::to_string(segments.size()) + " segments, " +
                                      FormatBytes(spill.logical_bytes) + " logical, " +
                                      FormatBytes(spill.stored_bytes) + " stored, " +
                                      FormatDurationNs(spill.duration_ns)
                                : spill.status.ToString());
  if (!spill.status.ok()) return;

  auto stat = instance.Stat(key);
  const bool table_ok = stat.ok() && SameTable(stat.value().segments);
  report.Step("stat", table_ok,
              stat.ok() ? (table_ok ? "segment table matches" : "segment table differs")
                        : stat.status().ToString());

  auto plan = instance.PlanRestore(key, 3600ull * 1000000000ull);
  const bool plan_ok = plan.ok() && plan.value().decision == TIER_DECISION_RESTORE;
  report.Step("plan", plan_ok,
              plan.ok()
                  ? std::string(tier_decision_name(plan.value().decision)) + " (" +
                        tier_reason_name(plan.value().reason) + "), estimated " +
                        FormatDurationNs(plan.value().estimated_restore_ns) + " vs a 1 h prefill"
                  : plan.status().ToString());
  auto too_slow = instance.PlanRestore(key, 0);
  const bool cost_ok = too_slow.ok() && too_slow.value().decision == TIER_DECISION_SKIP_TO_ROOT &&
                       too_slow.value().reason == TIER_REASON_COST;
  report.Step("plan", cost_ok,
              too_slow.ok() ? std::string(tier_decision_name(too_slow.value().decision)) + " (" +
                                  tier_reason_name(too_slow.value().reason) + ") vs a 0 s prefill"
                            : too_slow.status().ToString());

  auto restore_segments = checkpoint.Segments(true);
  Completion restore = instance.RestoreAndWait(key, restore_segments, g_timeout_ns);
  const int mismatch = restore.status.ok() ? checkpoint.FirstMismatch() : -1;
  report.Step("restore", restore.status.ok() && mismatch < 0,
              !restore.status.ok() ? restore.status.ToString()
              : mismatch >= 0      ? "segment " + std::to_string(mismatch) + " differs"
                                   : "byte-exact, " + FormatDurationNs(restore.duration_ns));

  bool manifest_ok = false;
  std::string error;
  const int listed = CountListed(instance, key, &manifest_ok, &error);
  report.Step("enumerate", listed == 1 && manifest_ok,
              listed < 0 ? error
                         : "listed " + std::to_string(listed) + " time(s), manifest " +
                               (manifest_ok ? "intact" : "missing or different"));

  auto stats = instance.Stats();
  report.Step("stats", stats.ok() && stats.value().entries >= 1 && stats.value().used_bytes > 0,
              stats.ok() ? FormatBytes(stats.value().used_bytes) + " used of " +
                               FormatBytes(stats.value().capacity_bytes) + ", " +
                               std::to_string(stats.value().entries) + " entries"
                         : stats.status().ToString());

  Status removed = instance.Remove(key);
  auto after = instance.Stat(key);
  report.Step(
      "remove", removed.ok() && after.status().code() == TIER_NOT_FOUND,
      removed.ok() ? "stat now " + std::string(after.status().code_name()) : removed.ToString());
}

}  // namespace

bool RunProviderCheck(ProviderInstance& instance, std::ostream& out, uint64_t timeout_ns) {
  g_timeout_ns = timeout_ns;
  Reporter report(out);
  auto info = instance.Info();
  auto stats = instance.Stats();
  if (!info.ok() || !stats.ok()) {
    out << "check FAILED: info/stats: " << (info.ok() ? stats.status() : info.status()).ToString()
        << "\n";
    return false;
  }
  const tier_info& i = info.value();
  out << "  provider   " << (i.name ? i.name : "?") << " " << (i.version ? i.version : "?") << "\n"
      << "  ABI        " << instance.library().AbiDescription() << "\n"
      << "  io path    " << (i.io_path ? i.io_path : "?") << "\n"
      << "  capacity   " << FormatBytes(stats.value().capacity_bytes) << ", "
      << FormatBytes(stats.value().used_bytes) << " used, " << stats.value().entries
      << " entries\n";
  const bool absent =
      stats.value().capacity_bytes == 0 || (i.capabilities & TIER_CAP_ZERO_CAPACITY) != 0;
  const tier_key key = KeyFromText("tier-host --check " + std::to_string(::getpid()) + " " +
                                   std::to_string(MonotonicNs()));
  // The buffers are borrowed by the provider until each operation completes: one that never
  // completes keeps them (leaked below), and the instance is abandoned, never closed (close would
  // wait for the operation forever).
  auto checkpoint = std::make_unique<Checkpoint>(key);
  if (absent) {
    CheckAbsentTier(instance, key, *checkpoint, report);
  } else {
    CheckStoringTier(instance, key, *checkpoint, report);
  }
  if (instance.outstanding() > 0) {
    out << "check FAILED: " << instance.outstanding() << " operation(s) of "
        << instance.library().name() << " never completed; the instance is abandoned\n";
    (void)checkpoint.release();
    instance.Abandon();
    return false;
  }
  if (report.failures() > 0) {
    out << "check FAILED: " << report.failures() << " step(s) did not behave as "
        << instance.library().name() << " claims\n";
    return false;
  }
  out << "check passed: " << instance.library().name()
      << (absent ? " is an absent cold tier and declined every step cleanly"
                 : " stored, restored byte-exact and removed a checkpoint")
      << " (a smoke subset: tier-conformance checks every rule of the ABI)\n";
  return true;
}

}  // namespace tier
