// close_flush.cc -- what Close() writes before it lets go: Host copies that no cold copy backs,
// to a persistent cold tier, most valuable first, bounded by close_timeout_ns. A restart then
// re-adopts what the server parked last instead of losing its newest turns (issue 20).
#include <tier/host/identity.h>
#include <tier/host/log.h>

#include <algorithm>
#include <cstring>

#include "host_impl.h"

namespace tier {
namespace {

constexpr uint32_t kCloseSpillsInFlight = 2;    // the serial lane runs them one by one anyway
constexpr uint64_t kCloseFlushMaxFailures = 3;  // a full or failing disk: stop trying

}  // namespace

bool Host::Impl::FlushesAtClose() const {
  return options_.flush_host_at_close && cold_ != nullptr && cold_capacity_bytes_ > 0 &&
         (provider_info_.capabilities & TIER_CAP_PERSISTENT) != 0;
}

std::vector<tier_key> Host::Impl::CloseFlushOrder() const {
  struct Candidate {
    double value;
    tier_key key;
  };
  std::vector<Candidate> candidates;
  for (CheckpointEntry* e : catalog_.Entries()) {
    if (!e->in(kHost) || e->in(kCold) || e->ops > 0 || e->sealing || e->doomed || e->remote) {
      continue;
    }
    if (ColdAdmissionFor(*e) != ColdAdmission::kAdmitted) continue;  // unlikely to come back
    candidates.push_back({ValueIn(*e, kCold), e->key});
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.value != b.value) return a.value > b.value;
    return std::memcmp(a.key.bytes, b.key.bytes, TIER_KEY_BYTES) < 0;
  });
  std::vector<tier_key> keys;
  for (const Candidate& c : candidates) keys.push_back(c.key);
  return keys;
}

void Host::Impl::StartCloseFlush() {
  if (!FlushesAtClose()) return;
  close_flush_.order = CloseFlushOrder();
  close_flush_.failures_before = stats_.spill_failures;
  close_flush_.started_ns = Now();
}

void Host::Impl::ContinueCloseFlush() {
  CloseFlush& f = close_flush_;
  while (f.next < f.order.size() && spills_in_flight_ < kCloseSpillsInFlight) {
    if (stats_.spill_failures - f.failures_before >= kCloseFlushMaxFailures) {
      f.next = f.order.size();  // the rest are left
      break;
    }
    CheckpointEntry* e = catalog_.Find(f.order[f.next++]);
    if (e == nullptr || !e->in(kHost) || e->in(kCold) || e->ops > 0 || e->doomed) continue;
    const uint64_t need = ColdBytesNeeded(*e);
    if (need > cold_capacity_bytes_ || !MakeRoomOnCold(need, ValueIn(*e, kCold))) {
      ++f.no_room;
      continue;
    }
    StartSpill(e);
    f.started.push_back(e->key);
  }
}

bool Host::Impl::CloseFlushing() const {
  return close_flush_.next < close_flush_.order.size();
}

void Host::Impl::FinishCloseFlush() {
  const CloseFlush& f = close_flush_;
  if (f.order.empty()) return;
  // Only the flush's own spills count (pressure's, started before close, may land meanwhile).
  uint64_t written = 0;
  for (const tier_key& key : f.started) {
    const CheckpointEntry* e = catalog_.Find(key);
    if (e != nullptr && e->in(kCold)) ++written;
  }
  const uint64_t failed = f.started.size() - written;  // failed, or still writing at the deadline
  const uint64_t left = f.order.size() - f.started.size();
  server_metrics_->CloseFlush("written", written);
  server_metrics_->CloseFlush("failed", failed);
  server_metrics_->CloseFlush("left", left);
  Log(left > 0 || failed > 0 ? TIER_LOG_WARN : TIER_LOG_INFO,
      "host: close wrote " + std::to_string(written) + " of " + std::to_string(f.order.size()) +
          " Host cop" + (f.order.size() == 1 ? "y" : "ies") + " to the " + provider_name_ +
          " cold tier in " + std::to_string((Now() - f.started_ns) / 1000000) + " ms" +
          (failed > 0 ? "; " + std::to_string(failed) + " failed or unfinished at the deadline"
                      : std::string()) +
          (left > 0 ? "; " + std::to_string(left) + " left (" + std::to_string(f.no_room) +
                          " without room in Cold, the rest past close_timeout_ns or after "
                          "repeated failures)"
                    : std::string()));
}

}  // namespace tier
