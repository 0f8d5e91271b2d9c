#include "cold_tier.h"

#include <tier/check.h>
#include <tier/host/host_services.h>

#include <algorithm>
#include <future>

namespace tier {
namespace {

constexpr size_t kMaxQueuedCalls = 4096;

// Answers a call once, on the scheduler thread, and destroys its closure there: what it holds (a
// restore's staging copy, a spill's Host copy) is released now, not whenever the provider's thread
// drops its last reference to the completion context (pinned memory a seal or a restore right
// after would find still in use).
template <typename T>
void AnswerOnce(std::function<void(Answer<T>)>* slot, Answer<T> answer) {
  std::function<void(Answer<T>)> done = std::move(*slot);
  *slot = nullptr;
  if (done) done(std::move(answer));
}

template <typename T>
Answer<T> TimedOut(uint64_t timeout_ns) {
  Answer<T> answer{Status::IoError("no answer from the provider within " +
                                   std::to_string(timeout_ns / 1000000) + " ms"),
                   true};
  return answer;
}

Answer<Completion> TimedOutCompletion(uint64_t timeout_ns) {
  Completion c;
  c.status = Status::IoError("no completion from the provider within " +
                             std::to_string(timeout_ns / 1000000) + " ms");
  return {c, true};
}

Completion Refused(Status status) {
  Completion c;
  c.status = std::move(status);
  return c;
}

// What a sealed checkpoint stores beyond its plaintext: the manifest's header and table.
uint64_t OverheadOf(const std::vector<tier_segment_info>& segments) {
  return segments.empty() ? 0 : SegmentCipher::ManifestOverheadBytes(segments.size() - 1);
}

// Stat and enumerate report the plaintext lengths: only the manifest differs.
void PlainLengths(std::vector<tier_segment_info>& segments) {
  const uint64_t overhead = OverheadOf(segments);
  for (tier_segment_info& s : segments) {
    if (s.kind == TIER_SEGMENT_MANIFEST) s.length_bytes -= std::min(s.length_bytes, overhead);
  }
}

}  // namespace

const char* IoPhaseName(IoPhase phase) {
  static const char* const kNames[kIoPhaseCount] = {"idle",     "admission", "prefetch",
                                                    "pressure", "eviction",  "startup"};
  return kNames[static_cast<int>(phase)];
}

ColdTier::ColdTier(std::unique_ptr<ProviderInstance> instance, EventQueue* queue, Options options)
    : instance_(std::move(instance)),
      queue_(queue),
      options_(options),
      threads_(std::make_unique<CallThreads>(options.threads, kMaxQueuedCalls)) {}

ColdTier::~ColdTier() {
  if (abandoned_) {
    // Its threads may still run provider code (through this object): never freed, never closed
    // (close() would wait for the stuck operation). The owner leaks this object (see Abandon).
    (void)threads_.release();
    (void)instance_.release();
    return;
  }
  TIER_CHECK(unsettled() == 0);
  threads_.reset();
  instance_->Close();
}

void ColdTier::Abandon() {
  abandoned_ = true;
  // The members stay as they are: a call thread still running reads instance_ and threads_
  // (releasing them here raced with those reads).
  threads_->Abandon();
}

bool ColdTier::has_probe() const {
  return instance_->library().HasSlot(offsetof(tier_provider, probe), sizeof(void*));
}

uint64_t ColdTier::TimeoutOf(uint64_t timeout_ns) const {
  return timeout_ns == 0 ? options_.timeout_ns : std::min(timeout_ns, options_.timeout_ns);
}

uint64_t ColdTier::Begin(IoPhase phase, std::function<void()> on_timeout,
                         std::function<void()> settled, uint64_t timeout_ns) {
  ++calls_by_phase_[static_cast<int>(phase)];
  const uint64_t id = next_call_++;
  Call& call = calls_[id];
  call.phase = phase;
  call.deadline_ns = MonotonicNs() + TimeoutOf(timeout_ns);
  call.on_timeout = std::move(on_timeout);
  call.settled = std::move(settled);
  return id;
}

void ColdTier::Finish(uint64_t id, const std::function<void()>& answer) {
  auto it = calls_.find(id);
  TIER_CHECK(it != calls_.end());
  Call call = std::move(it->second);
  calls_.erase(it);
  if (!call.answered) answer();
  if (call.settled) call.settled();
}

void ColdTier::PostFinish(uint64_t id, std::function<void()> answer) {
  queue_->Post([this, id, answer = std::move(answer)] { Finish(id, answer); });
}

void ColdTier::CheckDeadlines(uint64_t now_ns) {
  std::vector<std::function<void()>> expired;
  for (auto& [id, call] : calls_) {
    if (call.answered || now_ns < call.deadline_ns) continue;
    call.answered = true;
    ++timeouts_;
    expired.push_back(std::move(call.on_timeout));
  }
  for (auto& on_timeout : expired) on_timeout();  // may start new calls
}

size_t ColdTier::unanswered() const {
  size_t n = 0;
  for (const auto& [id, call] : calls_) n += call.answered ? 0 : 1;
  return n;
}

void ColdTier::PlanRestore(const tier_key& key, uint64_t predicted_prefill_ns, IoPhase phase,
                           Done<tier_plan> done, uint64_t timeout_ns) {
  auto shared = std::make_shared<Done<tier_plan>>(std::move(done));
  const uint64_t timeout = TimeoutOf(timeout_ns);
  const uint64_t id = Begin(
      phase, [shared, timeout] { AnswerOnce(shared.get(), TimedOut<tier_plan>(timeout)); }, nullptr,
      timeout);
  const bool queued = threads_->RunParallel([this, id, key, predicted_prefill_ns, shared] {
    Result<tier_plan> plan = instance_->PlanRestore(key, predicted_prefill_ns);
    PostFinish(id, [shared, plan] { AnswerOnce(shared.get(), {plan}); });
  });
  if (!queued)
    PostFinish(id,
               [shared] { AnswerOnce(shared.get(), {Status::Busy("too many provider calls")}); });
}

void ColdTier::Probe(std::vector<tier_key> keys, IoPhase phase, Done<std::vector<uint8_t>> done) {
  auto shared = std::make_shared<Done<std::vector<uint8_t>>>(std::move(done));
  const uint64_t timeout = options_.timeout_ns;
  const uint64_t id = Begin(
      phase,
      [shared, timeout] { AnswerOnce(shared.get(), TimedOut<std::vector<uint8_t>>(timeout)); },
      nullptr, 0);
  const bool queued = threads_->RunParallel([this, id, keys = std::move(keys), shared] {
    Result<std::vector<uint8_t>> found = instance_->Probe(keys);
    PostFinish(id, [shared, found] { AnswerOnce(shared.get(), {found}); });
  });
  if (!queued)
    PostFinish(id,
               [shared] { AnswerOnce(shared.get(), {Status::Busy("too many provider calls")}); });
}

void ColdTier::Stat(const tier_key& key, IoPhase phase, Done<StatResult> done) {
  auto shared = std::make_shared<Done<StatResult>>(std::move(done));
  const uint64_t timeout = options_.timeout_ns;
  const uint64_t id = Begin(
      phase, [shared, timeout] { AnswerOnce(shared.get(), TimedOut<StatResult>(timeout)); },
      nullptr, 0);
  const bool queued = threads_->RunParallel([this, id, key, shared] {
    Result<StatResult> stat = instance_->Stat(key);
    if (stat.ok() && options_.cipher != nullptr) PlainLengths(stat.value().segments);
    PostFinish(id, [shared, stat] { AnswerOnce(shared.get(), {stat}); });
  });
  if (!queued)
    PostFinish(id,
               [shared] { AnswerOnce(shared.get(), {Status::Busy("too many provider calls")}); });
}

void ColdTier::Remove(const tier_key& key, IoPhase phase, Done<bool> done) {
  auto shared = std::make_shared<Done<bool>>(std::move(done));
  const uint64_t timeout = options_.timeout_ns;
  const uint64_t id = Begin(
      phase, [shared, timeout] { AnswerOnce(shared.get(), TimedOut<bool>(timeout)); }, nullptr, 0);
  const bool queued = threads_->RunSerial([this, id, key, shared] {
    const Status removed = instance_->Remove(key);
    Result<bool> result = removed.ok()                       ? Result<bool>(true)
                          : removed.code() == TIER_NOT_FOUND ? Result<bool>(false)
                                                             : Result<bool>(removed);
    PostFinish(id, [shared, result] { AnswerOnce(shared.get(), {result}); });
  });
  if (!queued)
    PostFinish(id,
               [shared] { AnswerOnce(shared.get(), {Status::Busy("too many provider calls")}); });
}

void ColdTier::Spill(const tier_key& key, std::vector<tier_segment> segments, IoPhase phase,
                     Done<Completion> done, std::function<void()> settled) {
  SubmitAsync(&ProviderInstance::Spill, key, std::move(segments), phase, std::move(done),
              std::move(settled), 0);
}

void ColdTier::Restore(const tier_key& key, std::vector<tier_segment> segments, IoPhase phase,
                       Done<Completion> done, std::function<void()> settled, uint64_t timeout_ns) {
  SubmitAsync(&ProviderInstance::Restore, key, std::move(segments), phase, std::move(done),
              std::move(settled), timeout_ns);
}

void ColdTier::SubmitAsync(Submit submit, const tier_key& key, std::vector<tier_segment> segments,
                           IoPhase phase, Done<Completion> done, std::function<void()> settled,
                           uint64_t timeout_ns) {
  auto shared = std::make_shared<Done<Completion>>(std::move(done));
  const uint64_t timeout = TimeoutOf(timeout_ns);
  const uint64_t id = Begin(
      phase, [shared, timeout] { AnswerOnce(shared.get(), TimedOutCompletion(timeout)); },
      std::move(settled), timeout);
  auto finish = [this, id, shared](const Completion& c) {
    PostFinish(id, [shared, c] { AnswerOnce(shared.get(), {c}); });
  };
  const bool queued =
      threads_->RunSerial([this, submit, key, segments = std::move(segments), finish] {
        // A refusal is answered here; an acceptance by the provider's completion (any thread).
        if (options_.cipher != nullptr) {
          SubmitSealed(submit, key, segments, finish);
          return;
        }
        const Status accepted = (instance_.get()->*submit)(key, segments, finish);
        if (!accepted.ok()) {
          Completion refused;
          refused.status = accepted;
          finish(refused);
        }
      });
  if (!queued) {
    Completion refused;
    refused.status = Status::Busy("too many provider calls");
    finish(refused);
  }
}

void ColdTier::SubmitSealed(Submit submit, const tier_key& key, std::vector<tier_segment> segments,
                            std::function<void(const Completion&)> finish) {
  // Runs on the serial call thread: sealing a spill costs this thread, not the scheduler's.
  const bool spill = submit == &ProviderInstance::Spill;
  auto prepared = options_.cipher->Prepare(key, std::move(segments), spill);
  if (!prepared.ok()) {
    finish(Refused(prepared.status()));
    return;
  }
  std::shared_ptr<SealedSegments> sealed = prepared.take();
  // The provider's completion (any thread): a restore is opened here, before the scheduler sees
  // it; nothing that fails its tag reaches the caller as a success.
  auto opened = [cipher = options_.cipher, sealed, key, spill, finish](const Completion& c) {
    Completion out = c;
    out.logical_bytes -=
        std::min(out.logical_bytes, SegmentCipher::ManifestOverheadBytes(sealed->plain.size() - 1));
    if (!spill && out.status.ok()) {
      if (Status ok = cipher->OpenAll(key, *sealed); !ok.ok()) {
        out.status = ok;
        out.logical_bytes = 0;
        out.stored_bytes = 0;
      }
    }
    finish(out);
  };
  const Status accepted = (instance_.get()->*submit)(key, sealed->stored, opened);
  if (!accepted.ok()) finish(Refused(accepted));
}

void ColdTier::OpenEntry(EntryCopy& copy) const {
  uint32_t manifest_index = 0;
  for (const tier_segment_info& s : copy.segments) {
    if (s.kind == TIER_SEGMENT_MANIFEST) manifest_index = s.index;
  }
  copy.logical_bytes -= std::min(copy.logical_bytes, OverheadOf(copy.segments));
  PlainLengths(copy.segments);
  if (!copy.has_manifest) return;
  auto plain = options_.cipher->OpenManifest(copy.key, manifest_index, copy.manifest);
  if (!plain.ok()) {
    copy.has_manifest = false;  // unreadable here: not re-adopted (counted by the cipher)
    copy.manifest.clear();
    return;
  }
  copy.manifest = plain.take();
}

template <typename T>
Result<T> ColdTier::Blocking(std::function<Result<T>()> call) {
  auto promise = std::make_shared<std::promise<Result<T>>>();
  std::future<Result<T>> future = promise->get_future();
  const bool queued =
      threads_->RunParallel([promise, call = std::move(call)] { promise->set_value(call()); });
  if (!queued) return Status::Busy("too many provider calls");
  if (future.wait_for(std::chrono::nanoseconds(options_.timeout_ns)) != std::future_status::ready) {
    ++stuck_blocking_;
    ++timeouts_;
    return Status::IoError("no answer from the provider within " +
                           std::to_string(options_.timeout_ns / 1000000) + " ms");
  }
  return future.get();
}

Result<tier_info> ColdTier::InfoWithin() {
  ++calls_by_phase_[static_cast<int>(IoPhase::kStartup)];
  return Blocking<tier_info>([this] { return instance_->Info(); });
}

Result<tier_stats> ColdTier::StatsWithin() {
  ++calls_by_phase_[static_cast<int>(IoPhase::kStartup)];
  return Blocking<tier_stats>([this] { return instance_->Stats(); });
}

Status ColdTier::EnumerateWithin(const std::function<bool(const tier_entry&)>& visit) {
  ++calls_by_phase_[static_cast<int>(IoPhase::kStartup)];
  // The walk runs on a call thread and collects copies into memory the job shares, so a walk that
  // outlives its deadline never touches the caller's state; the caller visits the copies.
  auto entries = std::make_shared<std::vector<EntryCopy>>();
  Result<bool> walked = Blocking<bool>([this, entries]() -> Result<bool> {
    Status s = instance_->Enumerate([&](const tier_entry& e) {
      entries->push_back(EntryCopy::Of(e));
      return true;
    });
    if (!s.ok()) return s;
    return true;
  });
  if (!walked.ok()) return walked.status();
  for (EntryCopy& copy : *entries) {
    if (options_.cipher != nullptr) OpenEntry(copy);
    if (!visit(copy.view())) break;
  }
  return Status::Ok();
}

}  // namespace tier
