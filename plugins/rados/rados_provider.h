// rados_provider.h -- the shared cold tier on Ceph RADOS behind the C ABI (entry.cc adapts it).
// One instance owns a librados client connected to one pool, in the RADOS namespace of its
// (prefix, namespace), and shares that namespace with every other instance on the pool: a
// checkpoint spilled by one server is found (probe, stat), restored and removed by any other.
//
// Threads: kJobRunners runners each drive one spill or restore at a time (they block on their
// own chunk window and on single round trips, bounded by op_timeout_s); `threads` workers
// prepare and verify chunks (checksums, zstd) inside the instance's IoWindow of queue_depth
// operations; librados's finisher thread runs Aio callbacks, which only record and post. User
// completions run on a runner with no provider lock held. The housekeeping thread sweeps.
// Locks: mu_ (counts, reservations, keys being spilled, pins, header cache) is never held across
// a cluster operation, a codec call or a callback.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <tier/provider/work_queue.h>
#include <tier/status.h>

#include "aio.h"
#include "cluster.h"
#include "fleet.h"
#include "format.h"
#include "io_window.h"
#include "metrics.h"
#include "options.h"
#include "reaper.h"
#include "tier_provider.h"

namespace tier::rados {

using provider::WorkQueue;

// What one sweep pass saw and did (README.md, "The sweep rule").
struct SweepReport {
  uint64_t objects_listed = 0;
  uint64_t checkpoints = 0;     // header objects
  uint64_t stored_bytes = 0;    // their tier.stored
  uint64_t live_spills = 0;     // chunk groups with a fresh lease (left alone)
  uint64_t orphan_groups = 0;   // chunk groups of dead spills
  uint64_t orphan_objects = 0;  // their chunks and stale leases, queued for removal
  bool truncated = false;       // stopped at kSweepMaxObjects or the time bound
};

// Test seams: called at fixed points of the pipelines, on the thread that runs them (a test may
// block there to hold a spill at that point deterministically). Empty: nothing is called.
struct RadosHooks {
  // A spill whose chunks are written and whose lease was found fresh, before its header publish.
  std::function<void(const KeyBytes& key)> before_publish;
  // A restore pinned in the fleet ledger (fleet_budget_bytes), before it reads a chunk.
  std::function<void(const KeyBytes& key)> restore_pinned;
};

// A header as read from the cluster, with its xattrs.
struct FetchedHeader {
  std::shared_ptr<const Header> header;
  uint64_t used_unix_ns = 0;  // tier.used (0 when absent)
};

class RadosProvider {
 public:
  static constexpr uint32_t kJobRunners = 4;
  static constexpr uint32_t kMaxInflightOps = 128;  // accepted spills + restores
  static constexpr size_t kHeaderCacheEntries = 512;
  static constexpr uint64_t kSweepMaxObjects = 1'000'000;  // per pass
  static constexpr uint32_t kMetadataWave = 256;       // probe stats / header reads per round trip
  static constexpr uint32_t kMaxTouchesInflight = 32;  // last-use updates in flight

  // Opens an instance (see tier_provider.open): connects, checks the limits, sweeps once.
  static Result<std::unique_ptr<RadosProvider>> Open(const tier_host_services* host,
                                                     std::string namespace_id,
                                                     std::span<const tier_option> options,
                                                     RadosHooks hooks = {});
  ~RadosProvider();  // Close()
  // Cancels queued work, waits (bounded by op_timeout_s and a margin) for what is in flight,
  // disconnects. Owner thread, once, never inside a completion callback.
  void Close();

  // The ABI operations (tier_provider.h has the contracts). Any thread.
  Status Info(tier_info* out);
  Status Stats(tier_stats* out);
  Status Stat(const tier_key* key, tier_stat_result* out, tier_segment_info* segments,
              uint32_t segment_capacity);
  Status Spill(const tier_key* key, const tier_segment* segments, uint32_t segment_count,
               tier_done_fn done, void* user_data);
  Status Restore(const tier_key* key, const tier_segment* segments, uint32_t segment_count,
                 tier_done_fn done, void* user_data);
  Status Remove(const tier_key* key);
  Status Enumerate(tier_enumerate_fn fn, void* user_data);
  Status PlanRestore(const tier_key* key, uint64_t predicted_prefill_ns, tier_plan* out);
  Status Probe(const tier_key* keys, uint32_t key_count, uint8_t* found);

  // One sweep pass now, as the periodic one (tests, logs). Any thread.
  Result<SweepReport> SweepNow();
  // The fleet budget's ledger (nullptr without fleet_budget_bytes).
  FleetBudget* fleet() const { return fleet_.get(); }
  // Evicts the least recently used checkpoints of the namespace (by the shared tier.used) that
  // no server is restoring, until `need_bytes` are freed or none is left; returns the bytes freed.
  uint64_t EvictLeastRecentlyUsed(uint64_t need_bytes);

  const RadosOptions& options() const { return options_; }
  const std::string& rados_namespace() const { return tag_; }

  // Internal (job.h); public only so the pipelines in spill.cc and restore.cc can name them.
  struct ChunkWindow;
  struct SpillJob;
  struct RestoreJob;

 private:
  RadosProvider(const tier_host_services* host, std::string namespace_id, RadosOptions options,
                Sealer sealer, RadosHooks hooks);
  Status Start();
  // A write op the OSDs refuse without write caps and that changes nothing with them: at open,
  // so a read-only client fails there, not at every spill.
  Status CheckWriteAccess();
  void Log(tier_log_level level, const std::string& message) const;
  uint64_t Deadline() const;  // now + op_timeout_s + 1 s (monotonic)
  static uint64_t UnixNowNs();
  uint64_t NewSpillId();

  // catalog.cc: headers, the cache, pins and the synchronous operations' helpers.
  Result<FetchedHeader> ReadHeader(const KeyBytes& key, uint64_t deadline_ns);
  // The header's tier.spill (ENOENT: NOT_FOUND). One small read.
  Result<uint64_t> ReadSpillId(const KeyBytes& key, uint64_t deadline_ns);
  // Removes h.<key> if it still holds spill `spill_id` (FULL_FORCE): OK, NOT_FOUND, or
  // ALREADY_EXISTS when another spill holds the key now.
  Status RemoveHeaderIf(const KeyBytes& key, uint64_t spill_id, uint64_t deadline_ns);
  // Queues the chunk objects of (key, spill) and its lease for removal, now or, when a restore of
  // this instance still reads them, when the last such restore ends.
  void DropChunks(const KeyBytes& key, uint64_t spill_id, uint32_t chunk_count);
  std::shared_ptr<const Header> CachedHeader(const KeyBytes& key);
  void CacheHeader(std::shared_ptr<const Header> header);
  void ForgetHeader(const KeyBytes& key, uint64_t spill_id);
  void Pin(const KeyBytes& key, uint64_t spill_id);
  void Unpin(const KeyBytes& key, uint64_t spill_id);
  Status CheckNamespace(const Header& header) const;
  uint64_t EstimateRestoreNs(uint64_t stored_bytes) const;
  void ObserveRestore(uint64_t stored_bytes, uint64_t duration_ns);
  void Touch(const KeyBytes& key, uint64_t spill_id);  // tier.used = now, best effort
  void PublishUsage();

  // Job dispatch and completion (rados_provider.cc).
  template <typename J>
  bool QueueAccepted(std::unique_ptr<J> job, void (RadosProvider::*run)(J*));
  void Complete(tier_done_fn done, void* user_data, uint64_t accepted_ns, const Status& status,
                uint64_t logical_bytes, uint64_t stored_bytes, bool spill);
  void JobFinished();

  // spill.cc and restore.cc
  void RunSpill(SpillJob* job);
  Status BeginSpill(SpillJob* job);   // the key is absent; the lease exists
  Status WriteChunks(SpillJob* job);  // every chunk written, the lease fresh enough to publish
  void SpillChunk(SpillJob* job, uint32_t seq);
  Status PublishHeader(SpillJob* job, bool* maybe_written);
  // After the publish: the lease must still exist, else a sweep may have judged the spill dead
  // and removed its chunks before the header landed; the header is then withdrawn.
  Status RecheckLeaseAfterPublish(SpillJob* job);
  void AbandonSpill(SpillJob* job, bool header_maybe_written);
  // Rewrites the lease's time, asynchronously (at most one in flight); `wait` waits for it.
  void RefreshLease(SpillJob* job, bool wait);
  void FinishSpill(SpillJob* job, const Status& status);
  void RunRestore(RestoreJob* job);
  Status RestoreChunks(RestoreJob* job);
  void RestoreChunk(RestoreJob* job, uint32_t seq);
  Status RecheckAfterSuspicion(RestoreJob* job, bool* retry);
  void FinishRestore(RestoreJob* job, const Status& status);

  // fleet_evict.cc
  Status FleetReserve(SpillJob* job);
  void FleetSettleSpill(SpillJob* job, const Status& status);
  void FleetLoop();
  void FleetReconcile();
  void FleetGiveBack(uint64_t stored_bytes);  // a checkpoint removed

  // sweep.cc
  void HousekeepingLoop();
  Result<SweepReport> Sweep(uint64_t time_budget_ns);

  const tier_host_services* host_;
  const std::string namespace_id_;
  const RadosOptions options_;
  const Sealer sealer_;
  const RadosHooks hooks_;
  const std::string tag_;  // the RADOS namespace
  std::unique_ptr<RadosMetrics> metrics_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<Aio> aio_;
  std::unique_ptr<Reaper> reaper_;
  std::unique_ptr<WorkQueue> workers_;
  std::unique_ptr<IoWindow> window_;
  std::unique_ptr<WorkQueue> runners_;

  mutable std::mutex mu_;
  uint64_t counted_bytes_ = 0;    // stored bytes of the namespace: last sweep + our own changes
  uint64_t counted_entries_ = 0;  // its checkpoints, likewise
  uint64_t reserved_bytes_ = 0;   // worst case of the spills accepted and not completed
  std::set<KeyBytes> spilling_;   // keys this instance is spilling now
  struct PinState {
    uint32_t restores = 0;
    bool doomed = false;  // removed meanwhile: drop the chunks when the last restore ends
    uint32_t chunk_count = 0;
  };
  std::map<std::pair<KeyBytes, uint64_t>, PinState> pins_;
  std::list<std::shared_ptr<const Header>> cache_;  // most recent first
  std::map<KeyBytes, std::list<std::shared_ptr<const Header>>::iterator> cache_index_;
  double restore_bytes_per_second_ = 200e6;  // EWMA of restores >= 1 MiB (guarded by mu_)
  std::mt19937_64 rng_;                      // spill ids (guarded by mu_)

  std::atomic<bool> closing_{false};
  bool closed_ = false;
  std::atomic<uint64_t> inflight_ops_{0};  // accepted, completion not yet started
  std::atomic<uint32_t> touches_inflight_{0};
  std::mutex jobs_mu_;
  std::condition_variable jobs_cv_;
  uint64_t running_jobs_ = 0;  // accepted, completion not yet returned (guarded by jobs_mu_)

  std::mutex housekeeping_mu_;
  std::condition_variable housekeeping_cv_;
  bool stop_housekeeping_ = false;
  std::thread housekeeping_;
  std::mutex sweep_mu_;  // one sweep at a time

  std::unique_ptr<FleetBudget> fleet_;
  std::thread fleet_thread_;
  std::mutex evict_mu_;  // one eviction pass at a time in this instance
};

// The key of a tier_key.
KeyBytes ToKey(const tier_key* key);

}  // namespace tier::rados
