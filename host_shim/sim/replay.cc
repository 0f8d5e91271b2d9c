#include "replay.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <queue>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "catalog.h"
#include <tier/host/format.h>

namespace tier {
namespace {

enum class EventType { kCompletion = 0, kArrival = 1 };  // completions first at equal times

struct Event {
  uint64_t time_ns;
  EventType type;
  size_t request;
  bool operator>(const Event& other) const {
    if (time_ns != other.time_ns) return time_ns > other.time_ns;
    if (type != other.type) return type > other.type;
    return request > other.request;
  }
};

// What a request in service holds until it completes.
struct InService {
  CheckpointEntry* reused = nullptr;  // pinned by the admission
  size_t shared_blocks = 0;           // publish blocks[0..shared_blocks) as a shared prefix
};

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(rank, values.size() - 1)];
}

class Engine {
 public:
  Engine(const Workload& workload, Planner& planner, const CostModel& cost, ServerMetrics* metrics,
         ColdTier* cold, const ReplayOptions& options)
      : w_(workload), planner_(planner), cost_(cost), metrics_(metrics), cold_(cold), o_(options) {
    successors_.resize(w_.requests.size());
    for (size_t i = 0; i < w_.requests.size(); ++i) {
      if (w_.requests[i].after) successors_[*w_.requests[i].after].push_back(i);
    }
    in_service_.resize(w_.requests.size());
  }

  ReplayReport Run() {
    const auto wall_start = std::chrono::steady_clock::now();
    last_progress_ = wall_start;
    for (size_t i = 0; i < w_.requests.size(); ++i) {
      if (!w_.requests[i].after) events_.push({w_.requests[i].arrival_ns, EventType::kArrival, i});
    }
    uint32_t busy = 0;
    while (!events_.empty()) {
      const Event event = events_.top();
      events_.pop();
      now_ns_ = event.time_ns;
      if (event.type == EventType::kArrival) {
        arrival_ns_[event.request] = event.time_ns;
        queue_.push_back(event.request);
      } else {
        --busy;
        Complete(event.request);
      }
      while (busy < std::max<uint32_t>(1, o_.max_concurrency) && !queue_.empty()) {
        const size_t next = queue_.front();
        queue_.pop_front();
        ++busy;
        Start(next);
      }
      Progress(false);
    }
    Progress(true);
    report_.workload = w_.name;
    report_.requests = w_.requests.size();
    report_.ttft_p50_s = Percentile(ttfts_, 0.50);
    report_.ttft_p99_s = Percentile(ttfts_, 0.99);
    report_.virtual_seconds = static_cast<double>(now_ns_) / 1e9;
    report_.prefill_seconds_saved =
        report_.prefill_seconds_no_reuse - report_.prefill_seconds - report_.admission_seconds;
    report_.totals = planner_.totals();
    report_.restore_exact = report_.totals.mismatched_restores == 0;
    report_.provider_calls_outside_admission =
        cold_ != nullptr ? cold_->calls_in(IoPhase::kIdle) : 0;
    report_.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    return report_;
  }

 private:
  void Start(size_t index) {
    const Request& r = w_.requests[index];
    const uint64_t arrival = arrival_ns_.count(index) ? arrival_ns_[index] : r.arrival_ns;
    // Admission: the only place (with pressure) where provider I/O may happen.
    AdmissionResult admission = planner_.Admit(r.blocks, now_ns_);
    switch (admission.outcome) {
      case Outcome::kDeviceHit:
        ++report_.device_hits;
        break;
      case Outcome::kHostRestore:
        ++report_.host_restores;
        break;
      case Outcome::kColdRestore:
        ++report_.cold_restores;
        break;
      case Outcome::kRootPrefill:
        ++report_.root_prefills;
        ++report_.root_prefills_by_reason[RootReasonName(admission.root_reason)];
        if (admission.root_reason != RootReason::kNoCheckpoint) {
          ++report_.skip_to_root[RootReasonName(admission.root_reason)];
        }
        break;
    }
    const uint64_t cached = std::min(admission.cached_tokens, r.input_tokens);
    const uint64_t prefill_ns = cost_.PrefillNs(cached, r.input_tokens - cached);
    const uint64_t no_reuse_ns = cost_.PrefillNs(0, r.input_tokens);
    report_.prefill_seconds += static_cast<double>(prefill_ns) / 1e9;
    report_.prefill_seconds_no_reuse += static_cast<double>(no_reuse_ns) / 1e9;
    report_.admission_seconds += static_cast<double>(admission.admission_ns) / 1e9;
    const double saved_s = (static_cast<double>(no_reuse_ns) -
                            static_cast<double>(prefill_ns + admission.admission_ns)) /
                           1e9;
    metrics_->PrefillSavedSeconds(std::max(0.0, saved_s));
    const uint64_t first_token_ns = now_ns_ + admission.admission_ns + prefill_ns;
    const double ttft_s = static_cast<double>(first_token_ns - arrival) / 1e9;
    ttfts_.push_back(ttft_s);
    metrics_->Ttft(ttft_s);

    // A prefix that an earlier request carried too, longer than what was reused and shorter than
    // this request's own checkpoint, is published as a shared prefix when it completes.
    const std::vector<uint64_t> hashes = PrefixHashes(r.seal_blocks);
    size_t shared = 0;
    for (size_t k = hashes.size(); k > 0; --k) {
      if (seen_prefixes_.count(hashes[k - 1]) != 0) {
        shared = k;
        break;
      }
    }
    for (uint64_t h : hashes) seen_prefixes_.insert(h);
    const uint64_t cached_blocks = admission.cached_tokens / w_.block_tokens;
    InService& service = in_service_[index];
    service.reused = admission.entry;
    if (shared >= o_.min_shared_blocks && shared > cached_blocks && shared < r.seal_blocks.size()) {
      service.shared_blocks = shared;
    }
    events_.push({first_token_ns + cost_.DecodeNs(r.output_tokens), EventType::kCompletion, index});
  }

  void Complete(size_t index) {
    const Request& r = w_.requests[index];
    InService& service = in_service_[index];
    if (service.shared_blocks > 0) {
      std::span<const uint64_t> prefix(r.seal_blocks.data(), service.shared_blocks);
      if (planner_.Seal(prefix, service.shared_blocks * w_.block_tokens, true, now_ns_)) {
        ++report_.shared_prefixes_published;
      }
    }
    if (!r.seal_blocks.empty()) {
      const uint64_t tokens = r.seal_blocks.size() * w_.block_tokens;
      if (planner_.Seal(r.seal_blocks, tokens, false, now_ns_)) ++report_.checkpoints_sealed;
    }
    planner_.Release(service.reused);
    service.reused = nullptr;
    ++completed_;
    for (size_t next : successors_[index]) {
      events_.push({now_ns_ + w_.requests[next].think_ns, EventType::kArrival, next});
    }
  }

  void Progress(bool final) {
    if (!o_.progress) return;
    const auto now = std::chrono::steady_clock::now();
    if (!final && now - last_progress_ < std::chrono::seconds(1)) return;
    last_progress_ = now;
    const uint64_t total = w_.requests.size();
    std::fprintf(
        stderr,
        "\rreplay %s: %llu/%llu requests (%3.0f%%), virtual %s, device hits %llu, host "
        "%llu, cold %llu, root %llu   %s",
        o_.label.c_str(), static_cast<unsigned long long>(completed_),
        static_cast<unsigned long long>(total),
        total ? 100.0 * static_cast<double>(completed_) / static_cast<double>(total) : 100.0,
        FormatDurationNs(now_ns_).c_str(), static_cast<unsigned long long>(report_.device_hits),
        static_cast<unsigned long long>(report_.host_restores),
        static_cast<unsigned long long>(report_.cold_restores),
        static_cast<unsigned long long>(report_.root_prefills), final ? "\n" : "");
    std::fflush(stderr);
  }

  const Workload& w_;
  Planner& planner_;
  const CostModel& cost_;
  ServerMetrics* metrics_;
  ColdTier* cold_;
  ReplayOptions o_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::deque<size_t> queue_;
  std::vector<std::vector<size_t>> successors_;
  std::vector<InService> in_service_;
  std::unordered_map<size_t, uint64_t> arrival_ns_;
  std::unordered_set<uint64_t> seen_prefixes_;
  std::vector<double> ttfts_;
  uint64_t now_ns_ = 0;
  uint64_t completed_ = 0;
  std::chrono::steady_clock::time_point last_progress_;
  ReplayReport report_;
};

}  // namespace

ReplayReport RunReplay(const Workload& workload, Planner& planner, const CostModel& cost,
                       ServerMetrics* metrics, ColdTier* cold, const ReplayOptions& options) {
  Engine engine(workload, planner, cost, metrics, cold, options);
  return engine.Run();
}

}  // namespace tier
