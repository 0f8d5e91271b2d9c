// tier/host/types.h -- the values an integrator passes to and gets from tier::Host (host.h):
// options, requests, admissions, events, stats, the policy and root-reason enums. host.h includes
// it; the library's own parts (policy, Device tier, server metrics) include this header, not the
// Host facade. The contracts (THREADS, PAGES, STATE, IDS, BYTES, ORDERING) are in host.h.
#pragma once

#include <tier/device/pool_layout.h>
#include <tier/device/transfer.h>
#include <tier/device/transfer_engine.h>
#include <tier/host/model_profile.h>
#include <tier/status.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tier_provider.h"

namespace tier {

class MetricsRegistry;  // tier/host/metrics_registry.h

// A provider's key=value options, in order (HostOptions::provider_options).
using ProviderOptions = std::vector<std::pair<std::string, std::string>>;

// Which value order pressure walks (host_shim/README.md, "Policy"). kValue is the default.
enum class Policy {
  kValue,  // prefill time saved per byte, aged by recency, with use frequency and supersession
  kLru,    // recency only (baseline)
  kGdsf,  // greedy-dual-size-frequency: frequency x prefill cost / size, inflation aging (baseline)
};
const char* PolicyName(Policy policy);  // "value", "lru", "gdsf"
// Parses "value", "lru", "gdsf"; INVALID_ARGUMENT naming the value otherwise.
Result<Policy> ParsePolicy(const std::string& text);

// The parts of kValue beyond "prefill saved per byte, aged by recency", each of which can be
// turned off to measure what it pays (host_shim/README.md, "Policy"). LRU and GDSF ignore them.
struct ValueLevers {
  // A checkpoint whose conversation moved on (its one child extends it; not a shared prefix)
  // is worth a small fraction of its value: a returning turn resumes from the child.
  bool superseded = true;
  // Uses and the siblings a prefix seeds raise its value (a system head seeding many sessions).
  bool shared_use = true;
  // In Cold a checkpoint is worth what it saves net of its restore (read + Host->Device).
  bool net_of_restore = true;
  // Cold admission: a Host copy is written to Cold only when it is likely to come back: not
  // superseded, and its restore would cost less than its prefill. Otherwise it is dropped.
  bool cold_admission = true;
  // Recency ages by the reuse gaps observed so far (their running mean) instead of a fixed 300 s.
  bool adaptive_age = true;
};
// "all", "none", or a comma list of superseded, shared_use, net_of_restore, cold_admission,
// adaptive_age (each turned on; prefix "-" turns one off from "all", e.g. "all,-superseded").
// INVALID_ARGUMENT naming the unknown word otherwise. Pure.
Result<ValueLevers> ParseValueLevers(const std::string& text);
std::string ValueLeversName(const ValueLevers& levers);  // "superseded,shared_use,..." or "none"

// Where a request's state came from.
enum class Outcome { kDeviceHit, kHostRestore, kColdRestore, kRootPrefill };
constexpr int kOutcomeCount = 4;
const char* OutcomeName(Outcome outcome);  // "device_hit", ...

// Why an admission prefilled from the root instead of reusing a checkpoint.
enum class RootReason {
  kNoCheckpoint,   // no checkpoint is a prefix of the request
  kMiss,           // the provider no longer has the cold checkpoint
  kCost,           // restoring from cold would cost at least the predicted prefill
  kCorrupt,        // the cold checkpoint failed verification (data loss)
  kBusy,           // the provider could not take the restore now
  kNoRoom,         // no pool pages or host memory to stage the restore
  kStalePlan,      // the catalog changed between the plan and its execution
  kRestoreFailed,  // an I/O or copy error during the restore
  kTimeout,        // a provider operation passed its deadline
};
constexpr int kRootReasonCount = 9;
const char* RootReasonName(RootReason reason);  // "no_checkpoint", ...

// One state buffer of the server: a StateImage part (TIER_SEGMENT_STATE_IMAGE, index = part), the
// hidden state (TIER_SEGMENT_HIDDEN_STATE), speculative state (TIER_SEGMENT_SPEC_KV with an index
// past the pool's speculative layers) or anything else (TIER_SEGMENT_OTHER). Memory the transfer
// engine copies from and to: device memory on the CUDA path, any host memory on the CPU path.
// Borrowed for the call that names it and, for Seal and Admit, until their completion.
struct StateBuffer {
  tier_segment_kind kind = TIER_SEGMENT_STATE_IMAGE;
  uint32_t index = 0;
  std::byte* data = nullptr;
  uint64_t bytes = 0;
};

// The server's paged KV pool: its layout and where its planes live. Layers [0, main_kv_layers)
// are full-attention layers (TIER_SEGMENT_MAIN_KV, index = layer), the rest speculative
// (TIER_SEGMENT_SPEC_KV, index = layer - main_kv_layers). The pool's memory is the server's.
struct KvPool {
  device::PoolLayout layout;
  device::PoolView view;
  uint32_t main_kv_layers = 0;  // 0 = every layer is a full-attention layer
};

// KV events (off by default): what the tiers hold, published in vLLM's KV-event format for
// KV-aware routers (host_shim/README.md "KV events"). A checkpoint entering or leaving Device,
// Host or Cold is a BlockStored / BlockRemoved of its block ids with the tier's medium; the
// publisher thread encodes and sends, the scheduler thread only enqueues (bounded: a full queue
// drops, counted in HostStats::kv_events_dropped).
struct KvEventsOptions {
  std::string addr;         // ZeroMQ PUB endpoint (bound), e.g. tcp://127.0.0.1:5557; "" = off
  std::string replay_addr;  // ROUTER endpoint (bound) serving buffered batches; "" = none
  std::string topic;        // the first frame; "" = "kv@<hostname>@<namespace label>"
  std::string cold_medium;  // Cold's medium name; "" = the provider's name upper-cased ("DISK")
  int data_parallel_rank = 0;
  uint32_t queue_events = 65536;    // placement changes queued at most (then dropped, counted)
  uint32_t replay_batches = 10000;  // batches kept for replay
};

struct HostOptions {
  // The cold tier: a provider path or short name ("disk", "null", "rados": ResolvePluginPath), and
  // its key=value options. Empty = no cold tier (Device and Host only).
  std::string plugin;
  ProviderOptions provider_options;
  // Model/layout fingerprint: checkpoints of another namespace are never served. Required. It must
  // change whenever the bytes would (layout, dtype, bytes scale): CheckpointNamespace()
  // (identity.h) builds one from a label, the profile and the scale, so that servers sharing a tier
  // meet only when they can use each other's checkpoints. A checkpoint whose manifest names another
  // identity is a miss, left where it is, never removed.
  std::string namespace_id;
  // Cost coefficients (prefill, transfers) and the model's shape. Required.
  ModelProfile profile;
  // The server's pool. Its layout must have tokens_per_page > 0 and at least one layer, and
  // `profile` must describe it: the same tokens_per_page, and full_attention_layers + mtp_layers
  // equal to its layer count (Open is INVALID_ARGUMENT naming both figures otherwise).
  KvPool pool;
  // Tokens each block id of SealRequest::blocks stands for (the server's hash block size). When
  // set, Seal refuses (INVALID_ARGUMENT naming the figures) a request whose tokens are not its
  // full blocks plus at most a partial one: blocks x block_tokens <= tokens < (blocks + 1) x
  // block_tokens. 0 = unchecked (only blocks <= tokens). A server should set it.
  uint32_t block_tokens = 0;
  // The transfer engine the pool lives on; null = select one for `device` ("auto", "cpu",
  // "cuda"). Shared: the server may allocate its pool from it before Open.
  std::shared_ptr<device::TransferEngine> engine;
  std::string device = "auto";
  // Budgets in logical bytes of parked checkpoints (physical bytes x bytes_scale).
  uint64_t device_capacity_bytes = 8ull << 30;
  uint64_t host_capacity_bytes = 16ull << 30;
  // The hard bound on the Host's pinned memory (physical bytes): Host copies, restores being
  // staged, demotions and seals in progress. 0 = twice host_capacity_bytes / bytes_scale plus
  // 64 MiB. Pinned whole at Open (HostStats::host_pinned_bytes; smaller chunks, or less, when
  // the system does not give it at once: logged), never on the scheduler thread. When it is full
  // a seal, a demotion or a cold restore first lets go of idle Host copies that Cold or Device
  // back; then a cold restore waits (pending, root reason no_room past its wait), a demotion drops
  // the Device copy, and a Seal that can be placed neither on Device nor in Host is refused at
  // once (NO_SPACE naming host_memory_bytes and the figures; see Seal), never left pending.
  uint64_t host_memory_bytes = 0;
  // For simulators: every byte moved stands for this many bytes of the real model in budgets and
  // in the cost model. 1 for a real server. Not a test hook: tier-host replay and tier-bench
  // (--bytes-scale) run a real Host this way, and the scale is part of a checkpoint's identity
  // (CheckpointNamespace, the stored manifest), so servers of different scales never share bytes.
  uint64_t bytes_scale = 1;
  // Bounds: cold restores in flight at once (also capped by the provider's max_inflight_ops), and
  // provider threads (calls that may block run there, never on the scheduler thread).
  uint32_t max_inflight_restores = 4;
  uint32_t provider_threads = 2;
  // Every provider operation's deadline. Past it the admission prefills from the root (reason
  // timeout) and what the operation borrowed stays pinned until the provider completes. An
  // admission waits for a cold restore no longer than the root prefill of the checkpoint it
  // would restore (the cost model's prediction, at least 1 s) within this deadline; after a
  // restore passed its deadline, cold restores back off (5 s doubling to 60 s, reset by one that
  // completes): meanwhile cold candidates are skipped (root reason busy, counted in
  // HostStats::restores_skipped_backing_off).
  uint64_t provider_timeout_ns = 30ull * 1000 * 1000 * 1000;
  // How long Close() waits for provider operations before giving up on them (never a hang).
  uint64_t close_timeout_ns = 30ull * 1000 * 1000 * 1000;
  // Close() writes the Host copies no cold copy backs to a persistent cold tier
  // (TIER_CAP_PERSISTENT), most valuable first, within close_timeout_ns, so that a restart
  // re-adopts what the server parked last (counted in tier_close_flush_total, one log line).
  // Device-only checkpoints are not written. false = Close() writes nothing new.
  bool flush_host_at_close = true;
  Policy policy = Policy::kValue;
  ValueLevers value_levers;  // kValue only
  // For simulators: a cold restore is predicted at this read bandwidth over its logical bytes
  // (plus the Host->Device transfer), the restore-or-root decision is made by that prediction
  // (deterministic) and Admission::cold_restore_model_ns reports it. 0 = the provider's own
  // estimate decides (a real server). Policy and cold admission use it too; with 0 they use the
  // read rate observed on completed restores (2 GB/s until one completed). Used by tier-host
  // replay (its modelled time, the trace's cold_read_gbps) and the simulation test
  // (tests/simulation: deterministic decisions); a real server leaves it 0.
  double model_cold_read_bytes_per_second = 0;
  // Shared cold tiers (TIER_CAP_SHARED with probe): look checkpoints other servers spilled up by
  // key at admission when the catalog has nothing as long. At most this many candidate lengths.
  uint32_t max_probe_keys = 256;
  // Opt-in (a debugging aid, off in production): the pages a Device placement holds are
  // checksummed at Seal (one gather into Host memory) and checked whenever the Host reads them (a
  // demotion, a Device hit, gathered again). A server that wrote a page before kPagesReleased named
  // it gets an error line naming the page and the checkpoint (HostStats::held_page_mismatches);
  // the checkpoint leaves every tier instead of being served with wrong bytes.
  bool verify_held_pages = false;
  // The registry the Host and its provider register their metrics in; null = a private one.
  // Borrowed: it must outlive the Host (Close included). The series stay registered after the
  // Host is gone, so a Host opened again over the same registry continues them.
  MetricsRegistry* metrics = nullptr;
  // Tenants (issue 23) whose Admit and Seal calls are counted under their own name in
  // tier_tenant_admissions_total / tier_tenant_seals_total{tenant}; any other tenant counts as
  // "other", none as "none" (bounded label cardinality). Empty (the default): no tenant series.
  std::vector<std::string> metrics_tenants;
  // A tenant's fair share of each tier's budget (issue 23), 0 to 1; 0 (the default): off. When a
  // tier must free room (Device, Host and Cold alike), the idle checkpoints of tenants holding
  // more than this share of the tier's budget go first, in value order, each only while its tenant
  // is still over; then everyone's by value. So one tenant's burst takes from its own checkpoints,
  // not from everyone else's. A checkpoint without a tenant (and one re-adopted at Open: the stored
  // manifest does not name its tenant) counts as the tenant "". Prefetched Host copies still go
  // last.
  double tenant_share = 0;

  // ---- GPU path (issue 27) ----------------------------------------------------------------------
  // Device memory for the state buffers of Device placements (StateImage, hidden and speculative
  // state; their KV stays in the server's pool), allocated once from the engine at Open and
  // carved per placement: nothing is allocated or freed on the device by a seal or an eviction,
  // and a placement's memory is reused only after the copies that used it are done. A seal whose
  // state does not fit goes to Host. 0 = min(device_capacity_bytes / bytes_scale, 1 GiB).
  uint64_t device_state_bytes = 0;

  // ---- KV events (issue 23) ---------------------------------------------------------------------
  KvEventsOptions kv_events;

  // ---- Encryption at rest (issue 23) -----------------------------------------------------------
  // Off when key_file is empty (the default). Otherwise every segment the Host hands the provider
  // is AES-256-GCM ciphertext of its own length, and the manifest segment (sealed behind a small
  // header: key id, nonce, tag) holds each segment's nonce and tag; the provider and the store
  // never see plaintext or a key. key_file: the master key, 32 raw bytes or
  // 64 hex digits, read at Open and refused (INVALID_ARGUMENT naming the path) unless a regular
  // file of mode 0600 or stricter owned by this process's uid. old_key_files: earlier master keys,
  // accepted for reading only (rotation). A segment that fails its tag or names an unknown key is
  // DATA_LOSS: a miss, counted in HostStats::encryption_*, never served. See the README section.
  struct Encryption {
    std::string key_file;
    std::vector<std::string> old_key_files;
  } encryption;
};

// The server's destination for a restore: called synchronously inside Admit (or Poll, once the
// bytes are in Host) with the number of pages the checkpoint needs; fills `pages` with that many
// distinct free page ids of the pool and returns true, or returns false when it has none. The
// pages are the request's; the Host only writes into them. It must not call back into the Host
// (a TIER_CHECK). True with the wrong pages (too few or many, one twice, one outside the pool) is
// a server bug: an error line names it, the request prefills from the root (restore_failed) and
// every id handed over comes back in unused_pages.
using PageAllocator = std::function<bool(uint32_t page_count, std::vector<uint32_t>* pages)>;

struct AdmitRequest {
  std::span<const uint64_t> blocks;  // content ids of the prompt's blocks (borrowed for the call)
  uint64_t now_ns = 0;               // the server's clock (recency and the policy)
  PageAllocator allocate_pages;      // required
  std::vector<StateBuffer> state;    // the lane's state buffers, filled by the restore

  // ---- GPU path (issue 27; see ORDERING) --------------------------------------------------------
  // The server's stream whose queued work still uses the pages allocate_pages hands over and the
  // lane's state buffers (their previous owner's kernels). The Host orders its scatter and state
  // copies after the work queued on it when it queues them: inside Admit for a Device hit, in the
  // Poll that starts the copy for a Host or Cold restore (the stream must live until then).
  // nullptr: nothing to wait for.
  device::NativeStream order_after = nullptr;

  // ---- Tenants (issue 23) -----------------------------------------------------------------------
  // Part of the identity (vLLM's cache_salt): only a checkpoint sealed with the same tenant is
  // found (identity.h TenantBlocks). "" (the default): no tenant, as before. Borrowed for the call.
  std::string_view tenant = {};
};

enum class AdmissionState {
  kReady,      // the state is in place (or queued on the engine's stream: see `state_copy`)
  kPending,    // a transfer or a cold restore is under way: an event will say how it ended
  kRoot,       // prefill from the root (`root_reason` says why); nothing was written
  kCancelled,  // Cancel() ended it; the server's pages and buffers are its own again
};

struct Admission {
  uint64_t id = 0;  // pass to Release() once the request is done (kReady only), Cancel()
  AdmissionState state = AdmissionState::kRoot;
  // kReady: where the state came from. kPending: the tier the candidate is coming from
  // (kHostRestore, kColdRestore); the event's admission has the final one (a candidate that
  // fails gives way to a shorter one, or to the root).
  Outcome outcome = Outcome::kRootPrefill;
  RootReason root_reason = RootReason::kNoCheckpoint;
  uint64_t cached_tokens = 0;   // tokens the reused checkpoint covers (kReady)
  tier_key key{};               // the checkpoint reused (kReady)
  std::vector<uint32_t> pages;  // its page table: cached_tokens' pages, in order (kReady)
  bool pages_shared = false;    // true on a device hit: the Host's pages, read-only
  // Pages allocate_pages handed over that this admission does not use (a candidate that failed
  // after its pages were allocated): the server's again, whatever the state.
  std::vector<uint32_t> unused_pages;
  // Device hits only: the state copy into the lane's buffers, queued on the engine. Order later
  // work after it (Transfer::make_stream_wait) or wait() on it before using the state.
  device::Transfer state_copy;
  std::vector<std::byte> server_manifest;  // what the server sealed with it (kReady)
  uint64_t cold_restore_ns = 0;            // wall time of the provider's restore (cold restores)
  // The restore's modelled time at model_cold_read_bytes_per_second over its logical bytes
  // (cold restores, and prefetched ones: what the prefetch took off); 0 without the model.
  uint64_t cold_restore_model_ns = 0;
  uint64_t transfer_model_ns = 0;   // modelled Host->Device transfer time (cost model)
  uint64_t logical_bytes = 0;       // the reused checkpoint's logical bytes (Host, cold restores)
  uint64_t wait_ns = 0;             // wall time from Admit to ready (pending admissions)
  bool prefetched = false;          // a prefetch brought it into Host before the request came
  uint64_t prefetch_hidden_ns = 0;  // cold restore time the prefetch took off this request
};

struct SealRequest {
  std::span<const uint64_t> blocks;  // identity (borrowed for the call)
  uint64_t tokens = 0;               // the frontier, <= pages x tokens_per_page
  bool shared_prefix = false;        // a stable prefix seeding many siblings (a system head)
  std::span<const uint32_t> pages;   // pool pages of tokens [0, tokens), in order
  std::vector<StateBuffer> state;    // read until the kSealed event (or `copied`)
  std::span<const std::byte> server_manifest;  // opaque, <= 32 KiB, stored and returned as is
  uint64_t now_ns = 0;

  // ---- GPU path (issue 27; see ORDERING) --------------------------------------------------------
  // The server's stream whose queued work writes the pages and state this seal reads (the last
  // decode step's kernels). Inside Seal the Host orders its gather and state copies after the
  // work queued on it so far. nullptr: the server has synchronized (nothing to wait for).
  device::NativeStream order_after = nullptr;

  // Part of the identity (issue 23; AdmitRequest::tenant): "" for none. Borrowed for the call.
  std::string_view tenant = {};
};

struct Sealed {
  uint64_t id = 0;
  Status status;           // not ok: nothing was taken (no page held, no buffer read)
  bool existed = false;    // the checkpoint was already sealed: only its use time was touched
  bool on_device = false;  // the Host holds the pages (a Device placement)
  // The reads of the state buffers (and, when not on Device, of the pages), queued on the engine.
  device::Transfer copied;
};

struct Event {
  enum Kind {
    kAdmissionReady,      // `admission` is ready (state kReady)
    kAdmissionRoot,       // a pending admission ends in a root prefill (state kRoot)
    kAdmissionCancelled,  // a cancelled admission's writes are over (state kCancelled)
    kSealed,              // seal `id`: its reads are over, the state buffers are free
    kPagesReleased,       // the Host dropped its last reference on `pages`
    kPrefetchDone,        // prefetch `id` finished (`admission.state` kReady: now in Host)
  };
  Kind kind = kAdmissionReady;
  uint64_t id = 0;
  Admission admission;          // admission events, kPrefetchDone
  std::vector<uint32_t> pages;  // kPagesReleased
};

// What the Host has done since Open (for reports and tests).
struct HostStats {
  // KV events (HostOptions::kv_events): placement changes queued, published, and dropped on a
  // full queue (a subscriber's index then misses them until the next AllBlocksCleared).
  uint64_t kv_events_queued = 0, kv_events_published = 0, kv_events_dropped = 0;
  // Encryption at rest (HostOptions::encryption): segments (restores, or manifests at Open) that
  // failed their tag or had no valid header, and segments sealed under a key this server lacks.
  uint64_t encryption_tag_failures = 0, encryption_unknown_key = 0;
  uint64_t spills = 0, spill_failures = 0, evictions = 0;
  // Spills a shared tier answered ALREADY_EXISTS: another server stored the key first (a success
  // for the fleet; not among spills nor spill_failures).
  uint64_t spills_already_stored = 0;
  uint64_t spilled_logical_bytes = 0, spilled_stored_bytes = 0;
  uint64_t restored_logical_bytes = 0, restored_stored_bytes = 0;
  uint64_t peak_cold_logical_bytes = 0, peak_cold_stored_bytes = 0;
  uint64_t peak_device_logical_bytes = 0, peak_host_logical_bytes = 0;  // budgets are targets
  uint64_t readopted = 0, readopted_hits = 0;
  uint64_t remote_hits = 0;  // cold restores of checkpoints another server spilled (probe)
  uint64_t prefetches = 0, prefetches_used = 0, prefetches_wasted = 0;
  uint64_t prefetch_hidden_ns = 0;
  uint64_t timeouts = 0;  // provider operations that passed their deadline
  // Cold candidates an admission or prefetch skipped (root reason busy) because cold restores
  // were backing off after a restore passed its deadline.
  uint64_t restores_skipped_backing_off = 0;
  uint64_t verified_restores = 0, mismatched_restores = 0;  // ReportVerification calls
  uint64_t held_page_mismatches = 0;      // verify_held_pages: held pages the server wrote
  uint64_t cold_write_bytes = 0;          // stored bytes written to the cold tier
  uint64_t cold_write_logical_bytes = 0;  // the same, logical
  // Spilled KV bytes (logical) that repeat the KV of the checkpoint it extends, when that parent
  // was in Cold at the time: what storing shared pages once would have saved.
  uint64_t cold_write_parent_kv_logical_bytes = 0;
  // Cold admission (ValueLevers::cold_admission): Host copies dropped instead of spilled, as
  // superseded or as not worth their restore.
  uint64_t cold_admission_superseded = 0, cold_admission_not_worth = 0;
  uint64_t superseded_checkpoints = 0;  // checkpoints a continuation superseded (at their seal)
  // The value policy's learned state: its recency half-life and what superseded checkpoints
  // keep of their value (policy.h).
  double value_half_life_s = 0, value_superseded_weight = 0;
  uint64_t provider_calls_outside_admission = 0;  // must stay 0: no cold I/O during decode
  uint64_t entries = 0, device_entries = 0, host_entries = 0, cold_entries = 0;
  uint64_t device_bytes = 0, host_bytes = 0, cold_bytes = 0;  // logical
  uint64_t cold_capacity_bytes = 0;                           // logical (0 = no cold tier)
  uint64_t pending_admissions = 0, inflight_provider_ops = 0;

  // ---- GPU path (issue 27) ----------------------------------------------------------------------
  // Host memory pinned at Open (the arena's bound, or what the system gave of it), in how many
  // chunks and how long it took. The Host tier never pins more after Open.
  uint64_t host_pinned_bytes = 0, host_pin_chunks = 0, host_pin_ns = 0;
};

// Where a checkpoint is and what holds it (Host::Describe), for tools, tests and debugging.
struct CheckpointInfo {
  bool on_device = false, on_host = false, on_cold = false;
  uint64_t tokens = 0;
  uint64_t logical_bytes = 0;
  uint32_t pins = 0;  // requests and operations using it
  bool shared_prefix = false;
  bool remote = false;  // found in a shared tier, spilled by another server
};

}  // namespace tier
