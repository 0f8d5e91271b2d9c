// entry.cc -- the one exported symbol, tier_provider_entry, and the C table that adapts
// RadosProvider to the ABI (1.1, with probe). Every function catches everything: no exception
// crosses the boundary.
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "rados_provider.h"
#include "tier_provider.h"

namespace tier::rados {
namespace {

RadosProvider* Self(tier_instance* instance) {
  return reinterpret_cast<RadosProvider*>(instance);
}

void SetError(tier_error* error, tier_status status, const char* message) {
  if (error == nullptr) return;
  error->status = status;
  std::snprintf(error->message, sizeof(error->message), "%s", message);
}

// Runs `body` (returning Status) and maps any exception to TIER_INTERNAL.
template <typename F>
tier_status Guard(const char* what, tier_error* error, F&& body) noexcept {
  try {
    const Status status = body();
    SetError(error, status.code(), status.message().c_str());
    return status.code();
  } catch (const std::bad_alloc&) {
    char message[128];
    std::snprintf(message, sizeof(message), "rados: %s: out of memory", what);
    SetError(error, TIER_INTERNAL, message);
  } catch (const std::exception& e) {
    char message[TIER_ERROR_MESSAGE_BYTES];
    std::snprintf(message, sizeof(message), "rados: %s: internal error: %s", what, e.what());
    SetError(error, TIER_INTERNAL, message);
  } catch (...) {
    char message[128];
    std::snprintf(message, sizeof(message), "rados: %s: internal error", what);
    SetError(error, TIER_INTERNAL, message);
  }
  return TIER_INTERNAL;
}

Status NullInstance() {
  return Status::InvalidArgument("rados: NULL instance");
}

tier_status Open(const tier_host_services* host, const char* namespace_id,
                 const tier_option* options, uint32_t option_count, tier_instance** instance_out,
                 tier_error* error) {
  return Guard("open", error, [&]() -> Status {
    if (instance_out == nullptr) return Status::InvalidArgument("rados: open: NULL instance_out");
    *instance_out = nullptr;
    if (namespace_id == nullptr) return Status::InvalidArgument("rados: open: NULL namespace");
    if (option_count > 0 && options == nullptr) {
      return Status::InvalidArgument("rados: open: NULL options");
    }
    if (host != nullptr && host->abi_major != TIER_ABI_VERSION_MAJOR) {
      return Status::Unsupported("rados: open: host services of another ABI major");
    }
    Result<std::unique_ptr<RadosProvider>> provider =
        RadosProvider::Open(host, namespace_id, {options, option_count});
    if (!provider.ok()) return provider.status();
    *instance_out = reinterpret_cast<tier_instance*>(provider.take().release());
    return Status::Ok();
  });
}

void Close(tier_instance* instance) {
  if (instance == nullptr) return;
  try {
    delete Self(instance);
  } catch (...) {
    // Close() does not throw; nothing could be reported from here.
  }
}

tier_status Info(tier_instance* instance, tier_info* out, tier_error* error) {
  return Guard("info", error,
               [&] { return instance ? Self(instance)->Info(out) : NullInstance(); });
}

tier_status Stats(tier_instance* instance, tier_stats* out, tier_error* error) {
  return Guard("stats", error,
               [&] { return instance ? Self(instance)->Stats(out) : NullInstance(); });
}

tier_status StatFn(tier_instance* instance, const tier_key* key, tier_stat_result* out,
                   tier_segment_info* segments, uint32_t segment_capacity, tier_error* error) {
  return Guard("stat", error, [&] {
    return instance ? Self(instance)->Stat(key, out, segments, segment_capacity) : NullInstance();
  });
}

tier_status Spill(tier_instance* instance, const tier_key* key, const tier_segment* segments,
                  uint32_t segment_count, tier_done_fn done, void* user_data, tier_error* error) {
  return Guard("spill", error, [&] {
    return instance ? Self(instance)->Spill(key, segments, segment_count, done, user_data)
                    : NullInstance();
  });
}

tier_status RestoreFn(tier_instance* instance, const tier_key* key, const tier_segment* segments,
                      uint32_t segment_count, tier_done_fn done, void* user_data,
                      tier_error* error) {
  return Guard("restore", error, [&] {
    return instance ? Self(instance)->Restore(key, segments, segment_count, done, user_data)
                    : NullInstance();
  });
}

tier_status RemoveFn(tier_instance* instance, const tier_key* key, tier_error* error) {
  return Guard("remove", error,
               [&] { return instance ? Self(instance)->Remove(key) : NullInstance(); });
}

tier_status EnumerateFn(tier_instance* instance, tier_enumerate_fn fn, void* user_data,
                        tier_error* error) {
  return Guard("enumerate", error, [&] {
    return instance ? Self(instance)->Enumerate(fn, user_data) : NullInstance();
  });
}

tier_status PlanFn(tier_instance* instance, const tier_key* key, uint64_t predicted_prefill_ns,
                   tier_plan* out, tier_error* error) {
  return Guard("plan_restore", error, [&] {
    return instance ? Self(instance)->PlanRestore(key, predicted_prefill_ns, out) : NullInstance();
  });
}

tier_status ProbeFn(tier_instance* instance, const tier_key* keys, uint32_t key_count,
                    uint8_t* found, tier_error* error) {
  return Guard("probe", error, [&] {
    return instance ? Self(instance)->Probe(keys, key_count, found) : NullInstance();
  });
}

const tier_provider kProvider = {
    sizeof(tier_provider),
    TIER_ABI_VERSION_MAJOR,
    TIER_ABI_VERSION_MINOR,
    0,
    "rados",
    "0.1.0",
    Open,
    Close,
    Info,
    Stats,
    StatFn,
    Spill,
    RestoreFn,
    RemoveFn,
    EnumerateFn,
    PlanFn,
    ProbeFn,
};

}  // namespace
}  // namespace tier::rados

extern "C" TIER_EXPORT tier_status tier_provider_entry(uint32_t host_abi_major,
                                                       uint32_t /*host_abi_minor*/,
                                                       const tier_host_services* /*host*/,
                                                       const tier_provider** provider_out) {
  if (provider_out == nullptr) return TIER_INVALID_ARGUMENT;
  // Set even on a major mismatch, so the host can name both versions in its error.
  *provider_out = &tier::rados::kProvider;
  if (host_abi_major != TIER_ABI_VERSION_MAJOR) return TIER_UNSUPPORTED;
  return TIER_OK;
}
