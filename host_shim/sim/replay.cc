#include "replay.h"

#include <tier/host/format.h>
#include <tier/host/identity.h>
#include <tier/host/log.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <queue>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "offered_load.h"

namespace tier::sim {
namespace {

constexpr const char* kTtft = "tier_ttft_seconds";
constexpr const char* kTtftHelp = "Time to first token per request (virtual clock of the replay).";
const std::vector<double> kTtftBuckets = {0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120};
constexpr const char* kSaved = "tier_prefill_saved_seconds_total";
constexpr const char* kSavedHelp =
    "Prefill seconds avoided by reusing checkpoints, net of restore and transfer time.";

enum class EventType { kCompletion = 0, kPrefetch = 1, kArrival = 2 };  // completions first

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

// A request in service: what it holds until it completes.
struct InService {
  uint64_t start_ns = 0;
  uint64_t admission_id = 0;  // a ready admission to Release() at completion (0 = none)
  std::vector<uint32_t> pages;
  std::unique_ptr<KvPool::StateSet> state;
  size_t shared_blocks = 0;  // publish blocks[0..shared_blocks) as a shared prefix
};

// What the report needs of each request once it was served.
struct Record {
  uint64_t arrival_ns = 0, start_ns = 0, first_token_ns = 0, done_ns = 0;
  uint64_t admission_ns = 0, prefill_ns = 0, root_prefill_ns = 0;
  uint64_t parked_tokens = 0;  // the parked checkpoint its prompt extends (0: none)
  bool served = false;
  bool resumed = false;     // reused at least its parked checkpoint
  bool prefetched = false;  // a prefetch brought it from cold into Host before it came
  Outcome outcome = Outcome::kRootPrefill;
};

const char* OutcomeTier(Outcome outcome) {
  switch (outcome) {
    case Outcome::kDeviceHit:
      return "device";
    case Outcome::kHostRestore:
      return "host";
    case Outcome::kColdRestore:
      return "cold";
    case Outcome::kRootPrefill:
      break;
  }
  return "root";
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(rank, values.size() - 1)];
}

// Times one call on the scheduler thread: wall time, the thread's CPU time, and whether it gave up
// the CPU (a voluntary context switch: it waited, on a lock, a condition or I/O) or was preempted
// by other threads of a busy machine (an involuntary one). A call that neither waited nor was
// preempted took exactly its CPU time.
class StallClock {
 public:
  struct Mark {
    std::chrono::steady_clock::time_point wall;
    double cpu_ms;
    long voluntary, involuntary;
  };
  template <typename F>
  auto operator()(F&& call) {
    struct Stop {
      StallClock* self;
      Mark start;
      ~Stop() { self->Record(start, Now()); }
    } stop{this, Now()};
    return call();
  }
  static Mark Now() {
    rusage usage{};
    getrusage(RUSAGE_THREAD, &usage);
    timespec cpu{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    return {std::chrono::steady_clock::now(),
            static_cast<double>(cpu.tv_sec) * 1e3 + static_cast<double>(cpu.tv_nsec) / 1e6,
            usage.ru_nvcsw, usage.ru_nivcsw};
  }
  void Record(const Mark& a, const Mark& b) {
    const double wall_ms = std::chrono::duration<double, std::milli>(b.wall - a.wall).count();
    stalls_ms.push_back(wall_ms);
    cpu_max_ms = std::max(cpu_max_ms, b.cpu_ms - a.cpu_ms);
    const bool waited = b.voluntary != a.voluntary, preempted = b.involuntary != a.involuntary;
    blocked_calls += waited ? 1 : 0;
    preempted_calls += preempted ? 1 : 0;
    if (!waited && !preempted) unswitched_max_ms = std::max(unswitched_max_ms, wall_ms);
  }
  std::vector<double> stalls_ms;
  double cpu_max_ms = 0, unswitched_max_ms = 0;
  uint64_t blocked_calls = 0, preempted_calls = 0;
};

class Engine {
 public:
  Engine(const Workload& workload, Host& host, KvPool& pool, const CostModel& cost,
         MetricsRegistry* metrics, const ReplayOptions& options)
      : w_(workload), host_(host), pool_(pool), cost_(cost), o_(options) {
    successors_.resize(w_.requests.size());
    for (size_t i = 0; i < w_.requests.size(); ++i) {
      if (w_.requests[i].after) successors_[*w_.requests[i].after].push_back(i);
    }
    service_.resize(w_.requests.size());
    arrival_ns_.assign(w_.requests.size(), 0);
    records_.resize(w_.requests.size());
    if (metrics != nullptr) {
      RegisterReplayMetrics(metrics);
      ttft_ = metrics->Series(metrics->Histogram(kTtft, kTtftHelp, {}, kTtftBuckets));
      saved_ = metrics->Series(metrics->Counter(kSaved, kSavedHelp));
    }
  }

  ReplayReport Run();

 private:
  bool Stopped() const { return o_.stop != nullptr && o_.stop->load(); }
  bool Hurried() const { return o_.hurry != nullptr && o_.hurry->load(); }
  void Start(size_t index);
  void Admitted(size_t index, const Admission& admission);
  bool Verify(size_t index, const Admission& admission);
  void Complete(size_t index);
  void SealCheckpoint(size_t index, std::span<const uint64_t> blocks, bool shared_prefix,
                      std::unique_ptr<KvPool::StateSet> state);
  bool AllocatePages(uint32_t count, std::vector<uint32_t>* pages);
  // Applies the Host's events; blocks (wall clock) up to `wait_ns` for one when asked.
  void PumpHost(uint64_t wait_ns);
  void ResolvePending();
  void Progress(bool final);
  void Count(const Admission& admission);
  uint64_t ParkedTokens(const Request& r) const;
  std::string TenantOf(const Request& r) const {
    return o_.tenants == 0 ? std::string() : "t" + std::to_string(r.session % o_.tenants);
  }
  void Summarize();
  void SummarizeReturning();
  void SummarizeStability();
  bool Wall() const { return o_.clock == ReplayOptions::Clock::kWall; }
  // kWall: the virtual time the wall clock has reached.
  uint64_t WallVirtualNs() const;
  uint64_t ProbedRestoreNs(uint64_t logical_bytes) const;
  void HandleEvent(const Event& event);
  void StartQueued();
  void RunVirtual();
  void RunWall();

  const Workload& w_;
  Host& host_;
  KvPool& pool_;
  const CostModel& cost_;
  ReplayOptions o_;
  Metric* ttft_ = nullptr;
  Metric* saved_ = nullptr;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::deque<size_t> queue_;
  std::vector<std::vector<size_t>> successors_;
  std::vector<InService> service_;
  std::vector<uint64_t> arrival_ns_;
  std::unordered_map<uint64_t, size_t> pending_;  // admission id -> request
  std::unordered_map<uint64_t, std::unique_ptr<KvPool::StateSet>> sealing_;  // seal id -> state
  std::unordered_set<uint64_t> seen_prefixes_;
  std::unordered_set<uint64_t> sealed_identities_;  // full identities requests sealed so far
  std::vector<Record> records_;
  std::vector<double> ttfts_;
  uint64_t now_ns_ = 0;
  uint32_t busy_ = 0;
  std::chrono::steady_clock::time_point last_progress_;
  std::chrono::steady_clock::time_point wall_start_;
  StallClock timed_;
  ReplayReport report_;
};

// A cold restore at full size, from the restore probe's rate (measured mode, bytes scale > 1).
uint64_t Engine::ProbedRestoreNs(uint64_t logical_bytes) const {
  return o_.measured_cold_fixed_ns +
         static_cast<uint64_t>(static_cast<double>(logical_bytes) * 1e9 /
                               o_.measured_cold_read_bytes_per_second);
}

uint64_t Engine::WallVirtualNs() const {
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
  return static_cast<uint64_t>(wall_s * o_.time_scale * 1e9);
}

void Engine::Count(const Admission& a) {
  switch (a.outcome) {
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
      ++report_.root_prefills_by_reason[RootReasonName(a.root_reason)];
      if (a.root_reason != RootReason::kNoCheckpoint) {
        ++report_.skip_to_root[RootReasonName(a.root_reason)];
      }
      break;
  }
}

bool Engine::AllocatePages(uint32_t count, std::vector<uint32_t>* pages) {
  // Pages the Host still holds come back through events: give it a moment (wall clock) before
  // calling the pool too small.
  for (int attempt = 0; attempt < 2000 && !pool_.Allocate(count, pages); ++attempt) {
    PumpHost(5 * 1000 * 1000);
    if (attempt == 1999) return false;
  }
  return true;
}

void Engine::PumpHost(uint64_t wait_ns) {
  if (wait_ns > 0) host_.WaitForWork(wait_ns);
  std::vector<tier::Event> events;
  timed_([&] { host_.Poll(&events); });
  for (tier::Event& e : events) {
    switch (e.kind) {
      case tier::Event::kAdmissionReady:
      case tier::Event::kAdmissionRoot:
      case tier::Event::kAdmissionCancelled: {
        auto it = pending_.find(e.id);
        if (it == pending_.end()) break;
        const size_t index = it->second;
        pending_.erase(it);
        Admitted(index, e.admission);
        break;
      }
      case tier::Event::kSealed:
        sealing_.erase(e.id);
        break;
      case tier::Event::kPagesReleased:
        pool_.ReleasedByHost(e.pages);
        break;
      case tier::Event::kPrefetchDone:
        break;
    }
  }
}

void Engine::ResolvePending() {
  // Virtual time may not pass a pending admission whose cost is not known yet: wait (wall) for
  // the restores in flight, which run concurrently like a server's. Background work (spills,
  // demotions, seals' copies, prefetches) is also finished before virtual time moves on: it takes
  // no virtual time, as a server's copy engines and disk run beside its lanes; the budgets then
  // hold at every event. What a restore costs is charged to its request (measured x scale).
  while ((!pending_.empty() || host_.Busy()) && !Hurried()) {
    if (Stopped()) {
      for (const auto& pending : pending_) timed_([&] { return host_.Cancel(pending.first); });
    }
    PumpHost(10 * 1000 * 1000);
  }
}

void Engine::Start(size_t index) {
  const Request& r = w_.requests[index];
  InService& s = service_[index];
  s.start_ns = now_ns_;
  records_[index].start_ns = now_ns_;
  records_[index].parked_tokens = ParkedTokens(r);
  auto state = pool_.NewStateSet();
  if (!state.ok()) {
    Log(TIER_LOG_ERROR, "replay: " + state.status().ToString());
    return;
  }
  s.state = std::move(state).value();
  AdmitRequest request;
  request.blocks = r.blocks;
  const std::string tenant = TenantOf(r);
  request.tenant = tenant;
  request.now_ns = now_ns_;
  request.allocate_pages = [this](uint32_t count, std::vector<uint32_t>* pages) {
    return pool_.Allocate(count, pages);
  };
  request.state = s.state->buffers;
  Admission a = timed_([&] { return host_.Admit(request); });
  if (a.state == AdmissionState::kPending) {
    ++report_.pending_admissions;
    pending_[a.id] = index;
    report_.max_pending_at_once = std::max<uint64_t>(report_.max_pending_at_once, pending_.size());
    return;
  }
  Admitted(index, a);
}

uint64_t Engine::ParkedTokens(const Request& r) const {
  if (sealed_identities_.empty()) return 0;
  const std::vector<uint64_t> hashes = PrefixHashes(r.blocks);
  for (size_t k = hashes.size(); k > 0; --k) {
    if (sealed_identities_.count(hashes[k - 1]) != 0) return k * w_.block_tokens;
  }
  return 0;
}

bool Engine::Verify(size_t index, const Admission& a) {
  const Request& r = w_.requests[index];
  const size_t cached_blocks = a.cached_tokens / w_.block_tokens;
  const std::vector<uint64_t> hashes =
      PrefixHashes(std::span(r.blocks).first(std::min(cached_blocks, r.blocks.size())));
  if (a.pages_shared) {
    const Status copied = a.state_copy.Wait();
    if (!copied.ok()) return false;
  }
  const bool exact = pool_.Check(hashes, w_.block_tokens, a.pages) &&
                     KvPool::CheckState(a.key, *service_[index].state);
  ++report_.verified_restores;
  if (!exact) ++report_.mismatched_restores;
  timed_([&] { host_.ReportVerification(a.id, exact); });
  return exact;
}

void Engine::Admitted(size_t index, const Admission& admission) {
  const Request& r = w_.requests[index];
  InService& s = service_[index];
  Admission a = admission;
  pool_.Unref(a.unused_pages);
  if (a.state == AdmissionState::kReady) {
    if (a.pages_shared) pool_.Ref(a.pages);  // the request's reference next to the Host's
    s.pages = a.pages;
    s.admission_id = a.id;
    if (!Verify(index, a)) {
      Log(TIER_LOG_ERROR, "replay: a restored checkpoint did not hold its bytes; prefilling");
      pool_.Unref(s.pages);
      s.pages.clear();
      timed_([&] { host_.Release(a.id); });
      s.admission_id = 0;
      a.outcome = Outcome::kRootPrefill;
      a.root_reason = RootReason::kCorrupt;
      a.cached_tokens = 0;
    }
  } else {
    a.outcome = Outcome::kRootPrefill;
    a.cached_tokens = 0;
  }
  Count(a);
  const uint64_t cached = std::min(a.cached_tokens, r.input_tokens);
  // The rest of the sequence: prompt and answer, every page the request writes.
  const uint64_t tokens =
      std::max<uint64_t>(r.input_tokens + r.output_tokens, r.seal_blocks.size() * w_.block_tokens);
  const uint32_t need = (tokens + pool_.tokens_per_page() - 1) / pool_.tokens_per_page();
  const uint32_t have = static_cast<uint32_t>(s.pages.size());
  std::vector<uint32_t> fresh;
  if (need > have && !AllocatePages(need - have, &fresh)) {
    Log(TIER_LOG_ERROR, "replay: the simulator's pool has no free pages (" +
                            std::to_string(pool_.page_count()) + " pages)");
  }
  const std::vector<uint64_t> seal_hashes = PrefixHashes(r.seal_blocks);
  pool_.Fill(seal_hashes, w_.block_tokens, have, fresh);
  s.pages.insert(s.pages.end(), fresh.begin(), fresh.end());

  uint64_t admission_ns = 0;
  if (Wall()) {
    // The restore's real time has passed already: the request starts from now.
    now_ns_ = std::max(now_ns_, WallVirtualNs());
    admission_ns = s.start_ns < now_ns_ ? now_ns_ - s.start_ns : 0;
  }
  // With the Host's restore model the replay charges the modelled read (deterministic);
  // with the restore probe's full-size rate, the checkpoint's logical bytes at it; otherwise the
  // measured wall time of the real (scaled) restore, scaled back to logical size.
  const bool model = host_.options().model_cold_read_bytes_per_second > 0;
  const bool probed = o_.measured_cold_read_bytes_per_second > 0;
  if (a.prefetched) {
    report_.prefetch_hidden_seconds +=
        static_cast<double>(model    ? a.cold_restore_model_ns
                            : probed ? ProbedRestoreNs(a.logical_bytes)
                                     : a.prefetch_hidden_ns * host_.options().bytes_scale) /
        1e9;
  }
  if (Wall()) {
    admission_ns += a.outcome == Outcome::kDeviceHit || a.outcome == Outcome::kRootPrefill
                        ? 0
                        : a.transfer_model_ns;
  } else if (a.outcome == Outcome::kColdRestore) {
    const uint64_t restore_ns = model    ? a.cold_restore_model_ns
                                : probed ? ProbedRestoreNs(a.logical_bytes)
                                         : a.cold_restore_ns * host_.options().bytes_scale;
    admission_ns = restore_ns + a.transfer_model_ns;
    ++report_.cold_restores_charged;
    report_.cold_restore_charged_logical_bytes += a.logical_bytes;
    report_.cold_restore_charged_seconds += static_cast<double>(restore_ns) / 1e9;
  } else if (a.outcome == Outcome::kHostRestore) {
    admission_ns = a.transfer_model_ns;
  }
  const uint64_t prefill_ns = cost_.PrefillNs(cached, r.input_tokens - cached);
  const uint64_t no_reuse_ns = cost_.PrefillNs(0, r.input_tokens);
  report_.prefill_seconds += static_cast<double>(prefill_ns) / 1e9;
  report_.prefill_seconds_no_reuse += static_cast<double>(no_reuse_ns) / 1e9;
  report_.admission_seconds += static_cast<double>(admission_ns) / 1e9;
  const double saved_s =
      (static_cast<double>(no_reuse_ns) - static_cast<double>(prefill_ns + admission_ns)) / 1e9;
  if (saved_ != nullptr) saved_->Add(std::max(0.0, saved_s));
  const uint64_t first_token_ns = s.start_ns + admission_ns + prefill_ns;
  const double ttft_s = static_cast<double>(first_token_ns - arrival_ns_[index]) / 1e9;
  ttfts_.push_back(ttft_s);
  if (ttft_ != nullptr) ttft_->Observe(ttft_s);
  Record& rec = records_[index];
  rec.served = true;
  rec.arrival_ns = arrival_ns_[index];
  rec.admission_ns = admission_ns;
  rec.prefill_ns = prefill_ns;
  rec.root_prefill_ns = no_reuse_ns;
  rec.first_token_ns = first_token_ns;
  rec.done_ns = first_token_ns + cost_.DecodeNs(r.output_tokens);
  rec.outcome = a.outcome;
  rec.prefetched = a.prefetched;
  rec.resumed = a.outcome != Outcome::kRootPrefill && rec.parked_tokens > 0 &&
                a.cached_tokens >= rec.parked_tokens;

  // A prefix that an earlier request carried too, longer than what was reused and shorter than
  // this request's own checkpoint, is published as a shared prefix when it completes.
  size_t shared = 0;
  for (size_t k = seal_hashes.size(); k > 0; --k) {
    if (seen_prefixes_.count(seal_hashes[k - 1]) != 0) {
      shared = k;
      break;
    }
  }
  for (uint64_t h : seal_hashes) seen_prefixes_.insert(h);
  const size_t cached_blocks = a.cached_tokens / w_.block_tokens;
  if (shared >= o_.min_shared_blocks && shared > cached_blocks && shared < r.seal_blocks.size()) {
    s.shared_blocks = shared;
  }
  events_.push({first_token_ns + cost_.DecodeNs(r.output_tokens), EventType::kCompletion, index});
}

void Engine::SealCheckpoint(size_t index, std::span<const uint64_t> blocks, bool shared_prefix,
                            std::unique_ptr<KvPool::StateSet> state) {
  InService& s = service_[index];
  const uint64_t tokens = blocks.size() * w_.block_tokens;
  const uint32_t pages = (tokens + pool_.tokens_per_page() - 1) / pool_.tokens_per_page();
  const std::string tenant = TenantOf(w_.requests[index]);
  KvPool::FillState(PrefixKey(host_.options().namespace_id, TenantBlocks(tenant, blocks)),
                    state.get());
  SealRequest seal;
  seal.blocks = blocks;
  seal.tenant = tenant;
  seal.tokens = tokens;
  seal.shared_prefix = shared_prefix;
  seal.pages = std::span(s.pages).first(std::min<size_t>(pages, s.pages.size()));
  seal.state = state->buffers;
  seal.now_ns = now_ns_;
  Sealed sealed = timed_([&] { return host_.Seal(seal); });
  if (!sealed.status.ok() || sealed.existed) return;  // `state` is not read: freed here
  pool_.HeldByHost(seal.pages);
  sealing_[sealed.id] = std::move(state);
  if (shared_prefix) {
    ++report_.shared_prefixes_published;
  } else {
    ++report_.checkpoints_sealed;
  }
}

void Engine::Complete(size_t index) {
  const Request& r = w_.requests[index];
  InService& s = service_[index];
  if (s.shared_blocks > 0) {
    auto state = pool_.NewStateSet();
    if (state.ok()) {
      SealCheckpoint(index, std::span(r.seal_blocks).first(s.shared_blocks), true,
                     std::move(state).value());
    }
  }
  if (!r.seal_blocks.empty() && s.state != nullptr) {
    SealCheckpoint(index, r.seal_blocks, false, std::move(s.state));
  }
  if (!r.seal_blocks.empty()) sealed_identities_.insert(PrefixHashes(r.seal_blocks).back());
  s.state.reset();
  if (s.admission_id != 0) timed_([&] { host_.Release(s.admission_id); });
  s.admission_id = 0;
  pool_.Unref(s.pages);
  s.pages.clear();
  ++report_.completed;
  for (size_t next : successors_[index]) {
    const uint64_t arrival = now_ns_ + w_.requests[next].think_ns;
    events_.push({arrival, EventType::kArrival, next});
    const uint64_t lead_ns = static_cast<uint64_t>(o_.prefetch_lead_s * 1e9);
    if (lead_ns > 0 && w_.requests[next].think_ns > lead_ns) {
      events_.push({arrival - lead_ns, EventType::kPrefetch, next});
    }
  }
}

void Engine::HandleEvent(const Event& event) {
  now_ns_ = std::max(now_ns_, event.time_ns);
  if (event.type == EventType::kArrival) {
    arrival_ns_[event.request] = event.time_ns;
    if (!Stopped()) queue_.push_back(event.request);
  } else if (event.type == EventType::kPrefetch) {
    const Request& r = w_.requests[event.request];
    const std::string tenant = TenantOf(r);
    if (!Stopped() && timed_([&] { return host_.Prefetch(r.blocks, now_ns_, tenant); }) != 0) {
      ++report_.prefetch_hints;
    }
  } else {
    --busy_;
    Complete(event.request);
  }
}

void Engine::StartQueued() {
  while (busy_ < std::max<uint32_t>(1, o_.max_concurrency) && !queue_.empty()) {
    const size_t next = queue_.front();
    queue_.pop_front();
    ++busy_;
    Start(next);
  }
}

void Engine::RunVirtual() {
  while ((!events_.empty() || !pending_.empty()) && !Hurried()) {
    ResolvePending();
    if (events_.empty() || Hurried()) break;
    if (Stopped() && busy_ == 0) break;
    const Event event = events_.top();
    events_.pop();
    HandleEvent(event);
    StartQueued();
    PumpHost(0);
    Progress(false);
  }
}

void Engine::RunWall() {
  // One scheduler thread: every iteration polls the Host, handles what is due, starts queued
  // requests and lets the lanes step; nothing in it waits for a restore.
  while ((!events_.empty() || !pending_.empty()) && !Hurried()) {
    if (Stopped()) {
      for (const auto& pending : pending_) timed_([&] { return host_.Cancel(pending.first); });
      if (busy_ == 0 && pending_.empty()) break;
    }
    PumpHost(0);
    const uint64_t now = WallVirtualNs();
    while (!events_.empty() && events_.top().time_ns <= now) {
      const Event event = events_.top();
      events_.pop();
      HandleEvent(event);
    }
    now_ns_ = std::max(now_ns_, now);
    StartQueued();
    const uint32_t decoding = busy_ - static_cast<uint32_t>(pending_.size());
    if (!pending_.empty() && decoding > 0) ++report_.lane_steps_during_restores;
    Progress(false);
    // A lane step (at most 1 ms of wall time), or less when the next event is due sooner.
    uint64_t sleep_ns = 1000000;
    if (!events_.empty() && events_.top().time_ns > now) {
      sleep_ns = std::min<uint64_t>(
          sleep_ns,
          static_cast<uint64_t>(static_cast<double>(events_.top().time_ns - now) / o_.time_scale));
    }
    std::this_thread::sleep_for(std::chrono::nanoseconds(sleep_ns));
  }
}

ReplayReport Engine::Run() {
  wall_start_ = std::chrono::steady_clock::now();
  last_progress_ = wall_start_;
  for (size_t i = 0; i < w_.requests.size(); ++i) {
    if (!w_.requests[i].after) events_.push({w_.requests[i].arrival_ns, EventType::kArrival, i});
  }
  if (Wall()) {
    RunWall();
  } else {
    RunVirtual();
  }
  // Spills and prefetches still in flight finish (each bounded by the provider deadline).
  while (host_.Busy() && !Hurried()) PumpHost(10 * 1000 * 1000);
  report_.interrupted = Stopped();
  Progress(true);
  report_.workload = w_.name;
  report_.clock = Wall() ? "wall" : "virtual";
  report_.requests = w_.requests.size();
  report_.ttft_p50_s = Percentile(ttfts_, 0.50);
  report_.ttft_p99_s = Percentile(ttfts_, 0.99);
  report_.virtual_seconds = static_cast<double>(now_ns_) / 1e9;
  report_.prefill_seconds_saved =
      report_.prefill_seconds_no_reuse - report_.prefill_seconds - report_.admission_seconds;
  report_.prefill_saved_share =
      report_.prefill_seconds_no_reuse > 0
          ? report_.prefill_seconds_saved / report_.prefill_seconds_no_reuse
          : 0;
  Summarize();
  report_.host = host_.Stats();
  report_.restore_exact = report_.mismatched_restores == 0;
  report_.provider_calls_outside_admission = report_.host.provider_calls_outside_admission;
  report_.tier_calls = timed_.stalls_ms.size();
  report_.blocked_tier_calls = timed_.blocked_calls;
  report_.preempted_tier_calls = timed_.preempted_calls;
  report_.scheduler_cpu_max_ms = timed_.cpu_max_ms;
  report_.scheduler_stall_max_unpreempted_ms = timed_.unswitched_max_ms;
  report_.scheduler_stall_p99_ms = Percentile(timed_.stalls_ms, 0.99);
  report_.scheduler_stall_max_ms =
      timed_.stalls_ms.empty()
          ? 0
          : *std::max_element(timed_.stalls_ms.begin(), timed_.stalls_ms.end());
  report_.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
  return report_;
}

void Engine::Summarize() {
  std::vector<double> queue_s;
  for (const Record& rec : records_) {
    if (rec.served) queue_s.push_back(static_cast<double>(rec.start_ns - rec.arrival_ns) / 1e9);
  }
  report_.queue_p50_s = Percentile(queue_s, 0.50);
  report_.queue_p99_s = Percentile(queue_s, 0.99);
  SummarizeReturning();
  SummarizeStability();
}

double Mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

constexpr const char* kFromCold = "*from_cold";  // not a tier: cold and cold_prefetched

void Engine::SummarizeReturning() {
  struct Samples {
    std::vector<double> ttft, queue, restore, prefill, root, parked;
  };
  std::map<std::string, Samples> by_kind;  // by tier, and kFromCold
  for (const Record& rec : records_) {
    if (!rec.served || rec.parked_tokens == 0) continue;
    const char* kind = !rec.resumed     ? "root"
                       : rec.prefetched ? "cold_prefetched"
                                        : OutcomeTier(rec.outcome);
    const bool from_cold = std::strcmp(kind, "cold") == 0 || rec.prefetched;
    for (Samples* s : {&by_kind[kind], from_cold ? &by_kind[kFromCold] : nullptr}) {
      if (s == nullptr) continue;
      s->ttft.push_back(static_cast<double>(rec.first_token_ns - rec.arrival_ns) / 1e9);
      s->queue.push_back(static_cast<double>(rec.start_ns - rec.arrival_ns) / 1e9);
      s->restore.push_back(static_cast<double>(rec.admission_ns) / 1e9);
      s->prefill.push_back(static_cast<double>(rec.prefill_ns) / 1e9);
      s->root.push_back(static_cast<double>(rec.root_prefill_ns) / 1e9);
      s->parked.push_back(static_cast<double>(rec.parked_tokens));
    }
  }
  for (auto& [kind, s] : by_kind) {
    ReturningFigures f;
    f.requests = s.ttft.size();
    f.ttft_p50_s = Percentile(s.ttft, 0.50);
    f.ttft_p99_s = Percentile(s.ttft, 0.99);
    f.queue_p50_s = Percentile(s.queue, 0.50);
    f.queue_p99_s = Percentile(s.queue, 0.99);
    f.restore_p50_s = Percentile(s.restore, 0.50);
    f.prefill_p50_s = Percentile(s.prefill, 0.50);
    f.root_prefill_p50_s = Percentile(s.root, 0.50);
    f.root_prefill_p99_s = Percentile(s.root, 0.99);
    f.parked_tokens_p50 = Percentile(s.parked, 0.50);
    f.ttft_mean_s = Mean(s.ttft);
    f.queue_mean_s = Mean(s.queue);
    f.restore_mean_s = Mean(s.restore);
    f.prefill_mean_s = Mean(s.prefill);
    if (kind == kFromCold) {
      report_.returning_from_cold = f;
      continue;
    }
    report_.returning[kind] = f;
  }
}

void Engine::SummarizeStability() {
  const uint32_t lanes = std::max<uint32_t>(1, o_.max_concurrency);
  // Lane time per request (restore + prefill + decode), over the trace's span or the sessions'.
  std::vector<double> lane_s(w_.requests.size(), -1);
  double service_s = 0;
  uint64_t served = 0;
  for (size_t i = 0; i < w_.requests.size(); ++i) {
    const Record& rec = records_[i];
    if (!rec.served) continue;
    ++served;
    lane_s[i] = static_cast<double>(rec.done_ns - rec.start_ns) / 1e9;
    service_s += lane_s[i];
  }
  if (served == 0) return;
  const double makespan_s = std::max(1e-9, static_cast<double>(now_ns_) / 1e9);
  report_.lane_utilization = service_s / (lanes * makespan_s);
  report_.offered_utilization = MeasureOfferedLoad(w_, lane_s, lanes).utilization;
  // Queueing of the first and the last quarter of requests, by arrival.
  std::vector<std::pair<uint64_t, double>> waits;
  for (const Record& rec : records_) {
    if (rec.served) {
      waits.push_back({rec.arrival_ns, static_cast<double>(rec.start_ns - rec.arrival_ns) / 1e9});
    }
  }
  std::sort(waits.begin(), waits.end());
  const size_t quarter = std::max<size_t>(1, waits.size() / 4);
  double first = 0, last = 0;
  for (size_t i = 0; i < quarter; ++i) {
    first += waits[i].second;
    last += waits[waits.size() - 1 - i].second;
  }
  report_.queue_first_quarter_s = first / static_cast<double>(quarter);
  report_.queue_last_quarter_s = last / static_cast<double>(quarter);
  const double mean_service_s = service_s / static_cast<double>(served);
  report_.queue_grew = waits.size() >= 8 && report_.queue_last_quarter_s >
                                                2 * report_.queue_first_quarter_s + mean_service_s;
  char why[256];
  if (report_.offered_utilization >= 1) {
    std::snprintf(why, sizeof(why),
                  "offered load %.2f of the %u lanes' capacity (queueing p50 %.1f s)",
                  report_.offered_utilization, lanes, report_.queue_p50_s);
    report_.unstable_reason = why;
  } else if (report_.queue_grew) {
    std::snprintf(why, sizeof(why),
                  "the queue grew through the run (mean wait %.1f s in the first quarter, %.1f s "
                  "in the last)",
                  report_.queue_first_quarter_s, report_.queue_last_quarter_s);
    report_.unstable_reason = why;
  }
  report_.unstable = !report_.unstable_reason.empty();
}

void Engine::Progress(bool final) {
  if (!o_.progress) return;
  const auto now = std::chrono::steady_clock::now();
  if (!final && now - last_progress_ < std::chrono::seconds(1)) return;
  last_progress_ = now;
  const uint64_t total = w_.requests.size();
  std::fprintf(
      stderr,
      "\rreplay %s: %llu/%llu requests (%3.0f%%), virtual %s, device hits %llu, host "
      "%llu, cold %llu, root %llu   %s",
      o_.label.c_str(), static_cast<unsigned long long>(report_.completed),
      static_cast<unsigned long long>(total),
      total ? 100.0 * static_cast<double>(report_.completed) / static_cast<double>(total) : 100.0,
      FormatDurationNs(now_ns_).c_str(), static_cast<unsigned long long>(report_.device_hits),
      static_cast<unsigned long long>(report_.host_restores),
      static_cast<unsigned long long>(report_.cold_restores),
      static_cast<unsigned long long>(report_.root_prefills), final ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace

void RegisterReplayMetrics(MetricsRegistry* metrics) {
  metrics->Series(metrics->Histogram(kTtft, kTtftHelp, {}, kTtftBuckets));
  metrics->Series(metrics->Counter(kSaved, kSavedHelp));
}

ReplayReport RunReplay(const Workload& workload, Host& host, KvPool& pool, const CostModel& cost,
                       MetricsRegistry* metrics, const ReplayOptions& options) {
  Engine engine(workload, host, pool, cost, metrics, options);
  return engine.Run();
}

uint32_t ReplayPoolPages(const Workload& workload, const ModelProfile& profile,
                         uint64_t bytes_scale, uint64_t device_capacity_bytes, uint32_t lanes) {
  uint64_t max_tokens = 0;
  for (const Request& r : workload.requests) {
    max_tokens = std::max<uint64_t>(
        max_tokens, std::max<uint64_t>(r.input_tokens + r.output_tokens,
                                       r.seal_blocks.size() * workload.block_tokens));
  }
  const uint64_t tpp = profile.tokens_per_page;
  const uint64_t request_pages = (max_tokens + tpp - 1) / tpp;
  const uint64_t page_logical = profile.kv_bytes_per_token / profile.full_attention_layers *
                                (profile.full_attention_layers + profile.mtp_layers) * tpp;
  const uint64_t parked_pages = device_capacity_bytes / std::max<uint64_t>(1, page_logical);
  (void)bytes_scale;
  // Parked pages may overshoot the budget while demotions run; each lane holds a request and a
  // shared prefix it publishes.
  const uint64_t pages = 2 * parked_pages + (lanes + 1) * request_pages + 64;
  return static_cast<uint32_t>(std::min<uint64_t>(pages, 1u << 30));
}

}  // namespace tier::sim
