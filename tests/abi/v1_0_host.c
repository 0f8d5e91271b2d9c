/*
 * v1_0_host.c -- a genuine 1.0 host: compiled against the frozen 1.0 header (tests/abi/v1_0) only,
 * it dlopens a current provider and drives it through the 1.0 table and 1.0-sized structures:
 * services of the 1.0 size, host minor 0, only the slots of a 1.0 table, out-structures of their
 * 1.0 size, and of every tier_entry only the 1.0 fields (after checking the provider's
 * struct_size covers them). A provider with capacity 0 must decline cleanly instead.
 *
 *   tier-v1-0-host PLUGIN [KEY=VALUE ...]      exit 0: the provider served a 1.0 host correctly
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tier_provider.h"

#if TIER_ABI_VERSION_MINOR != 0
#error "v1_0_host.c must be compiled against the frozen 1.0 header (tests/abi/v1_0)"
#endif

#define MAX_OPTIONS 16
#define DEADLINE_S 30

static int fail(const char* format, ...) {
  va_list args;
  va_start(args, format);
  fprintf(stderr, "FAIL: ");
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
  return 1;
}

/* ---- 1.0 host services: a log, no metrics (NULL handles are a no-op by contract), a clock ---- */

static void h_log(void* context, tier_log_level level, const char* message) {
  (void)context;
  printf("  provider log [%d]: %s\n", (int)level, message);
}
static tier_metric_family* h_family(void* context, tier_metric_type type, const char* name,
                                    const char* help, const char* const* labels, uint32_t count,
                                    const double* bounds, uint32_t bucket_count) {
  (void)context, (void)type, (void)name, (void)help, (void)labels, (void)count, (void)bounds,
      (void)bucket_count;
  return NULL;
}
static tier_metric* h_metric(void* context, tier_metric_family* family, const char* const* values,
                             uint32_t count) {
  (void)context, (void)family, (void)values, (void)count;
  return NULL;
}
static void h_value(void* context, tier_metric* metric, double value) {
  (void)context, (void)metric, (void)value;
}
static uint64_t h_now_ns(void* context) {
  struct timespec ts;
  (void)context;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- one asynchronous operation's completion ---- */

typedef struct op {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  int calls;
  tier_status status;
  char message[TIER_ERROR_MESSAGE_BYTES];
} op;

static void op_init(op* o) {
  memset(o, 0, sizeof(*o));
  pthread_mutex_init(&o->mutex, NULL);
  pthread_cond_init(&o->cond, NULL);
}

static void op_done(void* user_data, const tier_completion* c) {
  op* o = (op*)user_data;
  pthread_mutex_lock(&o->mutex);
  o->calls += 1;
  o->status = c->status;
  snprintf(o->message, sizeof(o->message), "%s", c->message != NULL ? c->message : "(NULL)");
  pthread_cond_broadcast(&o->cond);
  pthread_mutex_unlock(&o->mutex);
}

/* Waits for the completion, at most DEADLINE_S; returns its status or -1 on a timeout. */
static tier_status op_wait(op* o) {
  struct timespec until;
  tier_status status = -1;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += DEADLINE_S;
  pthread_mutex_lock(&o->mutex);
  while (o->calls == 0) {
    if (pthread_cond_timedwait(&o->cond, &o->mutex, &until) != 0) break;
  }
  if (o->calls > 0) status = o->status;
  pthread_mutex_unlock(&o->mutex);
  return status;
}

/* ---- a checkpoint with bytes derived from its segment ---- */

#define SEGMENTS 3
static const tier_segment_info kLayout[SEGMENTS] = {{TIER_SEGMENT_MAIN_KV, 0, 65536},
                                                    {TIER_SEGMENT_STATE_IMAGE, 2, 10007},
                                                    {TIER_SEGMENT_MANIFEST, 0, 100}};

static unsigned char byte_at(uint32_t segment, uint64_t i) {
  return (unsigned char)((i * 131u + segment * 29u + (i >> 8)) & 0xFF);
}

static void make_segments(tier_segment* segments, unsigned char** buffers, int fill) {
  uint32_t s;
  uint64_t i;
  for (s = 0; s < SEGMENTS; ++s) {
    segments[s].kind = kLayout[s].kind;
    segments[s].index = kLayout[s].index;
    segments[s].length_bytes = kLayout[s].length_bytes;
    segments[s].data = buffers[s];
    for (i = 0; i < kLayout[s].length_bytes; ++i) buffers[s][i] = fill ? byte_at(s, i) : 0;
  }
}

static int bytes_match(uint32_t segment, const unsigned char* data, uint64_t length_bytes) {
  uint64_t i;
  for (i = 0; i < length_bytes; ++i) {
    if (data[i] != byte_at(segment, i)) return 0;
  }
  return 1;
}

/* ---- enumerate: 1.0 fields only ---- */

typedef struct seen {
  tier_key key;
  int entries, matched, short_entries, bad_manifest;
} seen;

static int32_t on_entry(void* user_data, const tier_entry* entry) {
  seen* s = (seen*)user_data;
  s->entries += 1;
  /* 1.0's tier_entry is what this host knows: sizeof(tier_entry) here. */
  if (entry->struct_size < sizeof(tier_entry)) {
    s->short_entries += 1;
    return 0;
  }
  if (memcmp(entry->key.bytes, s->key.bytes, TIER_KEY_BYTES) != 0) return 0;
  s->matched += 1;
  if (entry->segment_count != SEGMENTS || entry->manifest == NULL ||
      entry->manifest_bytes != kLayout[2].length_bytes ||
      !bytes_match(2, (const unsigned char*)entry->manifest, entry->manifest_bytes)) {
    s->bad_manifest += 1;
  }
  return 0;
}

/* ---- the run ---- */

typedef struct session {
  const tier_provider* table;
  tier_instance* instance;
  tier_key key;
} session;

static int absent_tier_declines(session* t, tier_segment* segments) {
  tier_error error;
  op o;
  seen s;
  op_init(&o);
  if (t->table->spill(t->instance, &t->key, segments, SEGMENTS, op_done, &o, &error) !=
      TIER_NO_SPACE) {
    return fail("an absent tier must refuse a spill with NO_SPACE");
  }
  if (t->table->restore(t->instance, &t->key, segments, SEGMENTS, op_done, &o, &error) !=
      TIER_NOT_FOUND) {
    return fail("an absent tier must answer a restore with NOT_FOUND");
  }
  memset(&s, 0, sizeof(s));
  if (t->table->enumerate(t->instance, on_entry, &s, &error) != TIER_OK || s.entries != 0) {
    return fail("an absent tier enumerates nothing");
  }
  if (o.calls != 0) return fail("a refused operation called back");
  printf("  absent tier: spill NO_SPACE, restore NOT_FOUND, enumerate empty, no callback\n");
  return 0;
}

static int round_trip(session* t, tier_segment* segments, unsigned char** buffers) {
  tier_error error;
  op o;
  seen s;
  uint32_t i;
  tier_status status;
  op_init(&o);
  make_segments(segments, buffers, 1);
  status = t->table->spill(t->instance, &t->key, segments, SEGMENTS, op_done, &o, &error);
  if (status != TIER_OK)
    return fail("spill refused: %s: %s", tier_status_name(status), error.message);
  status = op_wait(&o);
  if (status != TIER_OK) return fail("spill completed %d: %s", (int)status, o.message);
  printf("  spill: ok\n");
  op_init(&o);
  make_segments(segments, buffers, 0);
  status = t->table->restore(t->instance, &t->key, segments, SEGMENTS, op_done, &o, &error);
  if (status != TIER_OK)
    return fail("restore refused: %s: %s", tier_status_name(status), error.message);
  status = op_wait(&o);
  if (status != TIER_OK) return fail("restore completed %d: %s", (int)status, o.message);
  for (i = 0; i < SEGMENTS; ++i) {
    if (!bytes_match(i, buffers[i], kLayout[i].length_bytes))
      return fail("restored segment %u differs", i);
  }
  printf("  restore: byte-exact\n");
  memset(&s, 0, sizeof(s));
  s.key = t->key;
  if (t->table->enumerate(t->instance, on_entry, &s, &error) != TIER_OK) {
    return fail("enumerate: %s", error.message);
  }
  if (s.short_entries > 0) return fail("a tier_entry shorter than 1.0's (struct_size)");
  if (s.matched != 1 || s.bad_manifest != 0) {
    return fail("enumerate: %d entries, %d with the key, %d with a wrong manifest", s.entries,
                s.matched, s.bad_manifest);
  }
  printf("  enumerate: the entry, its 1.0 fields and manifest\n");
  if (t->table->remove(t->instance, &t->key, &error) != TIER_OK)
    return fail("remove: %s", error.message);
  return 0;
}

int main(int argc, char** argv) {
  tier_host_services services;
  tier_option options[MAX_OPTIONS];
  char* keys[MAX_OPTIONS];
  tier_error error;
  tier_info info;
  tier_stats stats;
  session t;
  tier_segment segments[SEGMENTS];
  unsigned char* buffers[SEGMENTS];
  uint32_t i, option_count = 0;
  tier_provider_entry_fn entry;
  void* handle;
  int rc, absent;

  if (argc < 2 || argc - 2 > MAX_OPTIONS)
    return fail("usage: tier-v1-0-host PLUGIN [KEY=VALUE ...]");
  for (i = 0; i + 2 < (uint32_t)argc; ++i) {
    char* eq = strchr(argv[i + 2], '=');
    if (eq == NULL) return fail("option '%s' is not KEY=VALUE", argv[i + 2]);
    keys[i] = strndup(argv[i + 2], (size_t)(eq - argv[i + 2]));
    options[i].key = keys[i];
    options[i].value = eq + 1;
    option_count = i + 1;
  }
  handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) return fail("dlopen: %s", dlerror());
  *(void**)&entry = dlsym(handle, TIER_PROVIDER_ENTRY_SYMBOL);
  if (entry == NULL) return fail("no %s in %s", TIER_PROVIDER_ENTRY_SYMBOL, argv[1]);

  memset(&services, 0, sizeof(services));
  services.struct_size = sizeof(services); /* the 1.0 table */
  services.abi_major = 1;
  services.abi_minor = 0;
  services.log = h_log;
  services.metric_family = h_family;
  services.metric = h_metric;
  services.metric_add = h_value;
  services.metric_set = h_value;
  services.metric_observe = h_value;
  services.monotonic_ns = h_now_ns;
  if (entry(1, 0, &services, &t.table) != TIER_OK || t.table == NULL)
    return fail("entry refused host 1.0");
  if (t.table->abi_major != 1 || t.table->struct_size < sizeof(tier_provider)) {
    return fail("provider table %u.%u of %u bytes: a 1.0 host needs major 1 and %zu bytes",
                t.table->abi_major, t.table->abi_minor, t.table->struct_size,
                sizeof(tier_provider));
  }
  printf("1.0 host: %s %s (ABI 1.%u, table %u bytes)\n", t.table->name, t.table->version,
         t.table->abi_minor, t.table->struct_size);

  memset(&error, 0, sizeof(error));
  if (t.table->open(&services, "v1_0-host", options, option_count, &t.instance, &error) !=
      TIER_OK) {
    return fail("open: %s", error.message);
  }
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  memset(&stats, 0, sizeof(stats));
  stats.struct_size = sizeof(stats);
  if (t.table->info(t.instance, &info, &error) != TIER_OK ||
      t.table->stats(t.instance, &stats, &error) != TIER_OK) {
    return fail("info/stats: %s", error.message);
  }
  absent = stats.capacity_bytes == 0 || (info.capabilities & TIER_CAP_ZERO_CAPACITY) != 0;
  memcpy(t.key.bytes, "tier 1.0 host cross-version key!", TIER_KEY_BYTES);
  for (i = 0; i < SEGMENTS; ++i) buffers[i] = (unsigned char*)malloc(kLayout[i].length_bytes);
  make_segments(segments, buffers, 1);
  rc = absent ? absent_tier_declines(&t, segments) : round_trip(&t, segments, buffers);
  t.table->close(t.instance);
  for (i = 0; i < SEGMENTS; ++i) free(buffers[i]);
  for (i = 0; i < option_count; ++i) free(keys[i]);
  if (rc == 0) printf("OK: %s served a 1.0 host\n", t.table->name);
  dlclose(handle);
  return rc;
}
