#include "sim_provider.h"

#include <tier_validate.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "choices.h"

namespace tier::simulation {

namespace {

enum CallKind : uint32_t { kSpillCall = 1, kRestoreCall = 2 };

SimProvider* FromOptions(const tier_option* options, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    if (std::strcmp(options[i].key, "sim") == 0) {
      return reinterpret_cast<SimProvider*>(std::strtoull(options[i].value, nullptr, 16));
    }
  }
  return nullptr;
}

SimProvider* Self(tier_instance* instance) {
  return reinterpret_cast<SimProvider*>(instance);
}

// Counts a call as executing for the quiescence check of the run.
struct Running {
  Running(SimProvider* p, SimProvider::Lane lane) : p(p) { p->Enter(lane); }
  ~Running() { p->Leave(); }
  SimProvider* p;
};

tier_status Open(const tier_host_services*, const char*, const tier_option* options, uint32_t count,
                 tier_instance** out, tier_error* error) {
  SimProvider* p = FromOptions(options, count);
  if (p == nullptr || out == nullptr) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "sim: no sim= option");
  }
  p->MarkOpen(true);
  *out = reinterpret_cast<tier_instance*>(p);
  return TIER_OK;
}

void Close(tier_instance* instance) {
  Self(instance)->MarkOpen(false);
}

tier_status Info(tier_instance*, tier_info* out, tier_error* error) {
  if (out == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "info");
  out->capabilities = TIER_CAP_PERSISTENT;
  out->name = "sim";
  out->version = "0";
  out->io_path = "memory";
  out->buffer_alignment = 1;
  out->max_inflight_ops = 1024;
  return TIER_OK;
}

tier_status StatsCall(tier_instance* instance, tier_stats* out, tier_error* error) {
  if (out == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "stats");
  Running r(Self(instance), SimProvider::Lane::kNone);
  return Self(instance)->Stats(out);
}

tier_status StatCall(tier_instance* instance, const tier_key* key, tier_stat_result* out,
                     tier_segment_info* segments, uint32_t capacity, tier_error* error) {
  Running r(Self(instance), SimProvider::Lane::kParallel);
  return Self(instance)->Stat(key, out, segments, capacity, error);
}

tier_status SpillCall(tier_instance* instance, const tier_key* key, const tier_segment* segments,
                      uint32_t count, tier_done_fn done, void* user, tier_error* error) {
  Running r(Self(instance), SimProvider::Lane::kSerial);
  return Self(instance)->Spill(key, segments, count, done, user, error);
}

tier_status RestoreCall(tier_instance* instance, const tier_key* key, const tier_segment* segments,
                        uint32_t count, tier_done_fn done, void* user, tier_error* error) {
  Running r(Self(instance), SimProvider::Lane::kSerial);
  return Self(instance)->Restore(key, segments, count, done, user, error);
}

tier_status RemoveCall(tier_instance* instance, const tier_key* key, tier_error* error) {
  Running r(Self(instance), SimProvider::Lane::kSerial);
  return Self(instance)->Remove(key, error);
}

tier_status EnumerateCall(tier_instance* instance, tier_enumerate_fn fn, void* user,
                          tier_error* error) {
  if (fn == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "enumerate");
  Running r(Self(instance), SimProvider::Lane::kNone);
  return Self(instance)->Enumerate(fn, user);
}

tier_status PlanCall(tier_instance* instance, const tier_key* key, uint64_t prefill_ns,
                     tier_plan* out, tier_error* error) {
  if (key == nullptr || out == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "plan");
  Running r(Self(instance), SimProvider::Lane::kParallel);
  return Self(instance)->Plan(key, prefill_ns, out);
}

const tier_provider kTable = {TIER_PROVIDER_V1_0_SIZE,
                              TIER_ABI_VERSION_MAJOR,
                              0,
                              0,
                              "sim",
                              "0",
                              Open,
                              Close,
                              Info,
                              StatsCall,
                              StatCall,
                              SpillCall,
                              RestoreCall,
                              RemoveCall,
                              EnumerateCall,
                              PlanCall,
                              nullptr};

void CallDone(tier_done_fn done, void* user, tier_status status, uint64_t bytes) {
  test::CompleteWith(done, user, status, bytes, "sim: scripted failure");
}

}  // namespace

SimProvider::~SimProvider() = default;

const tier_provider* SimProvider::Table() {
  return &kTable;
}

std::pair<std::string, std::string> SimProvider::Option() const {
  char text[32];
  std::snprintf(text, sizeof(text), "%llx",
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(this)));
  return {"sim", text};
}

void SimProvider::MarkOpen(bool open) {
  std::lock_guard<std::mutex> lock(mu_);
  open_ = open;
}
bool SimProvider::opened() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_;
}
void SimProvider::Enter(Lane lane) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!armed_ || lane == Lane::kNone) {
    ++executing_;
    return;
  }
  const int l = static_cast<int>(lane);
  ++blocked_[l];
  turn_cv_.wait(lock, [&] { return turns_[l] > 0 || !armed_; });
  if (turns_[l] > 0) {
    --turns_[l];  // ReleaseOne() moved this call from blocked_ to executing_
  } else {
    --blocked_[l];  // disarmed
    ++executing_;
  }
}

void SimProvider::Arm(bool armed) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = armed;
    holding_ = armed;
  }
  turn_cv_.notify_all();
}

size_t SimProvider::blocked(Lane lane) const {
  std::lock_guard<std::mutex> lock(mu_);
  return blocked_[static_cast<int>(lane)];
}

bool SimProvider::ReleaseOne(Lane lane) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int l = static_cast<int>(lane);
    if (blocked_[l] == 0) return false;
    --blocked_[l];
    ++turns_[l];
    ++executing_;
  }
  turn_cv_.notify_all();
  return true;
}
void SimProvider::Leave() {
  std::lock_guard<std::mutex> lock(mu_);
  --executing_;
}
size_t SimProvider::executing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return executing_;
}
size_t SimProvider::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size();
}
size_t SimProvider::accepted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size() + never_.size();
}

uint32_t SimProvider::Fate(const tier_key& key, uint32_t kind) {
  std::string id(reinterpret_cast<const char*>(key.bytes), TIER_KEY_BYTES);
  id.push_back(static_cast<char>(kind));
  const uint32_t n = asked_[id]++;
  uint64_t h = Mix64(script_.seed ^ (uint64_t{kind} << 56) ^ n);
  for (size_t i = 0; i < TIER_KEY_BYTES; i += 8) {
    uint64_t w;
    std::memcpy(&w, key.bytes + i, 8);
    h = Mix64(h ^ w);
  }
  return static_cast<uint32_t>(h);
}

tier_status SimProvider::Spill(const tier_key* key, const tier_segment* segments, uint32_t count,
                               tier_done_fn done, void* user, tier_error* error) {
  return Submit(false, key, segments, count, done, user, error);
}

tier_status SimProvider::Restore(const tier_key* key, const tier_segment* segments, uint32_t count,
                                 tier_done_fn done, void* user, tier_error* error) {
  return Submit(true, key, segments, count, done, user, error);
}

tier_status SimProvider::Submit(bool restore, const tier_key* key, const tier_segment* segments,
                                uint32_t count, tier_done_fn done, void* user, tier_error* error) {
  if (key == nullptr || done == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "op");
  const tier_status valid = tier_validate_segments("sim", segments, count, error);
  if (valid != TIER_OK) return valid;
  Pending p;
  p.restore = restore;
  p.key = *key;
  p.segments.assign(segments, segments + count);
  p.done = done;
  p.user = user;
  bool now = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const bool stored = store_->entries.count(*key) != 0;
    if (restore && !stored) return tier_set_error(error, TIER_NOT_FOUND, "sim: absent");
    if (!restore && stored) return tier_set_error(error, TIER_ALREADY_EXISTS, "sim: exists");
    const uint32_t fate = Fate(*key, restore ? kRestoreCall : kSpillCall);
    const uint32_t roll = fate % 100, second = (fate >> 8) % 100, third = (fate >> 16) % 3;
    if (roll < script_.refuse_percent) {
      static const tier_status kRefusals[3] = {TIER_BUSY, TIER_NO_SPACE, TIER_IO_ERROR};
      return tier_set_error(error, kRefusals[third], "sim: scripted refusal");
    }
    if (second < script_.fail_percent) {
      static const tier_status kSpillErrors[3] = {TIER_IO_ERROR, TIER_NO_SPACE, TIER_IO_ERROR};
      static const tier_status kRestoreErrors[3] = {TIER_IO_ERROR, TIER_DATA_LOSS, TIER_DATA_LOSS};
      p.result = restore ? kRestoreErrors[third] : kSpillErrors[third];
    }
    const uint32_t when = holding_ ? (fate >> 24) % 100 : 100;  // not holding: complete now
    if (when < script_.never_percent) {
      p.never = true;
      never_.push_back(std::move(p));
      return TIER_OK;
    }
    now = when >= 100 || when < script_.never_percent + script_.inline_percent;
    if (!now) {
      held_.push_back(std::move(p));
      return TIER_OK;
    }
  }
  Complete(std::move(p));
  return TIER_OK;
}

void SimProvider::Complete(Pending p) {
  uint64_t bytes = 0;
  tier_status status = p.result;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = store_->entries.find(p.key);
    if (p.restore) {
      if (it == store_->entries.end()) {
        status = TIER_NOT_FOUND;  // removed while the restore was in flight: a miss
      } else if (status == TIER_OK) {
        for (const tier_segment& s : p.segments) {
          bool found = false;
          for (size_t j = 0; j < it->second.table.size() && !found; ++j) {
            const tier_segment_info& t = it->second.table[j];
            if (t.kind == s.kind && t.index == s.index && t.length_bytes == s.length_bytes) {
              std::memcpy(s.data, it->second.data[j].data(), s.length_bytes);
              found = true;
            }
          }
          if (!found) status = TIER_INVALID_ARGUMENT;
        }
        bytes = it->second.bytes;
      } else if (status == TIER_DATA_LOSS) {
        store_->used_bytes -= it->second.bytes;
        store_->entries.erase(it);
      }
    } else if (status == TIER_OK) {
      ColdStore::Stored entry = ColdStore::Stored::CopyOf(p.segments.data(), p.segments.size());
      bytes = entry.bytes;
      if (it != store_->entries.end()) {
        status = TIER_ALREADY_EXISTS;
      } else if (store_->used_bytes + bytes > script_.capacity_bytes) {
        status = TIER_NO_SPACE;
      } else {
        store_->used_bytes += bytes;
        store_->entries.emplace(p.key, std::move(entry));
      }
    }
  }
  CallDone(p.done, p.user, status, bytes);
}

void SimProvider::Deliver(size_t index, bool foreign) {
  Pending p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (index >= held_.size()) return;
    p = std::move(held_[index]);
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(index));
    ++executing_;
  }
  if (foreign) {
    std::thread t([this, p = std::move(p)]() mutable { Complete(std::move(p)); });
    t.join();
  } else {
    Complete(std::move(p));
  }
  Leave();
}

void SimProvider::DeliverAll() {
  std::vector<Pending> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Pending& p : held_) all.push_back(std::move(p));
    for (Pending& p : never_) all.push_back(std::move(p));
    held_.clear();
    never_.clear();
    ++executing_;
  }
  std::thread t([this, all = std::move(all)]() mutable {
    for (Pending& p : all) Complete(std::move(p));
  });
  t.join();
  Leave();
}

tier_status SimProvider::Remove(const tier_key* key, tier_error* error) {
  if (key == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "remove");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = store_->entries.find(*key);
  if (it == store_->entries.end()) return tier_set_error(error, TIER_NOT_FOUND, "sim: absent");
  store_->used_bytes -= it->second.bytes;
  store_->entries.erase(it);
  return TIER_OK;
}

tier_status SimProvider::Stat(const tier_key* key, tier_stat_result* out,
                              tier_segment_info* segments, uint32_t capacity, tier_error* error) {
  if (key == nullptr || out == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "stat");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = store_->entries.find(*key);
  if (it == store_->entries.end()) return tier_set_error(error, TIER_NOT_FOUND, "sim: absent");
  it->second.FillStat(out, segments, capacity);
  out->estimated_restore_ns = it->second.bytes / 100;
  return TIER_OK;
}

tier_status SimProvider::Stats(tier_stats* out) {
  std::lock_guard<std::mutex> lock(mu_);
  out->capacity_bytes = script_.capacity_bytes;
  out->used_bytes = store_->used_bytes;
  out->entries = store_->entries.size();
  out->inflight_ops = held_.size() + never_.size();
  return TIER_OK;
}

tier_status SimProvider::Enumerate(tier_enumerate_fn fn, void* user) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, s] : store_->entries) {
    const tier_entry e = s.Entry(key, TIER_ENTRY_V1_0_SIZE);
    if (fn(user, &e) != 0) break;
  }
  return TIER_OK;
}

tier_status SimProvider::Plan(const tier_key* key, uint64_t, tier_plan* out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = store_->entries.find(*key);
  if (it == store_->entries.end()) {
    out->decision = TIER_DECISION_SKIP_TO_ROOT;
    out->reason = TIER_REASON_MISS;
    return TIER_OK;
  }
  out->stored_bytes = it->second.bytes;
  out->estimated_restore_ns = it->second.bytes / 100;  // always cheaper than a prefill here
  out->decision = TIER_DECISION_RESTORE;
  out->reason = TIER_REASON_CHEAPER;
  return TIER_OK;
}

}  // namespace tier::simulation
