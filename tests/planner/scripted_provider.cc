// scripted_provider.cc -- libtier_testprov_scripted.so: an in-memory tier provider for the
// Planner tests whose failures are chosen by options, so each planner path can be driven:
//   capacity_bytes=N         budget (default 1 GiB)
//   spill_result=STATUS      every accepted spill completes with this status (default ok)
//   restore_result=STATUS    every accepted restore completes with this status (default ok)
//   restore_ns_per_byte=X    plan_restore's estimate per stored byte (default 0.01)
//   flip_restored_byte=1     a restore reports OK but one byte it returns is wrong (a lying
//                            provider: the server's own verification must catch it)
// STATUS is a tier_status_name(): ok, io_error, no_space, data_loss, ... Completions run inline.
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tier_provider.h"
#include "tier_validate.h"

namespace {

struct Stored {
  std::vector<tier_segment_info> table;
  std::vector<std::vector<unsigned char>> data;
  uint64_t bytes = 0;
};

struct KeyLess {
  bool operator()(const tier_key& a, const tier_key& b) const {
    return std::memcmp(a.bytes, b.bytes, TIER_KEY_BYTES) < 0;
  }
};

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
  tier_completion c{};
  c.struct_size = sizeof(c);
  c.status = status;
  c.message = status == TIER_OK ? "" : "scripted failure";
  c.logical_bytes = status == TIER_OK ? bytes : 0;
  c.stored_bytes = status == TIER_OK ? bytes : 0;
  c.duration_ns = 1000;
  done(user, &c);
}

}  // namespace

struct tier_instance {
  std::mutex mutex;
  std::map<tier_key, Stored, KeyLess> stored;
  uint64_t capacity_bytes = 1ull << 30;
  uint64_t used_bytes = 0;
  tier_status spill_result = TIER_OK;
  tier_status restore_result = TIER_OK;
  double restore_ns_per_byte = 0.01;
  bool flip_restored_byte = false;
};

namespace {

tier_status Open(const tier_host_services*, const char* ns, const tier_option* options,
                 uint32_t count, tier_instance** out, tier_error* error) {
  if (out == nullptr || ns == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "open");
  auto* self = new tier_instance();
  for (uint32_t i = 0; i < count; ++i) {
    const std::string key = options[i].key, value = options[i].value;
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
    } else {
      ok = false;
    }
    if (!ok) {
      delete self;
      return tier_set_error(error, TIER_INVALID_ARGUMENT, "scripted: option '%s'", key.c_str());
    }
  }
  *out = self;
  return TIER_OK;
}

void Close(tier_instance* self) {
  delete self;
}

tier_status Info(tier_instance*, tier_info* out, tier_error* error) {
  if (out == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "info");
  out->capabilities = 0;
  out->name = "scripted";
  out->version = "0";
  out->io_path = "memory";
  out->buffer_alignment = 1;
  out->max_inflight_ops = 64;
  return TIER_OK;
}

tier_status Stats(tier_instance* self, tier_stats* out, tier_error* error) {
  if (out == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "stats");
  std::lock_guard<std::mutex> lock(self->mutex);
  out->capacity_bytes = self->capacity_bytes;
  out->used_bytes = self->used_bytes;
  out->entries = self->stored.size();
  out->inflight_ops = 0;
  return TIER_OK;
}

tier_status Stat(tier_instance* self, const tier_key* key, tier_stat_result* out,
                 tier_segment_info* segments, uint32_t capacity, tier_error* error) {
  if (key == nullptr || out == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "stat");
  std::lock_guard<std::mutex> lock(self->mutex);
  auto it = self->stored.find(*key);
  if (it == self->stored.end()) return tier_set_error(error, TIER_NOT_FOUND, "scripted: absent");
  out->segment_count = static_cast<uint32_t>(it->second.table.size());
  out->logical_bytes = out->stored_bytes = it->second.bytes;
  out->estimated_restore_ns = static_cast<uint64_t>(it->second.bytes * self->restore_ns_per_byte);
  for (uint32_t i = 0; i < capacity && i < it->second.table.size(); ++i) {
    segments[i] = it->second.table[i];
  }
  return TIER_OK;
}

tier_status Spill(tier_instance* self, const tier_key* key, const tier_segment* segments,
                  uint32_t count, tier_done_fn done, void* user, tier_error* error) {
  if (key == nullptr || done == nullptr)
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "spill");
  tier_status status = tier_validate_segments("scripted", segments, count, error);
  if (status != TIER_OK) return status;
  Stored entry;
  for (uint32_t i = 0; i < count; ++i) {
    entry.table.push_back({segments[i].kind, segments[i].index, segments[i].length_bytes});
    const auto* data = static_cast<const unsigned char*>(segments[i].data);
    entry.data.emplace_back(data, data + segments[i].length_bytes);
    entry.bytes += segments[i].length_bytes;
  }
  const uint64_t bytes = entry.bytes;
  {
    std::lock_guard<std::mutex> lock(self->mutex);
    if (self->stored.count(*key) != 0) {
      return tier_set_error(error, TIER_ALREADY_EXISTS, "scripted: exists");
    }
    if (self->used_bytes + entry.bytes > self->capacity_bytes) {
      return tier_set_error(error, TIER_NO_SPACE, "scripted: full");
    }
    if (self->spill_result == TIER_OK) {
      self->used_bytes += entry.bytes;
      self->stored.emplace(*key, std::move(entry));
    }
  }
  Complete(done, user, self->spill_result, bytes);
  return TIER_OK;
}

tier_status Restore(tier_instance* self, const tier_key* key, const tier_segment* segments,
                    uint32_t count, tier_done_fn done, void* user, tier_error* error) {
  if (key == nullptr || done == nullptr) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "restore");
  }
  tier_status status = tier_validate_segments("scripted", segments, count, error);
  if (status != TIER_OK) return status;
  uint64_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(self->mutex);
    auto it = self->stored.find(*key);
    if (it == self->stored.end()) return tier_set_error(error, TIER_NOT_FOUND, "scripted: absent");
    if (count != it->second.table.size()) {
      return tier_set_error(error, TIER_INVALID_ARGUMENT, "scripted: table");
    }
    for (uint32_t i = 0; i < count; ++i) {
      bool found = false;
      for (size_t j = 0; j < it->second.table.size(); ++j) {
        const tier_segment_info& s = it->second.table[j];
        if (s.kind == segments[i].kind && s.index == segments[i].index &&
            s.length_bytes == segments[i].length_bytes) {
          std::memcpy(segments[i].data, it->second.data[j].data(), s.length_bytes);
          found = true;
        }
      }
      if (!found) return tier_set_error(error, TIER_INVALID_ARGUMENT, "scripted: table");
    }
    bytes = it->second.bytes;
    if (self->flip_restored_byte) {
      for (uint32_t i = 0; i < count; ++i) {
        if (segments[i].length_bytes > 0 && segments[i].kind == TIER_SEGMENT_MAIN_KV) {
          static_cast<unsigned char*>(segments[i].data)[0] ^= 0x40;
          break;
        }
      }
    }
    if (self->restore_result == TIER_DATA_LOSS) {  // a provider drops what fails verification
      self->used_bytes -= it->second.bytes;
      self->stored.erase(it);
    }
  }
  Complete(done, user, self->restore_result, bytes);
  return TIER_OK;
}

tier_status Remove(tier_instance* self, const tier_key* key, tier_error* error) {
  if (key == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "remove");
  std::lock_guard<std::mutex> lock(self->mutex);
  auto it = self->stored.find(*key);
  if (it == self->stored.end()) return tier_set_error(error, TIER_NOT_FOUND, "scripted: absent");
  self->used_bytes -= it->second.bytes;
  self->stored.erase(it);
  return TIER_OK;
}

tier_status Enumerate(tier_instance* self, tier_enumerate_fn fn, void* user, tier_error* error) {
  if (fn == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "enumerate");
  std::lock_guard<std::mutex> lock(self->mutex);
  for (const auto& [key, s] : self->stored) {
    tier_entry e{};
    e.struct_size = sizeof(e);
    e.key = key;
    e.segment_count = static_cast<uint32_t>(s.table.size());
    e.logical_bytes = e.stored_bytes = s.bytes;
    e.segments = s.table.data();
    for (size_t j = 0; j < s.table.size(); ++j) {
      if (s.table[j].kind == TIER_SEGMENT_MANIFEST) {
        e.manifest = s.data[j].data();
        e.manifest_bytes = s.data[j].size();
      }
    }
    if (fn(user, &e) != 0) break;
  }
  return TIER_OK;
}

tier_status Plan(tier_instance* self, const tier_key* key, uint64_t prefill_ns, tier_plan* out,
                 tier_error* error) {
  if (key == nullptr || out == nullptr) return tier_set_error(error, TIER_INVALID_ARGUMENT, "plan");
  std::lock_guard<std::mutex> lock(self->mutex);
  auto it = self->stored.find(*key);
  if (it == self->stored.end()) {
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
                                 nullptr};  // probe (1.1, optional): not offered

}  // namespace

extern "C" TIER_EXPORT tier_status tier_provider_entry(uint32_t major, uint32_t,
                                                       const tier_host_services*,
                                                       const tier_provider** out) {
  *out = &kScripted;
  return major == TIER_ABI_VERSION_MAJOR ? TIER_OK : TIER_UNSUPPORTED;
}
