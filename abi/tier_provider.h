/*
 * tier_provider.h -- the tier-provider C ABI, version 1.1.
 *
 * The only thing a server (the "host") and a tier provider (a dlopen-able plugin such as
 * libtier_disk.so) share. Pure C11: fixed-width integers, no C++ types, usable from C and C++.
 *
 * VERSIONING RULES (read these before changing anything below)
 *
 *  1. One exported symbol: `tier_provider_entry` (TIER_PROVIDER_ENTRY_SYMBOL). The host passes its
 *     ABI version and its services table and receives the provider's table.
 *  2. The major version must match. A provider refuses a host of another major (returns
 *     TIER_UNSUPPORTED), and the host refuses a provider table of another major.
 *  3. The minor version may differ in both directions. Every table and every out-structure starts
 *     with `struct_size` (bytes, set by whoever fills it in) and tables carry their version. Fields
 *     are only ever appended, never removed, reordered or retyped within a major.
 *  4. The host calls a provider slot only if the slot lies inside the provider table's struct_size
 *     and is non-NULL (TIER_HAS_SLOT). The provider uses a host service only under the same test on
 *     the host's table. Every slot of version 1.0 is required of a 1.x provider; slots added by
 * later minors are optional and a host must cope with their absence.
 *  5. Out-structures (tier_info, tier_stats, ...) are allocated by the caller, which sets
 *     struct_size; the callee writes only the fields that lie entirely inside struct_size.
 *  6. No C++ exception, longjmp or signal ever crosses this boundary. Errors are tier_status values
 *     plus a message the caller reads from its own tier_error buffer: nothing is freed across it.
 *
 * OWNERSHIP AND THREADS
 *
 *  - The provider table and the strings it points to are static: valid until the library is
 *    unloaded. The host services table must stay valid until the last instance opened with it is
 *    closed.
 *  - Every function may be called from any thread, concurrently with any other, except where its
 *    comment says otherwise. close() must not race with other calls on the same instance.
 *  - spill and restore are asynchronous: when they return TIER_OK the operation is accepted and its
 *    completion callback runs exactly once (success, error or cancelled), possibly on a provider
 *    thread and possibly before the call returns. Segment buffers are borrowed until then. When
 * they return anything else the callback never runs and the buffers are released at once.
 *  - Waiting: spill and restore only check, reserve and queue, returning without waiting for data
 *    I/O or a network round trip, and info, stats, stat and plan_restore answer from what the
 *    provider holds in memory (a TIER_CAP_SHARED provider's stat may look up a key another host
 *    stored); open, close, remove, enumerate and probe may wait for I/O, so hosts call them only
 *    from threads that may block. Any call can still stall on a failing device: hosts bound
 *    completions with their own deadline.
 *
 * SETTLED IN 1.1 (no layout change, no version bump: each sentence marked "settled" below narrows
 * what 1.1 left open, to what a server needs; abi/README.md's rule table gives every rule an id and
 * the conformance test that checks it)
 *
 * LAYOUT
 *
 *  Table offsets are pinned below with static asserts for LP64 targets (x86_64, aarch64 Linux) and
 *  by tests/abi; an accidental layout change fails the build.
 */
#ifndef TIER_PROVIDER_H
#define TIER_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TIER_ABI_VERSION_MAJOR 1u
#define TIER_ABI_VERSION_MINOR 1u

/* Name of the one exported entry point, for dlsym. */
#define TIER_PROVIDER_ENTRY_SYMBOL "tier_provider_entry"

/* Bytes of a checkpoint identity key: the server's digest over every identity field. */
#define TIER_KEY_BYTES 32u
/* Bytes of the message buffer in tier_error, terminating NUL included. */
#define TIER_ERROR_MESSAGE_BYTES 256u
/* Largest TIER_SEGMENT_MANIFEST segment a provider must accept (returned by enumerate). */
#define TIER_MANIFEST_MAX_BYTES 65536u
/* Segments in one checkpoint: both a floor and a ceiling. Every provider accepts any count from 1
 * to TIER_MAX_SEGMENTS and refuses more with TIER_INVALID_ARGUMENT before reading the table. */
#define TIER_MAX_SEGMENTS 4096u
/* Most keys in one probe call (1.1). */
#define TIER_PROBE_MAX_KEYS 1024u

#if defined(__GNUC__) || defined(__clang__)
#define TIER_EXPORT __attribute__((visibility("default")))
#else
#define TIER_EXPORT
#endif

/* ---------------------------------------------------------------------------------------------- */
/* Status */
/* ---------------------------------------------------------------------------------------------- */

typedef int32_t tier_status;
enum {
  TIER_OK = 0,
  TIER_NOT_FOUND = 1,        /* no checkpoint with this key */
  TIER_ALREADY_EXISTS = 2,   /* a checkpoint with this key is stored or being stored */
  TIER_INVALID_ARGUMENT = 3, /* NULL pointer, bad option, segment table that does not match */
  TIER_NO_SPACE = 4,         /* capacity (or the filesystem) cannot take it */
  TIER_BUSY = 5,             /* too many operations in flight, or the key is being removed */
  TIER_DATA_LOSS = 6,        /* stored bytes failed verification; the entry is gone */
  TIER_IO_ERROR = 7,         /* the operating system refused an I/O */
  TIER_CANCELLED = 8,        /* the instance was closed before the operation finished */
  TIER_UNSUPPORTED = 9,      /* not available here (version, feature, filesystem) */
  TIER_INTERNAL = 10         /* a bug in the provider */
};
#define TIER_STATUS_COUNT 11

/* A stable lowercase name ("ok", "not_found", ...) used in messages and as a metric label value. */
static inline const char* tier_status_name(tier_status status) {
  static const char* const names[TIER_STATUS_COUNT] = {
      "ok",        "not_found", "already_exists", "invalid_argument", "no_space", "busy",
      "data_loss", "io_error",  "cancelled",      "unsupported",      "internal"};
  return (status >= 0 && status < TIER_STATUS_COUNT) ? names[status] : "unknown";
}

/* Caller-owned error buffer. Callees write status and a NUL-terminated message ("" if none). Every
 * function taking a `tier_error*` accepts NULL when the caller does not want the message. A refusal
 * (any status but TIER_OK) always carries a non-empty message naming its cause (the argument,
 * option, key or limit); on TIER_OK the message is "" or left as it was. */
typedef struct tier_error {
  tier_status status;
  char message[TIER_ERROR_MESSAGE_BYTES];
} tier_error;

/* ---------------------------------------------------------------------------------------------- */
/* Checkpoints */
/* ---------------------------------------------------------------------------------------------- */

/* Identity of a checkpoint. Providers store it in full and compare it byte for byte: a hash of it,
 * or a prefix of it, is never a hit. */
typedef struct tier_key {
  uint8_t bytes[TIER_KEY_BYTES];
} tier_key;

typedef uint32_t tier_segment_kind;
enum {
  TIER_SEGMENT_MAIN_KV = 1,      /* KV pages of one full-attention layer (index = layer) */
  TIER_SEGMENT_SPEC_KV = 2,      /* speculative-decoding (MTP / DFlash) KV (index = layer) */
  TIER_SEGMENT_STATE_IMAGE = 3,  /* recurrent state, conv history, rings (index = part) */
  TIER_SEGMENT_HIDDEN_STATE = 4, /* boundary hidden state */
  TIER_SEGMENT_MANIFEST = 5, /* opaque server manifest, at most one, <= TIER_MANIFEST_MAX_BYTES */
  TIER_SEGMENT_OTHER = 6     /* anything else the continuation needs */
};
#define TIER_SEGMENT_KIND_MIN 1u
#define TIER_SEGMENT_KIND_MAX 6u

/* One segment of a checkpoint. (kind, index) is unique within a checkpoint. A checkpoint is all of
 * its segments or nothing: a provider never stores or restores a subset.
 *  - spill:   `data` points at length_bytes readable bytes (the provider only reads them);
 *  - restore: `data` points at length_bytes writable bytes; length_bytes must equal the stored
 *             length of that segment (learn it from stat or enumerate). */
typedef struct tier_segment {
  tier_segment_kind kind;
  uint32_t index;
  uint64_t length_bytes;
  void* data;
} tier_segment;

/* A segment's description without data, as returned by stat and enumerate. */
typedef struct tier_segment_info {
  tier_segment_kind kind;
  uint32_t index;
  uint64_t length_bytes;
} tier_segment_info;

/* ---------------------------------------------------------------------------------------------- */
/* Asynchronous completion */
/* ---------------------------------------------------------------------------------------------- */

typedef struct tier_completion {
  uint32_t struct_size;
  tier_status status;
  /* Borrowed, valid only during the callback; never NULL: "" if none, and non-empty (the cause)
   * whenever status is not OK. */
  const char* message;
  /* Bytes of segment data spilled or restored (0 unless status is OK): for a restore the bytes
   * written into the caller's buffers, never the stored size. */
  uint64_t logical_bytes;
  uint64_t stored_bytes; /* bytes the checkpoint occupies in the tier (0 unless status is OK) */
  /* From acceptance to completion, on the host's monotonic_ns service (CLOCK_MONOTONIC when the
   * host's table lacks it); 0 when the provider does not measure it. */
  uint64_t duration_ns;
} tier_completion;

/* Runs exactly once per accepted operation, on any thread (possibly before spill/restore returns).
 * It may call any provider function except close() of the same instance; it must not block for
 * long. The provider holds none of its own locks while calling it. */
typedef void (*tier_done_fn)(void* user_data, const tier_completion* completion);

/* ---------------------------------------------------------------------------------------------- */
/* Instance description, statistics and restore plans (caller-allocated out-structures) */
/* ---------------------------------------------------------------------------------------------- */

typedef struct tier_instance tier_instance; /* opaque, provider-owned */

/* key=value pair handed to open(); both strings borrowed for the duration of the call. */
typedef struct tier_option {
  const char* key;
  const char* value;
} tier_option;

enum {
  TIER_CAP_PERSISTENT = 1u << 0,  /* checkpoints survive close and a process restart */
  TIER_CAP_COMPRESSION = 1u << 1, /* stored bytes may be fewer than logical bytes */
  /* Every byte a restore returns was verified against a checksum taken at spill: damaged stored
   * bytes are never returned as OK, the restore completes with TIER_DATA_LOSS and drops the entry
   * (or an entry found damaged earlier is gone: NOT_FOUND). The conformance suite damages the
   * files of a persistent provider under {tmpdir} to check it. */
  TIER_CAP_CHECKSUMS = 1u << 2,
  TIER_CAP_ZERO_CAPACITY = 1u << 3, /* the tier is absent: every spill declines with NO_SPACE */
  /* 1.1: other hosts spill and remove checkpoints of the same namespace at any time (a store shared
   * by a fleet). A host's own catalog is then not the whole content: it finds checkpoints other
   * hosts spilled with probe (when the slot is present). Settled: a spill that completed OK on any
   * instance of the namespace (another host, or another instance in this process) is found by
   * probe and stat and restorable by every other instance as soon as its completion has started,
   * with no delay to wait out; a remove that returned is seen by all of them as soon. */
  TIER_CAP_SHARED = 1u << 4
};

typedef struct tier_info {
  uint32_t struct_size;
  uint32_t capabilities; /* TIER_CAP_* bits */
  const char* name;      /* static, e.g. "disk" */
  const char* version;   /* static, e.g. "0.1.0" */
  const char* io_path;   /* valid until close, e.g. "io_uring+direct", "none" */
  /* Required alignment of segment data pointers, a power of two; 1 = any. The host passes
   * pointers so aligned (it refuses to open a provider whose alignment it cannot give). */
  uint64_t buffer_alignment;
  /* At most this many spills and restores together are accepted and not completed at once (each
   * counts from acceptance until its completion callback starts); one more is refused TIER_BUSY.
   * 0 = no limit of the provider's own (the host applies its own bounds). */
  uint32_t max_inflight_ops;
  uint32_t reserved;
} tier_info;

typedef struct tier_stats {
  uint32_t struct_size;
  uint32_t reserved;
  /* Budget in stored bytes (what checkpoints occupy in the tier, not their logical bytes); 0 = the
   * tier is absent. */
  uint64_t capacity_bytes;
  /* Stored bytes of complete checkpoints (and of removed ones an accepted restore still reads),
   * headers and alignment included; spills in flight are not counted (a provider may hold room
   * back for them and refuse NO_SPACE before used_bytes reaches capacity_bytes). Settled:
   * used_bytes <= capacity_bytes at all times, compressible data or not (admission weighs what
   * accounting will charge). */
  uint64_t used_bytes;
  uint64_t entries;      /* complete, visible checkpoints: never a spill in flight */
  uint64_t inflight_ops; /* accepted spills and restores whose completion has not started */
} tier_stats;

typedef struct tier_stat_result {
  uint32_t struct_size;
  uint32_t segment_count; /* the checkpoint's segment count (may exceed the capacity given) */
  uint64_t logical_bytes; /* sum of segment lengths */
  /* Bytes it occupies in the tier, the provider's overhead included (settled): the figure its
   * spill's completion reported, enumerate lists and used_bytes counts. */
  uint64_t stored_bytes;
  uint64_t estimated_restore_ns; /* the provider's current estimate */
} tier_stat_result;

typedef uint32_t tier_decision;
enum { TIER_DECISION_RESTORE = 1, TIER_DECISION_SKIP_TO_ROOT = 2 };

typedef uint32_t tier_reason;
enum {
  TIER_REASON_CHEAPER = 0, /* restore: it costs less than the predicted prefill */
  TIER_REASON_MISS = 1,    /* skip: not stored here */
  TIER_REASON_COST = 2,    /* skip: restoring would cost at least the predicted prefill */
  TIER_REASON_CORRUPT = 3, /* skip: the stored checkpoint is known to be damaged */
  TIER_REASON_BUSY = 4     /* skip: the tier cannot take another operation now */
};
#define TIER_REASON_COUNT 5

static inline const char* tier_decision_name(tier_decision decision) {
  return decision == TIER_DECISION_RESTORE        ? "restore"
         : decision == TIER_DECISION_SKIP_TO_ROOT ? "skip_to_root"
                                                  : "unknown";
}

static inline const char* tier_reason_name(tier_reason reason) {
  static const char* const names[TIER_REASON_COUNT] = {"cheaper", "miss", "cost", "corrupt",
                                                       "busy"};
  return reason < TIER_REASON_COUNT ? names[reason] : "unknown";
}

typedef struct tier_plan {
  uint32_t struct_size;
  tier_decision decision;
  tier_reason reason;
  uint32_t reserved;
  uint64_t estimated_restore_ns; /* 0 on a miss */
  uint64_t stored_bytes;         /* 0 on a miss */
} tier_plan;

/* One stored checkpoint, as enumerate reports it. Every pointer is borrowed for the callback. */
typedef struct tier_entry {
  uint32_t struct_size;
  uint32_t segment_count;
  tier_key key;
  uint64_t logical_bytes;
  uint64_t stored_bytes;
  const tier_segment_info* segments; /* segment_count entries, in stored order */
  const void* manifest;              /* the TIER_SEGMENT_MANIFEST bytes, verified; NULL if none */
  uint64_t manifest_bytes;
  /* 1.1 (read them only when TIER_HAS_FIELD(entry, tier_entry, ...) says the provider set them):
   * wall-clock times in Unix nanoseconds, 0 when unknown. last_used is the latest completed spill
   * or restore of the checkpoint by any host, as precise as the provider records it. Settled: both
   * 0 (the provider records no times) or both set; set, they are the wall clock at the event to
   * within 100 ms (a fleet's clock skew aside), never ahead of it, and last_used >= created. A
   * completed restore moves last_used (the provider may record it just after the completion, and
   * best effort under load); stat, plan_restore, probe, stats and enumerate never move it. */
  uint64_t created_unix_ns;
  uint64_t last_used_unix_ns;
} tier_entry;

/* Called once per entry; return 0 to go on, anything else to stop early. Runs on the thread that
 * called enumerate; it must not call spill, restore, remove or close of the same instance. It may
 * call info, stats, stat, plan_restore and probe of the same instance (the provider holds no lock
 * they take). */
typedef int32_t (*tier_enumerate_fn)(void* user_data, const tier_entry* entry);

/* ---------------------------------------------------------------------------------------------- */
/* Host services: what the host lends every provider (logging, metrics, a clock) */
/* ---------------------------------------------------------------------------------------------- */

typedef int32_t tier_log_level;
enum { TIER_LOG_DEBUG = 0, TIER_LOG_INFO = 1, TIER_LOG_WARN = 2, TIER_LOG_ERROR = 3 };

typedef int32_t tier_metric_type;
enum { TIER_METRIC_COUNTER = 1, TIER_METRIC_GAUGE = 2, TIER_METRIC_HISTOGRAM = 3 };

typedef struct tier_metric_family tier_metric_family; /* opaque, host-owned */
typedef struct tier_metric tier_metric;               /* one labelled series, host-owned */

/* The host owns the Prometheus registry and the one /metrics endpoint; a provider never opens a
 * port. Metric handles stay valid as long as this table does. All functions are thread-safe, never
 * fail loudly and accept NULL handles (a no-op), so a provider need not check every result. */
typedef struct tier_host_services {
  uint32_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  uint32_t reserved;
  void* host_context; /* passed back as the first argument of every service */

  /* Writes one line to the host's log. `message` is borrowed for the call. Any thread. */
  void (*log)(void* host_context, tier_log_level level, const char* message);

  /* Returns the family `name` of `type`, creating it on first use; a second call with the same
   * name, type and label names returns the same family. NULL if the name is invalid or already used
   * differently. `bucket_bounds` (ascending upper bounds) is read for histograms only. Strings and
   * arrays are borrowed for the call. Any thread. */
  tier_metric_family* (*metric_family)(void* host_context, tier_metric_type type, const char* name,
                                       const char* help, const char* const* label_names,
                                       uint32_t label_count, const double* bucket_bounds,
                                       uint32_t bucket_count);

  /* Returns the series of `family` with these label values (label_count must equal the family's),
   * creating it at zero on first use. NULL on a NULL family or a count mismatch. Any thread. */
  tier_metric* (*metric)(void* host_context, tier_metric_family* family,
                         const char* const* label_values, uint32_t label_count);

  /* Counter: adds delta (negative deltas are ignored). Gauge: adds delta (any sign). Any thread. */
  void (*metric_add)(void* host_context, tier_metric* metric, double delta);
  /* Gauge only: sets the value. Any thread. */
  void (*metric_set)(void* host_context, tier_metric* metric, double value);
  /* Histogram only: records one observation. Any thread. */
  void (*metric_observe)(void* host_context, tier_metric* metric, double value);

  /* Nanoseconds on a monotonic clock (CLOCK_MONOTONIC on Linux). Any thread. */
  uint64_t (*monotonic_ns)(void* host_context);
} tier_host_services;

/* ---------------------------------------------------------------------------------------------- */
/* The provider table */
/* ---------------------------------------------------------------------------------------------- */

/* The first four fields (struct_size, abi_major, abi_minor, reserved) keep this layout in every
 * major version, so a host can always name the version of a provider it refuses. */
typedef struct tier_provider {
  uint32_t struct_size; /* sizeof(tier_provider) as the provider was compiled */
  uint32_t abi_major;   /* TIER_ABI_VERSION_MAJOR the provider was compiled against */
  uint32_t abi_minor;   /* TIER_ABI_VERSION_MINOR the provider was compiled against */
  uint32_t reserved;
  const char* name;    /* static, short: "disk", "null" (a metric label value) */
  const char* version; /* static, the provider's own version */

  /* Opens an instance over `namespace_id` (the model/layout fingerprint: checkpoints of another
   * namespace are never served) with key=value options. Unknown or malformed options fail with
   * TIER_INVALID_ARGUMENT and a message naming the option. `host` must outlive the instance; the
   * instance is the caller's until close(). Any thread. `namespace_id` is non-NULL; "" is a
   * namespace like any other (distinct from every non-empty one), and one longer than the provider
   * can store is refused with TIER_INVALID_ARGUMENT. Settled: every open that returns TIER_OK
   * returns a new instance, also for equal options (a provider holding an exclusive resource, such
   * as a directory lock, refuses the second with TIER_BUSY instead). */
  tier_status (*open)(const tier_host_services* host, const char* namespace_id,
                      const tier_option* options, uint32_t option_count,
                      tier_instance** instance_out, tier_error* error);

  /* Cancels what is in flight, waits until every accepted operation has completed (with
   * TIER_CANCELLED if it did not finish) and frees the instance. Stored checkpoints of a persistent
   * provider stay. Must not race with any other call on the instance, nor run inside a callback.
   * An operation racing close completes with TIER_OK (it finished first: a restore's buffers are
   * filled, a spill is stored) or TIER_CANCELLED (buffers unspecified, nothing stored); both are
   * correct, and the stored checkpoints stay whole either way. */
  void (*close)(tier_instance* instance);

  /* Fills `out` (caller sets out->struct_size). Any thread. */
  tier_status (*info)(tier_instance* instance, tier_info* out, tier_error* error);

  /* Fills `out` with capacity, usage and entry counts (caller sets struct_size). Any thread. */
  tier_status (*stats)(tier_instance* instance, tier_stats* out, tier_error* error);

  /* Describes a stored checkpoint: TIER_OK and `out` filled, and the first min(segment_count,
   * segment_capacity) entries of `segments` (may be NULL when segment_capacity is 0); or
   * TIER_NOT_FOUND. A checkpoint still being spilled is not found. Any thread. */
  tier_status (*stat)(tier_instance* instance, const tier_key* key, tier_stat_result* out,
                      tier_segment_info* segments, uint32_t segment_capacity, tier_error* error);

  /* Stores a checkpoint: all segments or, on any failure, nothing visible. Asynchronous (see the
   * contract at the top). Synchronous refusals: TIER_INVALID_ARGUMENT, TIER_ALREADY_EXISTS,
   * TIER_NO_SPACE (over capacity), TIER_BUSY. `segments` and their data are borrowed until the
   * completion runs. It becomes visible to stat/restore/enumerate only when it completes with OK.
   * Any thread. Settled: visible no later than its completion starts (a completion may stat it).
   * NO_SPACE and BUSY are refusals as a rule; a provider that learns of them only after
   * acceptance (a filesystem that fills up, a remote store that throttles) completes with them
   * instead, and then nothing is stored. */
  tier_status (*spill)(tier_instance* instance, const tier_key* key, const tier_segment* segments,
                       uint32_t segment_count, tier_done_fn done, void* user_data,
                       tier_error* error);

  /* Restores a checkpoint into the caller's buffers. `segments` must list exactly the stored
   * segments (same count, kinds, indexes and lengths, any order), else TIER_INVALID_ARGUMENT. On a
   * completion other than OK the buffers' contents are unspecified and must not be used; a
   * verification failure completes with TIER_DATA_LOSS and the entry is dropped. A remove arriving
   * meanwhile does not break a restore already accepted; a close makes it complete OK or CANCELLED
   * (see close). Asynchronous. Any thread. A key that is not stored is refused with TIER_NOT_FOUND
   * by the call when the provider knows it at once (disk, null); a provider that learns it only
   * from its store (TIER_CAP_SHARED) may complete with TIER_NOT_FOUND instead, and hosts treat
   * both alike. */
  tier_status (*restore)(tier_instance* instance, const tier_key* key, const tier_segment* segments,
                         uint32_t segment_count, tier_done_fn done, void* user_data,
                         tier_error* error);

  /* Removes a checkpoint: TIER_OK or TIER_NOT_FOUND. Its space is released once no accepted
   * restore still reads it. Any thread. A key whose spill is still in flight is not stored yet:
   * remove answers TIER_NOT_FOUND and that spill goes on (remove it after its completion).
   * Settled: a persistent provider's remove that returned TIER_OK survives close and a restart:
   * the checkpoint never comes back. */
  tier_status (*remove)(tier_instance* instance, const tier_key* key, tier_error* error);

  /* Calls `fn` for every complete, visible checkpoint of this namespace (order unspecified), so a
   * restarted server can re-adopt them. See tier_enumerate_fn for what the callback may do. */
  tier_status (*enumerate)(tier_instance* instance, tier_enumerate_fn fn, void* user_data,
                           tier_error* error);

  /* Decides whether restoring `key` beats a prefill the server predicts at predicted_prefill_ns:
   * TIER_DECISION_RESTORE (reason CHEAPER) only when the estimated restore time is lower;
   * otherwise TIER_DECISION_SKIP_TO_ROOT with a reason. Returns TIER_OK whenever `out` holds a
   * plan (a miss is a plan). Counts every decision. Any thread. */
  tier_status (*plan_restore)(tier_instance* instance, const tier_key* key,
                              uint64_t predicted_prefill_ns, tier_plan* out, tier_error* error);

  /* ---- 1.1: optional slots (test with TIER_HAS_SLOT; a 1.0 provider has none of them) ---- */

  /* Looks up `key_count` keys (1..TIER_PROBE_MAX_KEYS) in one call: found[i] = 1 when keys[i] is
   * stored, complete and visible now, else 0 (found has key_count bytes). Settled: every found[i]
   * is written; a key_count outside 1..TIER_PROBE_MAX_KEYS, NULL keys or NULL found are refused
   * with TIER_INVALID_ARGUMENT before keys is read or found written; a spill in flight and a key
   * whose remove returned (even one an accepted restore still reads) are not found. A hint, not a
   * pin: the checkpoint may be removed before a restore, which then answers NOT_FOUND. This is how
   * a host of a shared tier (TIER_CAP_SHARED) finds checkpoints that other hosts spilled. May wait
   * for I/O (a network round trip): hosts call it from a thread that may block. Any thread. */
  tier_status (*probe)(tier_instance* instance, const tier_key* keys, uint32_t key_count,
                       uint8_t* found, tier_error* error);
} tier_provider;

/* Size of a version 1.0 provider table: the smallest a host of major 1 accepts. */
#define TIER_PROVIDER_V1_0_SIZE (offsetof(tier_provider, plan_restore) + sizeof(void*))
/* Size of a version 1.1 provider table. */
#define TIER_PROVIDER_V1_1_SIZE (offsetof(tier_provider, probe) + sizeof(void*))
/* Size of a version 1.0 tier_entry (without the 1.1 times). */
#define TIER_ENTRY_V1_0_SIZE (offsetof(tier_entry, manifest_bytes) + sizeof(uint64_t))
/* Size of a version 1.0 host services table. */
#define TIER_HOST_SERVICES_V1_0_SIZE (offsetof(tier_host_services, monotonic_ns) + sizeof(void*))

/* True when `table` (a pointer to a struct starting with struct_size) has a non-NULL `field`. */
#define TIER_HAS_SLOT(table, type, field)                                               \
  ((table) != NULL &&                                                                   \
   (size_t)(table)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field) && \
   (table)->field != NULL)

/* True when the caller-allocated out-structure `out` has room for `field`. */
#define TIER_HAS_FIELD(out, type, field) \
  ((size_t)(out)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* The entry point. The host passes its version and services; on TIER_OK `*provider_out` points at
 * the provider's static table. TIER_UNSUPPORTED when the host's major differs (the provider should
 * still set `*provider_out` so the host can name both versions in its error). Cheap and
 * stateless: the host may call it more than once (instances get their services from open). Any
 * thread. */
typedef tier_status (*tier_provider_entry_fn)(uint32_t host_abi_major, uint32_t host_abi_minor,
                                              const tier_host_services* host,
                                              const tier_provider** provider_out);

TIER_EXPORT tier_status tier_provider_entry(uint32_t host_abi_major, uint32_t host_abi_minor,
                                            const tier_host_services* host,
                                            const tier_provider** provider_out);

/* ---------------------------------------------------------------------------------------------- */
/* Pinned layout (LP64) */
/* ---------------------------------------------------------------------------------------------- */

#ifdef __cplusplus
#define TIER_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define TIER_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#if UINTPTR_MAX == 0xffffffffffffffffu
TIER_STATIC_ASSERT(sizeof(tier_key) == 32, "tier_key layout");
TIER_STATIC_ASSERT(sizeof(tier_error) == 260, "tier_error layout");
TIER_STATIC_ASSERT(sizeof(tier_segment) == 24, "tier_segment layout");
TIER_STATIC_ASSERT(sizeof(tier_segment_info) == 16, "tier_segment_info layout");
TIER_STATIC_ASSERT(sizeof(tier_completion) == 40, "tier_completion layout");
TIER_STATIC_ASSERT(sizeof(tier_info) == 48, "tier_info layout");
TIER_STATIC_ASSERT(sizeof(tier_stats) == 40, "tier_stats layout");
TIER_STATIC_ASSERT(sizeof(tier_stat_result) == 32, "tier_stat_result layout");
TIER_STATIC_ASSERT(sizeof(tier_plan) == 32, "tier_plan layout");
TIER_STATIC_ASSERT(sizeof(tier_entry) == 96, "tier_entry layout");
TIER_STATIC_ASSERT(TIER_ENTRY_V1_0_SIZE == 80, "tier_entry 1.0 layout");
TIER_STATIC_ASSERT(offsetof(tier_host_services, log) == 24, "host services layout");
TIER_STATIC_ASSERT(offsetof(tier_host_services, monotonic_ns) == 72, "host services layout");
TIER_STATIC_ASSERT(sizeof(tier_host_services) == 80, "host services layout");
TIER_STATIC_ASSERT(offsetof(tier_provider, name) == 16, "provider table layout");
TIER_STATIC_ASSERT(offsetof(tier_provider, open) == 32, "provider table layout");
TIER_STATIC_ASSERT(offsetof(tier_provider, plan_restore) == 104, "provider table layout");
TIER_STATIC_ASSERT(offsetof(tier_provider, probe) == 112, "provider table layout");
TIER_STATIC_ASSERT(TIER_PROVIDER_V1_0_SIZE == 112, "provider table 1.0 layout");
TIER_STATIC_ASSERT(sizeof(tier_provider) == 120, "provider table layout");
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TIER_PROVIDER_H */
