// scripted_provider.cc -- libtier_scripted.so: an in-memory tier provider for the Host tests
// whose behaviour is chosen by options, so each path of the library can be driven:
//   capacity_bytes=N         budget (default 1 GiB)
//   spill_result=STATUS      every accepted spill completes with this status (default ok)
//   restore_result=STATUS    every accepted restore completes with this status (default ok)
//   restore_ns_per_byte=X    plan_restore's estimate per stored byte (default 0.01)
//   flip_restored_byte=1     a restore reports OK but one byte it returns is wrong (a lying
//                            provider: the server's own check must catch it)
//   spill_delay_ms=N, restore_delay_ms=N   completions arrive N ms later, from another thread
//   plan_delay_ms=N          plan_restore takes N ms (it runs on the host's provider thread)
//   restore_never=1          restores are accepted and never complete (a stuck provider)
//   store=NAME               instances with the same NAME share one store: a shared tier
//                            (TIER_CAP_SHARED, with probe), as a fleet on one pool sees it
//   late_open=1              open is late: it waits for tier_scripted_release_late(), then uses
//                            its host services (log, metrics) and returns
//   late_calls=1             so is every other call but close (info, stats, stat, spill, ...)
// The exported tier_scripted_* functions at the end let a test release late calls and see what
// the host services answered them.
// STATUS is a tier_status_name(): ok, io_error, no_space, data_loss, ...
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "stored_checkpoint.h"
#include "tier_provider.h"
#include "tier_validate.h"

namespace {

using Stored = tier::test::StoredCheckpoint;
using tier::test::KeyLess;

struct Store {
  std::mutex mutex;
  std::map<tier_key, Stored, KeyLess> stored;
  uint64_t used_bytes = 0;
};

// Stores shared by name across instances of this process (store=NAME).
std::mutex g_stores_mutex;
std::map<std::string, std::shared_ptr<Store>> g_stores;

tier_status StatusFromName(const std::string& name, bool* ok) {
  for (int s = 0; s < TIER_STATUS_COUNT; ++s) {
    if (name == tier_status_name(s)) {
      *ok = true;
      return s;
    }
  }
  *ok = false;
  return TIER_INTERNAL;
}

void Complete(tier_done_fn done, void* user, tier_status status, uint64_t bytes) {
  tier::test::CompleteWith(done, user, status, bytes, "scripted failure");
}

// Runs closures at their due time on one thread; Close() runs what is left at once.
class Delayer {
 public:
  Delayer() : thread_([this] { Loop(); }) {}
  ~Delayer() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void After(int ms, std::function<void()> work) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      due_.emplace(std::chrono::steady_clock::now() + std::chrono::milliseconds(ms),
                   std::move(work));
    }
    wake_.notify_all();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (due_.empty()) {
        if (stopping_) return;
        wake_.wait(lock);
        continue;
      }
      auto first = due_.begin();
      if (!stopping_ && std::chrono::steady_clock::now() < first->first) {
        wake_.wait_until(lock, first->first);
        continue;
      }
      std::function<void()> work = std::move(first->second);
      due_.erase(first);
      lock.unlock();
      work();
      lock.lock();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  std::multimap<std::chrono::steady_clock::time_point, std::function<void()>> due_;
  bool stopping_ = false;
  std::thread thread_;
};

// Late calls (late_open, late_calls): held until the test releases them.
std::mutex g_late_mutex;
std::condition_variable g_late_cv;
bool g_late_released = false;
uint64_t g_late_returned = 0;      // late calls that returned
uint64_t g_late_live_answers = 0;  // metric services that answered a late call with a handle
uint64_t g_closed = 0;             // instances closed (any)

}  // namespace

struct tier_instance {
  std::shared_ptr<Store> store = std::make_shared<Store>();
  bool shared = false;
  uint64_t capacity_bytes = 1ull << 30;
  tier_status spill_result = TIER_OK;
  tier_status restore_result = TIER_OK;
  double restore_ns_per_byte = 0.01;
  bool flip_restored_byte = false;
  int spill_delay_ms = 0, restore_delay_ms = 0, plan_delay_ms = 0;
  bool restore_never = false;
  bool late_open = false, late_calls = false;
  uint64_t buffer_alignment = 1;   // declared in info; spill and restore refuse a pointer off it
  uint32_t max_inflight_ops = 64;  // declared in info (0 = no limit)
  const tier_host_services* host = nullptr;
  tier_metric* opened_metric = nullptr;  // a handle the host gave at open
  std::unique_ptr<Delayer> delayer = std::make_unique<Delayer>();
};

namespace {

bool SetOption(tier_instance* self, const std::string& key, const std::string& value) {
  bool ok = true;
  if (key == "capacity_bytes") {
    self->capacity_bytes = std::strtoull(value.c_str(), nullptr, 10);
  } else if (key == "spill_result") {
    self->spill_result = StatusFromName(value, &ok);
  } else if (key == "restore_result") {
    self->restore_result = StatusFromName(value, &ok);
  } else if (key == "flip_restored_byte") {
    self->flip_restored_byte = value == "1";
  } else if (key == "restore_ns_per_byte") {
    self->restore_ns_per_byte = std::strtod(value.c_str(), nullptr);
  } else if (key == "spill_delay_ms") {
    self->spill_delay_ms = std::atoi(value.c_str());
  } else if (key == "restore_delay_ms") {
    self->restore_delay_ms = std::atoi(value.c_str());
  } else if (key == "plan_delay_ms") {
    self->plan_delay_ms = std::atoi(value.c_str());
  } else if (key == "restore_never") {
    self->restore_never = value == "1";
  } else if (key == "late_open") {
    self->late_open = value == "1";
  } else if (key == "late_calls") {
    self->late_calls = value == "1";
  } else if (key == "buffer_alignment") {
    self->buffer_alignment = std::strtoull(value.c_str(), nullptr, 10);
  } else if (key == "max_inflight_ops") {
    self->max_inflight_ops = static_cast<uint32_t>(std::strtoul(value.c_str(), nullptr, 10));
  } else if (key == "store") {
    std::lock_guard<std::mutex> lock(g_stores_mutex);
    auto& store = g_stores[value];
    if (store == nullptr) store = std::make_shared<Store>();
    self->store = store;
    self->shared = true;
  } else {
    ok = false;
  }
  return ok;
}

// A metric family and series from the host, as a provider registers them at open.
tier_metric* AskForMetric(const tier_host_services* host) {
  if (!TIER_HAS_SLOT(host, tier_host_services, metric)) return nullptr;
  tier_metric_family* family =
      host->metric_family(host->host_context, TIER_METRIC_COUNTER, "tier_scripted_late_total",
                          "Late calls of the scripted provider", nullptr, 0, nullptr, 0);
  return family != nullptr ? host->metric(host->host_context, family, nullptr, 0) : nullptr;
}

// Waits for the test's release, then uses the host services as a provider would on its way out.
void BeLate(tier_instance* self, const tier_host_services* host) {
  {
    std::unique_lock<std::mutex> lock(g_late_mutex);
    g_late_cv.wait(lock, [] { return g_late_released; });
  }
  if (TIER_HAS_SLOT(host, tier_host_services, log)) {
    host->log(host->host_context, TIER_LOG_INFO, "scripted: a late call returns");
  }
  tier_metric* asked = AskForMetric(host);
  if (self != nullptr && self->opened_metric != nullptr) {
    host->metric_add(host->host_context, self->opened_metric, 1);
  }
  std::lock_guard<std::mutex> lock(g_late_mutex);
  if (asked != nullptr) ++g_late_live_answers;
  ++g_late_returned;
}

void LateCall(tier_instance* self) {
  if (self != nullptr && self->late_calls) BeLate(self, self->host);
}

tier_status Open(const tier_host_services* host, const char* ns, const tier_option* options,
                 uint32_t count, tier_instance** out, tier_error* error) {
  if (out == nullptr || ns == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "open");
  auto* self = new tier_instance();
  for (uint32_t i = 0; i < count; ++i) {
    if (!SetOption(self, options[i].key, options[i].value)) {
      delete self;
      return tier_set_error(error, TIER_INVALID_ARGUMENT, "scripted: option '%s'", options[i].key);
    }
  }
  self->host = host;
  if (self->late_open) {
    BeLate(nullptr, host);
  } else if (self->late_calls) {
    self->opened_metric = AskForMetric(host);
  }
  *out = self;
  return TIER_OK;
}

void Close(tier_instance* self) {
  delete self;  // the delayer runs what is left before it goes
  std::lock_guard<std::mutex> lock(g_late_mutex);
  ++g_closed;
}

tier_status Info(tier_instance* self, tier_info* out, tier_error* error) {
  LateCall(self);
  if (out == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "info");
  out->capabilities = self->shared ? TIER_CAP_SHARED : 0;
  out->name = "scripted";
  out->version = "0";
  out->io_path = "memory";
  out->buffer_alignment = self->buffer_alignment;
  out->max_inflight_ops = self->max_inflight_ops;
  return TIER_OK;
}

tier_status Stats(tier_instance* self, tier_stats* out, tier_error* error) {
  LateCall(self);
  if (out == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "stats");
  std::lock_guard<std::mutex> lock(self->store->mutex);
  out->capacity_bytes = self->capacity_bytes;
  out->used_bytes = self->store->used_bytes;
  out->entries = self->store->stored.size();
  out->inflight_ops = 0;
  return TIER_OK;
}

tier_status Stat(tier_instance* self, const tier_key* key, tier_stat_result* out,
                 tier_segment_info* segments, uint32_t capacity, tier_error* error) {
  LateCall(self);
  if (key == nullptr || out == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "stat");
  std::lock_guard<std::mutex> lock(self->store->mutex);
  auto it = self->store->stored.find(*key);
  if (it == self->store->stored.end()) {
    return tier_set_error(error, TIER_NOT_FOUND, "scripted: absent");
  }
  it->second.FillStat(out, segments, capacity);
  out->estimated_restore_ns = static_cast<uint64_t>(it->second.bytes * self->restore_ns_per_byte);
  return TIER_OK;
}

// The declared buffer_alignment, held to: a misaligned segment pointer is refused.
tier_status CheckAligned(const tier_instance* self, const tier_segment* segments, uint32_t count,
                         tier_error* error) {
  const uint64_t alignment = self->buffer_alignment == 0 ? 1 : self->buffer_alignment;
  for (uint32_t i = 0; i < count; ++i) {
    if (reinterpret_cast<uintptr_t>(segments[i].data) % alignment != 0) {
      return tier_set_error(error, TIER_INVALID_ARGUMENT, "scripted: segment %u off alignment", i);
    }
  }
  return TIER_OK;
}

tier_status Spill(tier_instance* self, const tier_key* key, const tier_segment* segments,
                  uint32_t count, tier_done_fn done, void* user, tier_error* error) {
  LateCall(self);
  if (key == nullptr || done == nullptr) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "spill");
  }
  tier_status status = tier_validate_segments("scripted", segments, count, error);
  if (status != TIER_OK) return status;
  status = CheckAligned(self, segments, count, error);
  if (status != TIER_OK) return status;
  Stored entry = Stored::CopyOf(segments, count);
  const uint64_t bytes = entry.bytes;
  {
    std::lock_guard<std::mutex> lock(self->store->mutex);
    if (self->store->stored.count(*key) != 0) {
      return tier_set_error(error, TIER_ALREADY_EXISTS, "scripted: exists");
    }
    if (self->store->used_bytes + entry.bytes > self->capacity_bytes) {
      return tier_set_error(error, TIER_NO_SPACE, "scripted: full");
    }
    if (self->spill_result == TIER_OK) {
      self->store->used_bytes += entry.bytes;
      self->store->stored.emplace(*key, std::move(entry));
    }
  }
  const tier_status result = self->spill_result;
  if (self->spill_delay_ms > 0) {
    self->delayer->After(self->spill_delay_ms, [=] { Complete(done, user, result, bytes); });
  } else {
    Complete(done, user, result, bytes);
  }
  return TIER_OK;
}

// Copies the stored segments into the caller's; INVALID_ARGUMENT if the table differs.
tier_status CopyOut(tier_instance* self, const Stored& s, const tier_segment* segments,
                    uint32_t count, tier_error* error) {
  if (count != s.table.size()) return tier_set_error(error, TIER_INVALID_ARGUMENT, "table");
  for (uint32_t i = 0; i < count; ++i) {
    bool found = false;
    for (size_t j = 0; j < s.table.size(); ++j) {
      const tier_segment_info& t = s.table[j];
      if (t.kind == segments[i].kind && t.index == segments[i].index &&
          t.length_bytes == segments[i].length_bytes) {
        std::memcpy(segments[i].data, s.data[j].data(), t.length_bytes);
        found = true;
      }
    }
    if (!found) return tier_set_error(error, TIER_INVALID_ARGUMENT, "scripted: table");
  }
  if (self->flip_restored_byte) {
    for (uint32_t i = 0; i < count; ++i) {
      if (segments[i].length_bytes > 0 && segments[i].kind == TIER_SEGMENT_MAIN_KV) {
        static_cast<unsigned char*>(segments[i].data)[0] ^= 0x40;
        break;
      }
    }
  }
  return TIER_OK;
}

tier_status Restore(tier_instance* self, const tier_key* key, const tier_segment* segments,
                    uint32_t count, tier_done_fn done, void* user, tier_error* error) {
  LateCall(self);
  if (key == nullptr || done == nullptr) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "restore");
  }
  tier_status status = tier_validate_segments("scripted", segments, count, error);
  if (status != TIER_OK) return status;
  status = CheckAligned(self, segments, count, error);
  if (status != TIER_OK) return status;
  uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(self->store->mutex);
    auto it = self->store->stored.find(*key);
    if (it == self->store->stored.end()) {
      return tier_set_error(error, TIER_NOT_FOUND, "scripted: absent");
    }
    status = CopyOut(self, it->second, segments, count, error);
    if (status != TIER_OK) return status;
    bytes = it->second.bytes;
    if (self->restore_result == TIER_DATA_LOSS) {  // a provider drops what fails verification
      self->store->used_bytes -= it->second.bytes;
      self->store->stored.erase(it);
    }
  }
  if (self->restore_never) return TIER_OK;  // accepted; the completion never comes
  const tier_status result = self->restore_result;
  if (self->restore_delay_ms > 0) {
    self->delayer->After(self->restore_delay_ms, [=] { Complete(done, user, result, bytes); });
  } else {
    Complete(done, user, result, bytes);
  }
  return TIER_OK;
}

tier_status Remove(tier_instance* self, const tier_key* key, tier_error* error) {
  LateCall(self);
  if (key == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "remove");
  std::lock_guard<std::mutex> lock(self->store->mutex);
  auto it = self->store->stored.find(*key);
  if (it == self->store->stored.end()) {
    return tier_set_error(error, TIER_NOT_FOUND, "scripted: absent");
  }
  self->store->used_bytes -= it->second.bytes;
  self->store->stored.erase(it);
  return TIER_OK;
}

tier_status Enumerate(tier_instance* self, tier_enumerate_fn fn, void* user, tier_error* error) {
  LateCall(self);
  if (fn == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "enumerate");
  std::lock_guard<std::mutex> lock(self->store->mutex);
  for (const auto& [key, s] : self->store->stored) {
    const tier_entry e = s.Entry(key, sizeof(tier_entry));
    if (fn(user, &e) != 0) break;
  }
  return TIER_OK;
}

tier_status Plan(tier_instance* self, const tier_key* key, uint64_t prefill_ns, tier_plan* out,
                 tier_error* error) {
  LateCall(self);
  if (key == nullptr || out == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "plan");
  if (self->plan_delay_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(self->plan_delay_ms));
  }
  std::lock_guard<std::mutex> lock(self->store->mutex);
  auto it = self->store->stored.find(*key);
  if (it == self->store->stored.end()) {
    out->decision = TIER_DECISION_SKIP_TO_ROOT;
    out->reason = TIER_REASON_MISS;
    return TIER_OK;
  }
  out->stored_bytes = it->second.bytes;
  out->estimated_restore_ns = static_cast<uint64_t>(it->second.bytes * self->restore_ns_per_byte);
  const bool cheaper = out->estimated_restore_ns < prefill_ns;
  out->decision = cheaper ? TIER_DECISION_RESTORE : TIER_DECISION_SKIP_TO_ROOT;
  out->reason = cheaper ? TIER_REASON_CHEAPER : TIER_REASON_COST;
  return TIER_OK;
}

tier_status Probe(tier_instance* self, const tier_key* keys, uint32_t count, uint8_t* found,
                  tier_error* error) {
  LateCall(self);
  if (keys == nullptr || found == nullptr || count == 0 || count > TIER_PROBE_MAX_KEYS) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "scripted: probe");
  }
  std::lock_guard<std::mutex> lock(self->store->mutex);
  for (uint32_t i = 0; i < count; ++i) found[i] = self->store->stored.count(keys[i]) ? 1 : 0;
  return TIER_OK;
}

const tier_provider kScripted = {sizeof(tier_provider),
                                 TIER_ABI_VERSION_MAJOR,
                                 TIER_ABI_VERSION_MINOR,
                                 0,
                                 "scripted",
                                 "0",
                                 Open,
                                 Close,
                                 Info,
                                 Stats,
                                 Stat,
                                 Spill,
                                 Restore,
                                 Remove,
                                 Enumerate,
                                 Plan,
                                 Probe};

}  // namespace

extern "C" TIER_EXPORT tier_status tier_provider_entry(uint32_t major, uint32_t,
                                                       const tier_host_services*,
                                                       const tier_provider** out) {
  if (out == nullptr) return TIER_INVALID_ARGUMENT;
  *out = &kScripted;
  return major == TIER_ABI_VERSION_MAJOR ? TIER_OK : TIER_UNSUPPORTED;
}

// For the tests of late providers: releases every late call (now and from now on until the next
// reset), and reports how many returned and how many metric services still answered them.
extern "C" TIER_EXPORT void tier_scripted_release_late(void) {
  {
    std::lock_guard<std::mutex> lock(g_late_mutex);
    g_late_released = true;
  }
  g_late_cv.notify_all();
}
extern "C" TIER_EXPORT void tier_scripted_reset_late(void) {
  std::lock_guard<std::mutex> lock(g_late_mutex);
  g_late_released = false;
  g_late_returned = 0;
  g_late_live_answers = 0;
  g_closed = 0;
}
extern "C" TIER_EXPORT uint64_t tier_scripted_late_returned(void) {
  std::lock_guard<std::mutex> lock(g_late_mutex);
  return g_late_returned;
}
extern "C" TIER_EXPORT uint64_t tier_scripted_late_live_answers(void) {
  std::lock_guard<std::mutex> lock(g_late_mutex);
  return g_late_live_answers;
}
extern "C" TIER_EXPORT uint64_t tier_scripted_closed(void) {
  std::lock_guard<std::mutex> lock(g_late_mutex);
  return g_closed;
}

// For the encryption tests: the bytes a named store (store=NAME) holds for segment (kind, index)
// of `key`, writable so a test can tamper with them; NULL when absent. Valid until the store
// changes; only while no call is under way.
extern "C" TIER_EXPORT unsigned char* tier_scripted_segment(const char* store, const tier_key* key,
                                                            uint32_t kind, uint32_t index,
                                                            uint64_t* length_bytes) {
  std::shared_ptr<Store> s;
  {
    std::lock_guard<std::mutex> lock(g_stores_mutex);
    auto it = g_stores.find(store);
    if (it == g_stores.end()) return nullptr;
    s = it->second;
  }
  std::lock_guard<std::mutex> lock(s->mutex);
  auto it = s->stored.find(*key);
  if (it == s->stored.end()) return nullptr;
  for (size_t j = 0; j < it->second.table.size(); ++j) {
    if (it->second.table[j].kind != kind || it->second.table[j].index != index) continue;
    *length_bytes = it->second.data[j].size();
    return it->second.data[j].data();
  }
  return nullptr;
}
