/*
 * test_provider.c -- small providers built only for the loader tests, one shared object per
 * variant (TEST_VARIANT_*). Each is a minimal "absent tier" like the null provider, bent in
 * exactly one way: a wrong major, a missing entry symbol, a short table, a NULL required slot, a
 * newer minor (with a slot this host does not know) or an older minor.
 */
#include <stddef.h>
#include <stdio.h>

#include "tier_provider.h"
#include "tier_validate.h"

static uint32_t g_host_minor_seen; /* what the entry point was told, reported by info() */
static char g_io_path[64];

struct tier_instance {
  int unused;
};
static struct tier_instance g_instance;

static tier_status t_open(const tier_host_services* host, const char* namespace_id,
                          const tier_option* options, uint32_t option_count,
                          tier_instance** instance_out, tier_error* error) {
  (void)namespace_id;
  (void)options;
  if (option_count > 0) return tier_set_error(error, TIER_INVALID_ARGUMENT, "test: no options");
  /* A provider uses a host service only if the host's table has it. */
  if (!TIER_HAS_SLOT(host, tier_host_services, monotonic_ns)) {
    return tier_set_error(error, TIER_UNSUPPORTED, "test: host has no clock");
  }
  snprintf(g_io_path, sizeof(g_io_path), "host-abi=1.%u services=%u", g_host_minor_seen,
           host->struct_size);
  *instance_out = &g_instance;
  return TIER_OK;
}
static void t_close(tier_instance* instance) {
  (void)instance;
}
static tier_status t_info(tier_instance* instance, tier_info* out, tier_error* error) {
  (void)instance;
  (void)error;
  if (TIER_HAS_FIELD(out, tier_info, capabilities)) out->capabilities = TIER_CAP_ZERO_CAPACITY;
  if (TIER_HAS_FIELD(out, tier_info, name)) out->name = "test";
  if (TIER_HAS_FIELD(out, tier_info, version)) out->version = "0";
  if (TIER_HAS_FIELD(out, tier_info, io_path)) out->io_path = g_io_path;
  if (TIER_HAS_FIELD(out, tier_info, buffer_alignment)) out->buffer_alignment = 1;
  return TIER_OK;
}
static tier_status t_stats(tier_instance* instance, tier_stats* out, tier_error* error) {
  (void)instance;
  (void)error;
  if (TIER_HAS_FIELD(out, tier_stats, capacity_bytes)) out->capacity_bytes = 0;
  return TIER_OK;
}
static tier_status t_stat(tier_instance* instance, const tier_key* key, tier_stat_result* out,
                          tier_segment_info* segments, uint32_t capacity, tier_error* error) {
  (void)instance, (void)key, (void)out, (void)segments, (void)capacity;
  return tier_set_error(error, TIER_NOT_FOUND, "test: empty");
}
static tier_status t_spill(tier_instance* instance, const tier_key* key,
                           const tier_segment* segments, uint32_t count, tier_done_fn done,
                           void* user_data, tier_error* error) {
  (void)instance, (void)key, (void)segments, (void)count, (void)done, (void)user_data;
  return tier_set_error(error, TIER_NO_SPACE, "test: capacity 0");
}
/* Unused in the null_slot variant. */
__attribute__((unused)) static tier_status t_restore(tier_instance* instance, const tier_key* key,
                                                     const tier_segment* segments, uint32_t count,
                                                     tier_done_fn done, void* user_data,
                                                     tier_error* error) {
  (void)instance, (void)key, (void)segments, (void)count, (void)done, (void)user_data;
  return tier_set_error(error, TIER_NOT_FOUND, "test: empty");
}
static tier_status t_remove(tier_instance* instance, const tier_key* key, tier_error* error) {
  (void)instance, (void)key;
  return tier_set_error(error, TIER_NOT_FOUND, "test: empty");
}
static tier_status t_enumerate(tier_instance* instance, tier_enumerate_fn fn, void* user_data,
                               tier_error* error) {
  (void)instance, (void)fn, (void)user_data, (void)error;
  return TIER_OK;
}
static tier_status t_plan(tier_instance* instance, const tier_key* key, uint64_t prefill_ns,
                          tier_plan* out, tier_error* error) {
  (void)instance, (void)key, (void)prefill_ns, (void)error;
  out->decision = TIER_DECISION_SKIP_TO_ROOT;
  out->reason = TIER_REASON_MISS;
  return TIER_OK;
}
static void t_future_op(void) {}

/* A table as a later minor (1.7) would define it: v1.0 plus one appended slot. */
typedef struct test_provider_v1_7 {
  tier_provider v1_0;
  void (*future_op)(void);
} test_provider_v1_7;

#if defined(TEST_VARIANT_WRONG_MAJOR)
#define T_MAJOR 2u
#else
#define T_MAJOR TIER_ABI_VERSION_MAJOR
#endif
#if defined(TEST_VARIANT_MINOR_NEWER)
#define T_MINOR 7u
#define T_SIZE sizeof(test_provider_v1_7)
#elif defined(TEST_VARIANT_SHORT_TABLE)
#define T_MINOR TIER_ABI_VERSION_MINOR
#define T_SIZE offsetof(tier_provider, spill)
#else
#define T_MINOR TIER_ABI_VERSION_MINOR
#define T_SIZE sizeof(tier_provider)
#endif
#if defined(TEST_VARIANT_NULL_SLOT)
#define T_RESTORE NULL
#else
#define T_RESTORE t_restore
#endif

static const test_provider_v1_7 kTable = {
    {
        T_SIZE, T_MAJOR, T_MINOR, 0, "test", "0", t_open, t_close, t_info, t_stats, t_stat, t_spill,
        T_RESTORE, t_remove, t_enumerate, t_plan,
#ifdef TIER_PROVIDER_V1_1_SIZE
        NULL /* probe: optional */
#endif
    },
    t_future_op};

#if defined(TEST_VARIANT_NO_ENTRY)
#define ENTRY_NAME tier_provider_entry_misspelt
#else
#define ENTRY_NAME tier_provider_entry
#endif

TIER_EXPORT tier_status ENTRY_NAME(uint32_t host_abi_major, uint32_t host_abi_minor,
                                   const tier_host_services* host,
                                   const tier_provider** provider_out) {
  (void)host;
  g_host_minor_seen = host_abi_minor;
  *provider_out = &kTable.v1_0;
  return host_abi_major == T_MAJOR ? TIER_OK : TIER_UNSUPPORTED;
}
