// adapter.h -- the C table of abi/tier_provider.h generated from a C++ provider class, so the
// rules of the boundary are written once: no exception crosses it (each one becomes
// TIER_INTERNAL with a message), every error is reported through `tier_error` (when given), a NULL
// instance and open's NULL arguments are refused with TIER_INVALID_ARGUMENT, open refuses host
// services of another ABI major, and close never throws. Header-only over tier::abi
// (tier/status.h): built against the frozen 1.0 header, the table simply has no probe.
//
// What `T` provides (the same contracts as abi/tier_provider.h; pointers exactly as the host
// passed them, an instance never NULL):
//   static Result<std::unique_ptr<T>> Open(const tier_host_services* host, const char* or
//                                          std::string namespace_id,
//                                          std::span<const tier_option> options);
//       or Result<T*>, when T ends its own instances: then `static void CloseInstance(T*)`
//   Status Info(tier_info*), Stats(tier_stats*),
//          Stat(const tier_key*, tier_stat_result*, tier_segment_info*, uint32_t capacity),
//          Spill(const tier_key*, const tier_segment*, uint32_t count, tier_done_fn, void*),
//          Restore(same), Remove(const tier_key*), Enumerate(tier_enumerate_fn, void*),
//          PlanRestore(const tier_key*, uint64_t predicted_prefill_ns, tier_plan*),
//          Probe(const tier_key*, uint32_t key_count, uint8_t* found)   (1.1)
//   ~T() closes (cancels what is queued, waits for what runs), unless CloseInstance does.
//
// Use (one provider's entry.cc, at global scope): TIER_PROVIDER_ENTRY(tier::disk::DiskProvider,
// "disk", "0.1.0") defines the one exported symbol, tier_provider_entry, over the generated table.
#pragma once

#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <span>
#include <string>

#include "tier/status.h"
#include "tier_provider.h"

namespace tier::provider {

// What the table and every message call the provider: static strings.
struct ProviderNames {
  const char* name;     // "disk": the table's name, a metric label, the prefix of messages
  const char* version;  // the provider's own version
};

// Writes (status, message) into `error`, the message cut to its buffer; nothing when NULL.
inline void SetError(tier_error* error, tier_status status, const char* message) noexcept {
  if (error == nullptr) return;
  error->status = status;
  std::snprintf(error->message, sizeof(error->message), "%s", message);
}

// Reports `status` through `error` and returns its code.
inline tier_status Report(const Status& status, tier_error* error) noexcept {
  SetError(error, status.code(), status.message().c_str());
  return status.code();
}

// Runs `body` (returning Status) and reports its status; any exception becomes TIER_INTERNAL,
// "<provider>: <what>: out of memory" or "<provider>: <what>: internal error[: what()]".
template <typename F>
tier_status Guard(const char* provider, const char* what, tier_error* error, F&& body) noexcept {
  char message[TIER_ERROR_MESSAGE_BYTES];
  try {
    return Report(body(), error);
  } catch (const std::bad_alloc&) {
    std::snprintf(message, sizeof(message), "%s: %s: out of memory", provider, what);
  } catch (const std::exception& e) {
    std::snprintf(message, sizeof(message), "%s: %s: internal error: %s", provider, what, e.what());
  } catch (...) {
    std::snprintf(message, sizeof(message), "%s: %s: internal error", provider, what);
  }
  SetError(error, TIER_INTERNAL, message);
  return TIER_INTERNAL;
}

template <typename T, const ProviderNames& kNames>
class ProviderAdapter {
 public:
  // The table: static storage, constant-initialized (no code runs before the host calls in).
  static const tier_provider* Table() noexcept {
    static constexpr tier_provider kTable = {
        .struct_size = sizeof(tier_provider),
        .abi_major = TIER_ABI_VERSION_MAJOR,
        .abi_minor = TIER_ABI_VERSION_MINOR,
        .reserved = 0,
        .name = kNames.name,
        .version = kNames.version,
        .open = &OpenFn,
        .close = &CloseFn,
        .info = &InfoFn,
        .stats = &StatsFn,
        .stat = &StatFn,
        .spill = &SpillFn,
        .restore = &RestoreFn,
        .remove = &RemoveFn,
        .enumerate = &EnumerateFn,
        .plan_restore = &PlanFn,
#ifdef TIER_PROVIDER_V1_1_SIZE
        .probe = &ProbeFn,
#endif
    };
    return &kTable;
  }

  // The body of tier_provider_entry. The table is handed out on a major mismatch too: the host
  // reads its versions to name both in its error.
  static tier_status Entry(uint32_t host_abi_major, const tier_provider** provider_out) noexcept {
    if (provider_out == nullptr) return TIER_INVALID_ARGUMENT;
    *provider_out = Table();
    return host_abi_major == TIER_ABI_VERSION_MAJOR ? TIER_OK : TIER_UNSUPPORTED;
  }

 private:
  static T* Self(tier_instance* instance) {
    return reinterpret_cast<T*>(instance);
  }
  static T* Release(std::unique_ptr<T> owned) {
    return owned.release();
  }
  static T* Release(T* owned) {
    return owned;
  }

  // Runs `call(T*)` guarded, or refuses a NULL instance.
  template <typename F>
  static tier_status Call(const char* what, tier_instance* instance, tier_error* error,
                          F&& call) noexcept {
    return Guard(kNames.name, what, error, [&]() -> Status {
      if (instance == nullptr) {
        return Status::InvalidArgument(std::string(kNames.name) + ": NULL instance");
      }
      return call(Self(instance));
    });
  }

  static tier_status OpenFn(const tier_host_services* host, const char* namespace_id,
                            const tier_option* options, uint32_t option_count,
                            tier_instance** instance_out, tier_error* error) noexcept {
    return Guard(kNames.name, "open", error, [&]() -> Status {
      const std::string prefix = std::string(kNames.name) + ": open: ";
      if (instance_out == nullptr) return Status::InvalidArgument(prefix + "NULL instance_out");
      *instance_out = nullptr;
      if (namespace_id == nullptr) return Status::InvalidArgument(prefix + "NULL namespace");
      if (option_count > 0 && options == nullptr) {
        return Status::InvalidArgument(prefix + "NULL options");
      }
      if (host != nullptr && host->abi_major != TIER_ABI_VERSION_MAJOR) {
        return Status::Unsupported(prefix + "host services of another ABI major");
      }
      auto opened =
          T::Open(host, namespace_id, std::span<const tier_option>(options, option_count));
      if (!opened.ok()) return opened.status();
      *instance_out = reinterpret_cast<tier_instance*>(Release(opened.take()));
      return Status::Ok();
    });
  }

  static void CloseFn(tier_instance* instance) noexcept {
    if (instance == nullptr) return;
    try {
      if constexpr (requires(T * self) { T::CloseInstance(self); }) {
        T::CloseInstance(Self(instance));
      } else {
        delete Self(instance);
      }
    } catch (...) {
      // Closing does not throw; nothing could be reported from here.
    }
  }

  static tier_status InfoFn(tier_instance* instance, tier_info* out, tier_error* error) noexcept {
    return Call("info", instance, error, [&](T* self) { return self->Info(out); });
  }

  static tier_status StatsFn(tier_instance* instance, tier_stats* out, tier_error* error) noexcept {
    return Call("stats", instance, error, [&](T* self) { return self->Stats(out); });
  }

  static tier_status StatFn(tier_instance* instance, const tier_key* key, tier_stat_result* out,
                            tier_segment_info* segments, uint32_t segment_capacity,
                            tier_error* error) noexcept {
    return Call("stat", instance, error,
                [&](T* self) { return self->Stat(key, out, segments, segment_capacity); });
  }

  static tier_status SpillFn(tier_instance* instance, const tier_key* key,
                             const tier_segment* segments, uint32_t segment_count,
                             tier_done_fn done, void* user_data, tier_error* error) noexcept {
    return Call("spill", instance, error, [&](T* self) {
      return self->Spill(key, segments, segment_count, done, user_data);
    });
  }

  static tier_status RestoreFn(tier_instance* instance, const tier_key* key,
                               const tier_segment* segments, uint32_t segment_count,
                               tier_done_fn done, void* user_data, tier_error* error) noexcept {
    return Call("restore", instance, error, [&](T* self) {
      return self->Restore(key, segments, segment_count, done, user_data);
    });
  }

  static tier_status RemoveFn(tier_instance* instance, const tier_key* key,
                              tier_error* error) noexcept {
    return Call("remove", instance, error, [&](T* self) { return self->Remove(key); });
  }

  static tier_status EnumerateFn(tier_instance* instance, tier_enumerate_fn fn, void* user_data,
                                 tier_error* error) noexcept {
    return Call("enumerate", instance, error,
                [&](T* self) { return self->Enumerate(fn, user_data); });
  }

  static tier_status PlanFn(tier_instance* instance, const tier_key* key,
                            uint64_t predicted_prefill_ns, tier_plan* out,
                            tier_error* error) noexcept {
    return Call("plan_restore", instance, error,
                [&](T* self) { return self->PlanRestore(key, predicted_prefill_ns, out); });
  }

#ifdef TIER_PROVIDER_V1_1_SIZE
  static tier_status ProbeFn(tier_instance* instance, const tier_key* keys, uint32_t key_count,
                             uint8_t* found, tier_error* error) noexcept {
    return Call("probe", instance, error,
                [&](T* self) { return self->Probe(keys, key_count, found); });
  }
#endif
};

}  // namespace tier::provider

// Defines tier_provider_entry, the provider's one exported symbol, handing out the table that
// ProviderAdapter generates from `Provider` (named `name`, at version `version`: string
// literals). Once per provider, at global scope.
#define TIER_PROVIDER_ENTRY(Provider, name, version)                                              \
  namespace {                                                                                     \
  constexpr ::tier::provider::ProviderNames kTierProviderNames{name, version};                    \
  }                                                                                               \
  extern "C" TIER_EXPORT tier_status tier_provider_entry(                                         \
      uint32_t host_abi_major, uint32_t /*host_abi_minor*/, const tier_host_services* /*host*/,   \
      const tier_provider** provider_out) {                                                       \
    return ::tier::provider::ProviderAdapter<Provider, kTierProviderNames>::Entry(host_abi_major, \
                                                                                  provider_out);  \
  }
