/*
 * null_provider.c -- libtier_null.so: the cold tier absent, in plain C to prove the ABI is C.
 *
 * Capacity 0. spill declines with TIER_NO_SPACE, stat/restore/remove answer TIER_NOT_FOUND,
 * plan_restore answers skip-to-root (reason miss). Every decline is counted in the same metric
 * families the disk provider uses (abi/tier_metrics.h), so a dashboard shows "no cold tier"
 * honestly instead of showing nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "tier_metrics.h"
#include "tier_provider.h"
#include "tier_validate.h"

#define NULL_NAME "null"
#define NULL_VERSION "0.1.0"

struct tier_instance {
  const tier_host_services* host; /* borrowed; outlives the instance */
  tier_metric* spills_no_space;
  tier_metric* restores_not_found;
  tier_metric* removes_not_found;
  tier_metric* decisions_miss;
};

/* Host services are optional slot by slot (TIER_HAS_SLOT); these wrappers make absence a no-op. */
static tier_metric* null_series(const tier_host_services* host, tier_metric_type type,
                                const char* name, const char* help, const char* const* labels,
                                const char* const* values, uint32_t count) {
  static const double buckets[] = TIER_DURATION_BUCKETS_SECONDS;
  tier_metric_family* family;
  if (!TIER_HAS_SLOT(host, tier_host_services, metric_family) ||
      !TIER_HAS_SLOT(host, tier_host_services, metric)) {
    return NULL;
  }
  family = host->metric_family(host->host_context, type, name, help, labels, count, buckets,
                               TIER_DURATION_BUCKET_COUNT);
  return host->metric(host->host_context, family, values, count);
}

static void null_add(const tier_host_services* host, tier_metric* metric, double delta) {
  if (TIER_HAS_SLOT(host, tier_host_services, metric_add)) {
    host->metric_add(host->host_context, metric, delta);
  }
}

static void null_set(const tier_host_services* host, tier_metric* metric, double value) {
  if (TIER_HAS_SLOT(host, tier_host_services, metric_set)) {
    host->metric_set(host->host_context, metric, value);
  }
}

static void null_register_metrics(struct tier_instance* self) {
  static const char* const provider_result[] = {"provider", "result"};
  static const char* const decision_labels[] = {"provider", "decision", "reason"};
  static const char* const provider_only[] = {"provider"};
  static const char* const provider_path[] = {"provider", "path"};
  static const char* const provider_kind[] = {"provider", "kind"};
  static const char* const provider_where[] = {"provider", "where"};
  const char* no_space[] = {NULL_NAME, tier_status_name(TIER_NO_SPACE)};
  const char* not_found[] = {NULL_NAME, tier_status_name(TIER_NOT_FOUND)};
  const char* skip_miss[] = {NULL_NAME, tier_decision_name(TIER_DECISION_SKIP_TO_ROOT),
                             tier_reason_name(TIER_REASON_MISS)};
  const char* name_only[] = {NULL_NAME};
  const char* path_none[] = {NULL_NAME, TIER_IO_PATH_NONE};
  const char* logical[] = {NULL_NAME, "logical"};
  const char* stored[] = {NULL_NAME, "stored"};
  const char* on_restore[] = {NULL_NAME, "restore"};
  const tier_host_services* h = self->host;

  self->spills_no_space = null_series(h, TIER_METRIC_COUNTER, TIER_METRIC_COLD_SPILLS,
                                      "Cold-tier spills by result.", provider_result, no_space, 2);
  self->restores_not_found =
      null_series(h, TIER_METRIC_COUNTER, TIER_METRIC_COLD_RESTORES,
                  "Cold-tier restores by result.", provider_result, not_found, 2);
  self->removes_not_found =
      null_series(h, TIER_METRIC_COUNTER, TIER_METRIC_COLD_REMOVES, "Cold-tier removes by result.",
                  provider_result, not_found, 2);
  self->decisions_miss =
      null_series(h, TIER_METRIC_COUNTER, TIER_METRIC_COLD_DECISIONS,
                  "Cold-tier restore plans by decision and reason.", decision_labels, skip_miss, 3);
  /* Families that stay at zero still exist, so every dashboard query has a series. */
  null_series(h, TIER_METRIC_COUNTER, TIER_METRIC_COLD_SPILL_BYTES,
              "Bytes of completed cold-tier spills.", provider_kind, logical, 2);
  null_series(h, TIER_METRIC_COUNTER, TIER_METRIC_COLD_SPILL_BYTES,
              "Bytes of completed cold-tier spills.", provider_kind, stored, 2);
  null_series(h, TIER_METRIC_COUNTER, TIER_METRIC_COLD_RESTORE_BYTES,
              "Bytes of completed cold-tier restores.", provider_kind, logical, 2);
  null_series(h, TIER_METRIC_COUNTER, TIER_METRIC_COLD_RESTORE_BYTES,
              "Bytes of completed cold-tier restores.", provider_kind, stored, 2);
  null_series(h, TIER_METRIC_HISTOGRAM, TIER_METRIC_COLD_SPILL_SECONDS,
              "Seconds per successful cold-tier spill.", provider_only, name_only, 1);
  null_series(h, TIER_METRIC_HISTOGRAM, TIER_METRIC_COLD_RESTORE_SECONDS,
              "Seconds per successful cold-tier restore.", provider_only, name_only, 1);
  null_series(h, TIER_METRIC_COUNTER, TIER_METRIC_COLD_DATA_LOSS,
              "Cold-tier checkpoints that failed verification.", provider_where, on_restore, 2);
  null_set(h,
           null_series(h, TIER_METRIC_GAUGE, TIER_METRIC_COLD_USED_BYTES,
                       "Bytes used by the cold tier.", provider_only, name_only, 1),
           0);
  null_set(h,
           null_series(h, TIER_METRIC_GAUGE, TIER_METRIC_COLD_CAPACITY_BYTES,
                       "Cold-tier byte budget.", provider_only, name_only, 1),
           0);
  null_set(h,
           null_series(h, TIER_METRIC_GAUGE, TIER_METRIC_COLD_ENTRIES,
                       "Checkpoints stored in the cold tier.", provider_only, name_only, 1),
           0);
  null_set(
      h,
      null_series(h, TIER_METRIC_GAUGE, TIER_METRIC_COLD_IO_PATH,
                  "I/O path in use by the cold tier (1 = active).", provider_path, path_none, 2),
      1);
}

static tier_status null_open(const tier_host_services* host, const char* namespace_id,
                             const tier_option* options, uint32_t option_count,
                             tier_instance** instance_out, tier_error* error) {
  struct tier_instance* self;
  if (instance_out == NULL || namespace_id == NULL || (option_count > 0 && options == NULL)) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT,
                          "null: open needs a namespace and an out "
                          "pointer");
  }
  if (option_count > 0) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT,
                          "null: option '%s' is not known (the null provider takes no options)",
                          options[0].key != NULL ? options[0].key : "(null)");
  }
  self = (struct tier_instance*)calloc(1, sizeof(*self));
  if (self == NULL) return tier_set_error(error, TIER_INTERNAL, "null: out of memory");
  self->host = host;
  null_register_metrics(self);
  *instance_out = self;
  return tier_set_error(error, TIER_OK, "%s", "");
}

static void null_close(tier_instance* instance) {
  free(instance);
}

static tier_status null_info(tier_instance* instance, tier_info* out, tier_error* error) {
  if (instance == NULL || out == NULL) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "null: info needs an instance and out");
  }
  if (TIER_HAS_FIELD(out, tier_info, capabilities)) out->capabilities = TIER_CAP_ZERO_CAPACITY;
  if (TIER_HAS_FIELD(out, tier_info, name)) out->name = NULL_NAME;
  if (TIER_HAS_FIELD(out, tier_info, version)) out->version = NULL_VERSION;
  if (TIER_HAS_FIELD(out, tier_info, io_path)) out->io_path = TIER_IO_PATH_NONE;
  if (TIER_HAS_FIELD(out, tier_info, buffer_alignment)) out->buffer_alignment = 1;
  if (TIER_HAS_FIELD(out, tier_info, max_inflight_ops)) out->max_inflight_ops = 0;
  return TIER_OK;
}

static tier_status null_stats(tier_instance* instance, tier_stats* out, tier_error* error) {
  if (instance == NULL || out == NULL) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "null: stats needs an instance and out");
  }
  if (TIER_HAS_FIELD(out, tier_stats, capacity_bytes)) out->capacity_bytes = 0;
  if (TIER_HAS_FIELD(out, tier_stats, used_bytes)) out->used_bytes = 0;
  if (TIER_HAS_FIELD(out, tier_stats, entries)) out->entries = 0;
  if (TIER_HAS_FIELD(out, tier_stats, inflight_ops)) out->inflight_ops = 0;
  return TIER_OK;
}

static tier_status null_stat(tier_instance* instance, const tier_key* key, tier_stat_result* out,
                             tier_segment_info* segments, uint32_t segment_capacity,
                             tier_error* error) {
  (void)segments;
  (void)segment_capacity;
  if (instance == NULL || key == NULL || out == NULL) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "null: stat needs instance, key and out");
  }
  return tier_set_error(error, TIER_NOT_FOUND, "null: no cold tier configured");
}

static tier_status null_spill(tier_instance* instance, const tier_key* key,
                              const tier_segment* segments, uint32_t segment_count,
                              tier_done_fn done, void* user_data, tier_error* error) {
  tier_status status;
  (void)user_data;
  if (instance == NULL || key == NULL || done == NULL) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT,
                          "null: spill needs instance, key and a completion callback");
  }
  status = tier_validate_segments(NULL_NAME, segments, segment_count, error);
  if (status != TIER_OK) return status;
  null_add(instance->host, instance->spills_no_space, 1);
  return tier_set_error(error, TIER_NO_SPACE, "null: no cold tier configured (capacity 0)");
}

static tier_status null_restore(tier_instance* instance, const tier_key* key,
                                const tier_segment* segments, uint32_t segment_count,
                                tier_done_fn done, void* user_data, tier_error* error) {
  tier_status status;
  (void)user_data;
  if (instance == NULL || key == NULL || done == NULL) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT,
                          "null: restore needs instance, key and a completion callback");
  }
  status = tier_validate_segments(NULL_NAME, segments, segment_count, error);
  if (status != TIER_OK) return status;
  null_add(instance->host, instance->restores_not_found, 1);
  return tier_set_error(error, TIER_NOT_FOUND, "null: no cold tier configured");
}

static tier_status null_remove(tier_instance* instance, const tier_key* key, tier_error* error) {
  if (instance == NULL || key == NULL) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "null: remove needs instance and key");
  }
  null_add(instance->host, instance->removes_not_found, 1);
  return tier_set_error(error, TIER_NOT_FOUND, "null: no cold tier configured");
}

static tier_status null_enumerate(tier_instance* instance, tier_enumerate_fn fn, void* user_data,
                                  tier_error* error) {
  (void)user_data;
  if (instance == NULL || fn == NULL) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "null: enumerate needs instance and fn");
  }
  return TIER_OK; /* nothing stored */
}

static tier_status null_plan_restore(tier_instance* instance, const tier_key* key,
                                     uint64_t predicted_prefill_ns, tier_plan* out,
                                     tier_error* error) {
  (void)predicted_prefill_ns;
  if (instance == NULL || key == NULL || out == NULL) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT,
                          "null: plan_restore needs instance, key and out");
  }
  if (TIER_HAS_FIELD(out, tier_plan, decision)) out->decision = TIER_DECISION_SKIP_TO_ROOT;
  if (TIER_HAS_FIELD(out, tier_plan, reason)) out->reason = TIER_REASON_MISS;
  if (TIER_HAS_FIELD(out, tier_plan, estimated_restore_ns)) out->estimated_restore_ns = 0;
  if (TIER_HAS_FIELD(out, tier_plan, stored_bytes)) out->stored_bytes = 0;
  null_add(instance->host, instance->decisions_miss, 1);
  return TIER_OK;
}

/* Nothing is ever stored: every key is absent. */
static tier_status null_probe(tier_instance* instance, const tier_key* keys, uint32_t key_count,
                              uint8_t* found, tier_error* error) {
  if (instance == NULL || keys == NULL || found == NULL) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT,
                          "null: probe needs instance, keys and found");
  }
  if (key_count == 0 || key_count > TIER_PROBE_MAX_KEYS) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "null: probe takes 1 to 1024 keys");
  }
  for (uint32_t i = 0; i < key_count; ++i) found[i] = 0;
  return TIER_OK;
}

static const tier_provider kNullProvider = {sizeof(tier_provider),
                                            TIER_ABI_VERSION_MAJOR,
                                            TIER_ABI_VERSION_MINOR,
                                            0,
                                            NULL_NAME,
                                            NULL_VERSION,
                                            null_open,
                                            null_close,
                                            null_info,
                                            null_stats,
                                            null_stat,
                                            null_spill,
                                            null_restore,
                                            null_remove,
                                            null_enumerate,
                                            null_plan_restore,
                                            null_probe};

TIER_EXPORT tier_status tier_provider_entry(uint32_t host_abi_major, uint32_t host_abi_minor,
                                            const tier_host_services* host,
                                            const tier_provider** provider_out) {
  (void)host_abi_minor;
  (void)host;
  if (provider_out == NULL) return TIER_INVALID_ARGUMENT;
  *provider_out = &kNullProvider;
  return host_abi_major == TIER_ABI_VERSION_MAJOR ? TIER_OK : TIER_UNSUPPORTED;
}
