/*
 * memory_provider.c -- libtier_memory.so, an example third-party tier provider that keeps
 * checkpoints in process memory. It exists to prove that a plugin built out of tree, against the
 * installed header alone, loads into a tier-host built without it and passes AbiConformance.
 * Completions run on the caller's thread before spill/restore return (allowed by the ABI).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <tier_provider.h>
#include <tier_validate.h>

typedef struct entry {
  tier_key key;
  uint32_t segment_count;
  tier_segment_info* segments;
  unsigned char** data;
  uint64_t logical_bytes;
  struct entry* next;
} entry;

struct tier_instance {
  pthread_mutex_t mutex; /* recursive: enumerate callbacks may call stat */
  entry* head;
  uint64_t capacity_bytes;
  uint64_t used_bytes;
  uint64_t entries;
};

static entry* find(tier_instance* self, const tier_key* key) {
  entry* e;
  for (e = self->head; e != NULL; e = e->next) {
    if (memcmp(e->key.bytes, key->bytes, TIER_KEY_BYTES) == 0) return e;
  }
  return NULL;
}

static void free_entry(entry* e) {
  uint32_t i;
  for (i = 0; i < e->segment_count; ++i) free(e->data[i]);
  free(e->data);
  free(e->segments);
  free(e);
}

static void complete(tier_done_fn done, void* user_data, tier_status status, uint64_t bytes) {
  tier_completion c;
  memset(&c, 0, sizeof(c));
  c.struct_size = sizeof(c);
  c.status = status;
  c.message = "";
  c.logical_bytes = status == TIER_OK ? bytes : 0;
  c.stored_bytes = status == TIER_OK ? bytes : 0;
  done(user_data, &c);
}

static tier_status m_open(const tier_host_services* host, const char* namespace_id,
                          const tier_option* options, uint32_t option_count,
                          tier_instance** instance_out, tier_error* error) {
  uint32_t i;
  uint64_t capacity = 64u << 20;
  pthread_mutexattr_t attr;
  tier_instance* self;
  (void)host;
  if (instance_out == NULL || namespace_id == NULL) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "memory: open needs namespace and out");
  }
  for (i = 0; i < option_count; ++i) {
    char* end = NULL;
    if (strcmp(options[i].key, "capacity_bytes") != 0) {
      return tier_set_error(error, TIER_INVALID_ARGUMENT, "memory: option '%s' is not known",
                            options[i].key);
    }
    capacity = strtoull(options[i].value, &end, 10);
    if (end == options[i].value || *end != '\0') {
      return tier_set_error(error, TIER_INVALID_ARGUMENT,
                            "memory: option 'capacity_bytes': expected an integer, got '%s'",
                            options[i].value);
    }
  }
  self = (tier_instance*)calloc(1, sizeof(*self));
  if (self == NULL) return tier_set_error(error, TIER_INTERNAL, "memory: out of memory");
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&self->mutex, &attr);
  pthread_mutexattr_destroy(&attr);
  self->capacity_bytes = capacity;
  *instance_out = self;
  return TIER_OK;
}

static void m_close(tier_instance* self) {
  entry* e;
  if (self == NULL) return;
  e = self->head;
  while (e != NULL) {
    entry* next = e->next;
    free_entry(e);
    e = next;
  }
  pthread_mutex_destroy(&self->mutex);
  free(self);
}

static tier_status m_info(tier_instance* self, tier_info* out, tier_error* error) {
  if (self == NULL || out == NULL)
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "memory: info");
  /* No TIER_CAP_CHECKSUMS: nothing verifies the bytes it keeps (a claim obliges a verified
   * restore). */
  if (TIER_HAS_FIELD(out, tier_info, capabilities)) out->capabilities = 0;
  if (TIER_HAS_FIELD(out, tier_info, name)) out->name = "memory";
  if (TIER_HAS_FIELD(out, tier_info, version)) out->version = "1.0.0";
  if (TIER_HAS_FIELD(out, tier_info, io_path)) out->io_path = "memory";
  if (TIER_HAS_FIELD(out, tier_info, buffer_alignment)) out->buffer_alignment = 1;
  if (TIER_HAS_FIELD(out, tier_info, max_inflight_ops)) out->max_inflight_ops = 1024;
  return TIER_OK;
}

static tier_status m_stats(tier_instance* self, tier_stats* out, tier_error* error) {
  if (self == NULL || out == NULL)
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "memory: stats");
  pthread_mutex_lock(&self->mutex);
  if (TIER_HAS_FIELD(out, tier_stats, capacity_bytes)) out->capacity_bytes = self->capacity_bytes;
  if (TIER_HAS_FIELD(out, tier_stats, used_bytes)) out->used_bytes = self->used_bytes;
  if (TIER_HAS_FIELD(out, tier_stats, entries)) out->entries = self->entries;
  if (TIER_HAS_FIELD(out, tier_stats, inflight_ops)) out->inflight_ops = 0;
  pthread_mutex_unlock(&self->mutex);
  return TIER_OK;
}

static tier_status m_stat(tier_instance* self, const tier_key* key, tier_stat_result* out,
                          tier_segment_info* segments, uint32_t capacity, tier_error* error) {
  entry* e;
  uint32_t i;
  if (self == NULL || key == NULL || out == NULL || (capacity > 0 && segments == NULL)) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "memory: stat needs key and out");
  }
  pthread_mutex_lock(&self->mutex);
  e = find(self, key);
  if (e != NULL) {
    if (TIER_HAS_FIELD(out, tier_stat_result, segment_count)) out->segment_count = e->segment_count;
    if (TIER_HAS_FIELD(out, tier_stat_result, logical_bytes)) out->logical_bytes = e->logical_bytes;
    if (TIER_HAS_FIELD(out, tier_stat_result, stored_bytes)) out->stored_bytes = e->logical_bytes;
    if (TIER_HAS_FIELD(out, tier_stat_result, estimated_restore_ns)) {
      out->estimated_restore_ns = e->logical_bytes / 10 + 1; /* ~10 GB/s memcpy */
    }
    for (i = 0; i < e->segment_count && i < capacity; ++i) segments[i] = e->segments[i];
  }
  pthread_mutex_unlock(&self->mutex);
  return e != NULL ? TIER_OK : tier_set_error(error, TIER_NOT_FOUND, "memory: not stored");
}

static tier_status m_spill(tier_instance* self, const tier_key* key, const tier_segment* segments,
                           uint32_t count, tier_done_fn done, void* user_data, tier_error* error) {
  entry* e;
  uint32_t i;
  uint64_t bytes = 0;
  tier_status status;
  if (self == NULL || key == NULL || done == NULL) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "memory: spill needs key and callback");
  }
  status = tier_validate_segments("memory", segments, count, error);
  if (status != TIER_OK) return status;
  for (i = 0; i < count; ++i) bytes += segments[i].length_bytes;
  pthread_mutex_lock(&self->mutex);
  if (find(self, key) != NULL) {
    pthread_mutex_unlock(&self->mutex);
    return tier_set_error(error, TIER_ALREADY_EXISTS, "memory: key already stored");
  }
  if (bytes > self->capacity_bytes - self->used_bytes) {
    pthread_mutex_unlock(&self->mutex);
    return tier_set_error(error, TIER_NO_SPACE, "memory: %llu bytes do not fit",
                          (unsigned long long)bytes);
  }
  e = (entry*)calloc(1, sizeof(*e));
  e->segments = (tier_segment_info*)calloc(count, sizeof(tier_segment_info));
  e->data = (unsigned char**)calloc(count, sizeof(unsigned char*));
  e->key = *key;
  e->segment_count = count;
  e->logical_bytes = bytes;
  for (i = 0; i < count; ++i) {
    e->segments[i].kind = segments[i].kind;
    e->segments[i].index = segments[i].index;
    e->segments[i].length_bytes = segments[i].length_bytes;
    e->data[i] = (unsigned char*)malloc(segments[i].length_bytes + 1);
    if (segments[i].length_bytes > 0)
      memcpy(e->data[i], segments[i].data, segments[i].length_bytes);
  }
  e->next = self->head;
  self->head = e;
  self->used_bytes += bytes;
  self->entries += 1;
  pthread_mutex_unlock(&self->mutex);
  complete(done, user_data, TIER_OK, bytes);
  return TIER_OK;
}

static tier_status m_restore(tier_instance* self, const tier_key* key, const tier_segment* segments,
                             uint32_t count, tier_done_fn done, void* user_data,
                             tier_error* error) {
  entry* e;
  uint32_t i, j;
  uint64_t bytes;
  tier_status status;
  if (self == NULL || key == NULL || done == NULL) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "memory: restore needs key and callback");
  }
  pthread_mutex_lock(&self->mutex);
  e = find(self, key);
  if (e == NULL) {
    pthread_mutex_unlock(&self->mutex);
    return tier_set_error(error, TIER_NOT_FOUND, "memory: not stored");
  }
  /* The count first: a table is read only as far as the stored checkpoint has segments. */
  if (count != e->segment_count) {
    pthread_mutex_unlock(&self->mutex);
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "memory: %u segments asked, %u stored",
                          count, e->segment_count);
  }
  status = tier_validate_segments("memory", segments, count, error);
  if (status != TIER_OK) {
    pthread_mutex_unlock(&self->mutex);
    return status;
  }
  for (i = 0; i < count; ++i) { /* every asked segment must be stored with the same length */
    for (j = 0; j < count; ++j) {
      if (e->segments[j].kind == segments[i].kind && e->segments[j].index == segments[i].index)
        break;
    }
    if (j == count || e->segments[j].length_bytes != segments[i].length_bytes) {
      pthread_mutex_unlock(&self->mutex);
      return tier_set_error(error, TIER_INVALID_ARGUMENT,
                            "memory: segment kind %u index %u does not match what is stored",
                            segments[i].kind, segments[i].index);
    }
  }
  for (i = 0; i < count; ++i) {
    for (j = 0; j < count; ++j) {
      if (e->segments[j].kind == segments[i].kind && e->segments[j].index == segments[i].index) {
        if (segments[i].length_bytes > 0)
          memcpy(segments[i].data, e->data[j], segments[i].length_bytes);
      }
    }
  }
  bytes = e->logical_bytes;
  pthread_mutex_unlock(&self->mutex);
  complete(done, user_data, TIER_OK, bytes);
  return TIER_OK;
}

static tier_status m_remove(tier_instance* self, const tier_key* key, tier_error* error) {
  entry** link;
  if (self == NULL || key == NULL)
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "memory: remove");
  pthread_mutex_lock(&self->mutex);
  for (link = &self->head; *link != NULL; link = &(*link)->next) {
    if (memcmp((*link)->key.bytes, key->bytes, TIER_KEY_BYTES) == 0) {
      entry* e = *link;
      *link = e->next;
      self->used_bytes -= e->logical_bytes;
      self->entries -= 1;
      pthread_mutex_unlock(&self->mutex);
      free_entry(e);
      return TIER_OK;
    }
  }
  pthread_mutex_unlock(&self->mutex);
  return tier_set_error(error, TIER_NOT_FOUND, "memory: not stored");
}

static tier_status m_enumerate(tier_instance* self, tier_enumerate_fn fn, void* user_data,
                               tier_error* error) {
  entry* e;
  uint32_t i;
  if (self == NULL || fn == NULL)
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "memory: enumerate");
  pthread_mutex_lock(&self->mutex);
  for (e = self->head; e != NULL; e = e->next) {
    tier_entry out;
    memset(&out, 0, sizeof(out));
    out.struct_size = sizeof(out);
    out.segment_count = e->segment_count;
    out.key = e->key;
    out.logical_bytes = e->logical_bytes;
    out.stored_bytes = e->logical_bytes;
    out.segments = e->segments;
    for (i = 0; i < e->segment_count; ++i) {
      if (e->segments[i].kind == TIER_SEGMENT_MANIFEST) {
        out.manifest = e->data[i];
        out.manifest_bytes = e->segments[i].length_bytes;
      }
    }
    if (fn(user_data, &out) != 0) break;
  }
  pthread_mutex_unlock(&self->mutex);
  return TIER_OK;
}

static tier_status m_plan(tier_instance* self, const tier_key* key, uint64_t prefill_ns,
                          tier_plan* out, tier_error* error) {
  entry* e;
  if (self == NULL || key == NULL || out == NULL)
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "memory: plan");
  tier_plan plan = {0};
  pthread_mutex_lock(&self->mutex);
  e = find(self, key);
  plan.estimated_restore_ns = e != NULL ? e->logical_bytes / 10 + 1 : 0;
  plan.stored_bytes = e != NULL ? e->logical_bytes : 0;
  pthread_mutex_unlock(&self->mutex);
  if (e == NULL) {
    plan.decision = TIER_DECISION_SKIP_TO_ROOT;
    plan.reason = TIER_REASON_MISS;
  } else if (plan.estimated_restore_ns < prefill_ns) {
    plan.decision = TIER_DECISION_RESTORE;
    plan.reason = TIER_REASON_CHEAPER;
  } else {
    plan.decision = TIER_DECISION_SKIP_TO_ROOT;
    plan.reason = TIER_REASON_COST;
  }
  /* Only the fields inside the caller's struct_size (an older, shorter tier_plan). */
  if (TIER_HAS_FIELD(out, tier_plan, decision)) out->decision = plan.decision;
  if (TIER_HAS_FIELD(out, tier_plan, reason)) out->reason = plan.reason;
  if (TIER_HAS_FIELD(out, tier_plan, reserved)) out->reserved = 0;
  if (TIER_HAS_FIELD(out, tier_plan, estimated_restore_ns)) {
    out->estimated_restore_ns = plan.estimated_restore_ns;
  }
  if (TIER_HAS_FIELD(out, tier_plan, stored_bytes)) out->stored_bytes = plan.stored_bytes;
  return TIER_OK;
}

static const tier_provider kMemoryProvider = {sizeof(tier_provider),
                                              TIER_ABI_VERSION_MAJOR,
                                              TIER_ABI_VERSION_MINOR,
                                              0,
                                              "memory",
                                              "1.0.0",
                                              m_open,
                                              m_close,
                                              m_info,
                                              m_stats,
                                              m_stat,
                                              m_spill,
                                              m_restore,
                                              m_remove,
                                              m_enumerate,
                                              m_plan,
                                              NULL /* probe (1.1, optional): not offered */};

TIER_EXPORT tier_status tier_provider_entry(uint32_t host_abi_major, uint32_t host_abi_minor,
                                            const tier_host_services* host,
                                            const tier_provider** provider_out) {
  (void)host_abi_minor;
  (void)host;
  *provider_out = &kMemoryProvider;
  return host_abi_major == TIER_ABI_VERSION_MAJOR ? TIER_OK : TIER_UNSUPPORTED;
}
