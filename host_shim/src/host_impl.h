// host_impl.h -- the inside of tier::Host (host.h): the catalog and the operations that move
// checkpoints between the server's pool, pinned Host memory and the cold tier.
//
// Every method runs on the scheduler thread. Operations are explicit state machines; each step
// either finishes at once or waits for a completion that Poll() delivers (a provider answer through
// the EventQueue, a copy job the engine finished, a deadline). Nothing waits inside a step.
//
// Invariants (checked with TIER_CHECK where they can break):
//  - an entry with pins > 0 or ops > 0 is never dropped, demoted or spilled, and a pinned
//    entry's Device pages are never released (a demotion that completes under a pin keeps them);
//  - every Host copy a provider operation borrows stays alive until the operation settles (the
//    operation holds a shared_ptr to it);
//  - the page ledger holds exactly the pages of the Device placements and of seals in progress;
//  - the catalog's per-tier byte totals equal the sums over its entries.
#pragma once

#include <tier/host/cost_model.h>
#include <tier/host/host.h>
#include <tier/host/host_services.h>
#include <tier/host/metrics_registry.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "catalog.h"
#include "cold_tier.h"
#include "device_tier.h"
#include "event_queue.h"
#include "host_memory.h"
#include "kv_events.h"
#include "policy.h"
#include "server_metrics.h"
#include "tenant_metrics.h"

namespace tier {

class Host::Impl {
 public:
  static Result<std::unique_ptr<Impl>> Open(HostOptions options);
  ~Impl();

  Admission Admit(const AdmitRequest& request);
  bool Cancel(uint64_t admission_id);
  void Release(uint64_t admission_id);
  Sealed Seal(const SealRequest& request);
  uint64_t Prefetch(std::span<const uint64_t> blocks, uint64_t now_ns);
  bool Evict(const tier_key& key);
  void ReportVerification(uint64_t admission_id, bool exact);
  void Poll(std::vector<Event>* events);
  bool WaitForWork(uint64_t timeout_ns);
  bool Busy() const;
  HostStats Stats() const;
  Status StartKvEvents();  // Open: the publisher, when options_.kv_events.addr is set
  std::optional<CheckpointInfo> Describe(std::span<const uint64_t> blocks) const;

  // Aborts (TIER_CHECK) when `method` is called off the thread that opened the Host, or from
  // inside the server's PageAllocator.
  void CheckCaller(const char* method) const;
  const HostOptions& options() const { return options_; }
  TenantMetrics* tenant_metrics() { return tenant_metrics_.get(); }  // null: no tenant series
  int event_fd() const { return queue_->fd(); }
  std::string provider_name() const { return provider_name_; }
  std::string provider_io_path() const { return io_path_; }
  const char* device_path() const { return device_->engine().path_name(); }
  device::TransferEngine& engine() { return device_->engine(); }

 private:
  explicit Impl(HostOptions options);

  // ---- admissions and prefetches (admission.cc, cold_fetch.cc) ----------------------------------
  enum class Stage {
    kLookup,     // pick the next candidate
    kProbe,      // asking a shared tier which longer prefixes it holds
    kStat,       // learning a probed checkpoint's segments
    kWaitEntry,  // the candidate is being restored by another operation
    kWaitSlot,   // too many cold restores in flight
    kPlan,       // the provider's plan_restore
    kWaitRoom,   // no host memory to stage the restore yet
    kRestore,    // the provider's restore
    kCopy,       // Host -> pool copies queued on the engine
    kDone,
  };
  struct AdmissionOp {
    uint64_t id = 0;
    bool prefetch = false;  // stops once the bytes are in Host; no pages, no lane
    std::vector<uint64_t> blocks;
    std::vector<uint64_t> hashes;
    uint64_t now_ns = 0;
    PageAllocator allocate_pages;
    std::vector<StateBuffer> state;
    device::NativeStream order_after = nullptr;  // AdmitRequest::order_after
    size_t max_blocks = 0;                       // the next candidate is at most this long
    bool probed = false;
    Stage stage = Stage::kLookup;
    CheckpointEntry* entry = nullptr;  // the candidate, pinned while set
    uint64_t planned_generation = 0;
    bool holds_slot = false;
    std::shared_ptr<HostCopy> staging;  // the cold restore's target
    CopyJob copy;
    std::vector<uint32_t> pages;
    bool skipped = false;
    RootReason first_reason = RootReason::kNoCheckpoint;
    uint64_t started_wall_ns = 0;
    uint64_t wait_deadline_ns = 0;  // wall clock, for kWaitEntry/kWaitSlot/kWaitRoom
    // Wall clock past which this admission stops waiting for its cold candidate (plan, slot,
    // room, restore): the prefill the restore would replace, within provider_timeout_ns. 0 = not
    // set yet; prefetches wait provider_timeout_ns (no request waits on them).
    uint64_t restore_deadline_ns = 0;
    uint64_t cold_restore_ns = 0;
    uint64_t stored_bytes = 0;
    bool cancelled = false;          // Cancel(): no event but kAdmissionCancelled
    bool awaiting_provider = false;  // a provider call of this op has not answered yet
    bool returned = false;           // Admit/Prefetch returned it pending: events tell the rest
    bool cancel_emitted = false;     // kAdmissionCancelled went out already
    int tries = 0;                   // candidates tried (bounded by kMaxCandidates)
    Admission result;
  };
  using OpMap = std::map<uint64_t, std::unique_ptr<AdmissionOp>>;

  AdmissionOp* NewOp(bool prefetch);
  // Runs the op from its current stage as far as it goes without waiting.
  void Advance(AdmissionOp* op);
  void Lookup(AdmissionOp* op);
  void TryCandidate(AdmissionOp* op);
  void UseDeviceCopy(AdmissionOp* op);
  void UseHostCopy(AdmissionOp* op);
  void StartProbe(AdmissionOp* op, size_t from_blocks);
  void OnProbed(uint64_t id, Answer<std::vector<uint8_t>> answer, std::vector<size_t> lengths);
  void OnStat(uint64_t id, size_t length, Answer<StatResult> answer);
  void StartPlan(AdmissionOp* op);
  void OnPlan(uint64_t id, Answer<tier_plan> answer);
  bool TakeSlot(AdmissionOp* op);
  void StartRestore(AdmissionOp* op);
  void OnRestored(uint64_t id, std::shared_ptr<HostCopy> buffers, Answer<Completion> answer);
  // The restored bytes are in op->staging: check a remote manifest, place them in Host.
  bool LandInHost(AdmissionOp* op);
  void CheckCopy(AdmissionOp* op);
  // INVALID_ARGUMENT naming what is wrong with what allocate_pages handed over: short or long,
  // a page outside the pool, a page twice.
  Status CheckAllocated(uint32_t wanted, std::span<const uint32_t> pages) const;
  // Adds `pages` to the admission's unused_pages, each id once.
  void GiveBack(AdmissionOp* op, std::span<const uint32_t> pages);
  // This candidate cannot be used: note why, release it, and go on with a shorter one (or stop).
  void Skip(AdmissionOp* op, RootReason reason, bool try_shorter);
  void Ready(AdmissionOp* op);
  void Root(AdmissionOp* op);
  void Finish(AdmissionOp* op, Event::Kind kind);
  // A provider answer for `id`: the op, or nullptr after cleaning up a cancelled one.
  AdmissionOp* Answered(uint64_t id);
  void ForgetCold(CheckpointEntry* entry, bool remove_from_provider);
  void ReleaseSlot(AdmissionOp* op);
  // How long an admission may wait for a cold restore of `entry`: its predicted root prefill (a
  // restore is only worth it while it beats the prefill it replaces), at least kMinRestoreWaitNs,
  // at most provider_timeout_ns.
  uint64_t RestoreWaitNs(const CheckpointEntry& entry) const;
  // The wait's deadline for a stage of `op` that starts now (wall clock).
  uint64_t WaitDeadline(const AdmissionOp& op) const;
  // A provider call of a cold restore passed its deadline: cold restores back off (doubling,
  // 5 s to 60 s) so that the next requests prefill at once instead of waiting again.
  void RestoreTimedOut(const CheckpointEntry& entry);
  void Unpin(CheckpointEntry* entry);
  void RetryWaiting();

  // ---- sealing (seal.cc) ------------------------------------------------------------------------
  Status CheckSeal(const SealRequest& request) const;
  std::unique_ptr<CheckpointEntry> NewEntry(const SealRequest& request, const tier_key& key,
                                            std::vector<StateBuffer>* state);
  // Each places the checkpoint or says why not in `why` (the figures and the option to change).
  bool SealOnDevice(CheckpointEntry* entry, const SealRequest& request,
                    std::span<const StateBuffer> state, Sealed* sealed, std::string* why);
  bool SealOnHost(CheckpointEntry* entry, const SealRequest& request,
                  std::span<const StateBuffer> state, Sealed* sealed, std::string* why);
  void WriteManifests(const CheckpointEntry& entry, HostCopy* copy) const;
  // HostMemory::NewHostCopy; when the arena is full, first drops idle Host copies that Cold or
  // Device back, least valuable first (a seal, a demotion or a restore would otherwise be refused,
  // dropped or wait while the logical Host budget has room).
  Result<std::shared_ptr<HostCopy>> HostCopyMakingRoom(const CheckpointEntry& entry);
  struct SealOp {
    uint64_t id = 0;
    tier_key key{};
    CopyJob copy;
    std::vector<uint32_t> held_pages;  // released when the copy is done (Host seals)
    std::shared_ptr<HostCopy> host_copy;
    std::shared_ptr<HostCopy> verify_copy;  // verify_held_pages: the pages as sealed
  };
  void CheckSeals();

  // ---- verify_held_pages (held_pages.cc) ------------------------------------------------------
  // One checksum per page over every layer and plane of a gathered copy of `pages` pages.
  std::vector<uint64_t> PageSums(const HostCopy& copy, uint32_t pages) const;
  // Compares a gathered copy with the sums taken at the seal; on a difference logs an error naming
  // the page, counts it and dooms the entry. True when intact (or nothing to compare).
  bool HeldPagesIntact(CheckpointEntry* entry, const HostCopy& copy, const char* when);
  // A Device hit reads the pages: gathered and checked once the gather is done (Poll).
  void StartHitCheck(CheckpointEntry* entry);
  void CheckHitReads();
  struct HitCheck {
    tier_key key{};
    std::shared_ptr<HostCopy> copy;
    CopyJob job;
  };
  std::vector<HitCheck> hit_checks_;  // each pins its entry

  // ---- pressure (pressure.cc) -------------------------------------------------------------------
  // Starts whatever brings each tier back under its budget; never waits. Called after every
  // change and from Poll().
  void Rebalance();
  void RebalanceDevice();
  void RebalanceHost();
  // Removes this server's cold checkpoints worth less than `below_value` until `stored_bytes`
  // more fit next to the stored and reserved bytes; true when they fit now.
  bool MakeRoomOnCold(uint64_t stored_bytes, double below_value);
  void StartDemotion(CheckpointEntry* entry);
  struct Demotion {
    tier_key key{};
    std::shared_ptr<HostCopy> host_copy;
    CopyJob copy;
  };
  void CheckDemotions();
  // A cold restore of `wanted` found the Host arena full (HostCopyMakingRoom failed). True when
  // memory may free without waiting for the deadline: a spill, seal, demotion or restore is under
  // way (the waiter retries once it settles), or this starts a spill of the least valuable idle
  // Host copy that only Host holds (released when it completes). False when nothing will.
  bool FreeHostMemoryFor(const CheckpointEntry& wanted);
  void StartSpill(CheckpointEntry* entry);
  void OnSpilled(tier_key key, uint64_t need, Answer<Completion> answer);
  void SpillFailed(CheckpointEntry* entry, const Status& status, bool timed_out);
  // Victims in `placement` that pressure may move, least valuable first.
  std::vector<tier_key> VictimsIn(Placement placement, double below_value = -1) const;
  struct Victim {
    bool prefetched;  // fetched for a request about to come: last to go
    double value;
    const CheckpointEntry* entry;
  };
  // HostOptions::tenant_share: the victims of tenants over their share of `placement` first.
  void TenantsOverShareFirst(Placement placement, std::vector<Victim>* victims) const;
  uint64_t BytesIn(const CheckpointEntry& entry, Placement placement) const;  // what it holds there
  uint64_t BudgetOf(Placement placement) const;                               // the tier's budget
  // The policy's value of `entry` in `placement` (net of bringing it back from there).
  double ValueIn(const CheckpointEntry& entry, Placement placement) const;
  // Bringing `entry` back to a lane from `placement`: 0 from Device, the Host->Device transfer
  // from Host, the cold read (ColdReadNs) plus the transfer from Cold. Cost model, logical.
  uint64_t RestoreNsFrom(const CheckpointEntry& entry, Placement placement) const;
  // The cold read of `entry`'s logical bytes at model_cold_read_bytes_per_second, or else at
  // the rate observed on completed restores.
  uint64_t ColdReadNs(const CheckpointEntry& entry) const;
  // Why cold admission refuses to write `entry`, or kAdmitted when it may be spilled
  // (ValueLevers::cold_admission, kValue only).
  enum class ColdAdmission { kAdmitted, kSuperseded, kNotWorthRestore };
  ColdAdmission ColdAdmissionFor(const CheckpointEntry& entry) const;
  uint64_t KvLogicalBytes(const CheckpointEntry& entry) const;
  // Placement removal with everything it implies (pages back to the server, prefetch waste).
  void DropDevice(CheckpointEntry* entry, const char* to);
  void DropHost(CheckpointEntry* entry, const char* to);
  void DropCold(CheckpointEntry* entry, IoPhase phase);
  // Removes the entry from every tier and the catalog (it must be idle).
  void Drop(CheckpointEntry* entry, const char* from, IoPhase phase);
  void DropIfDoomed(CheckpointEntry* entry);
  uint64_t ColdBytesNeeded(const CheckpointEntry& entry) const;
  void UpdateGauges();

  // ---- close (close_flush.cc) ------------------------------------------------------------------
  // Close() writes the Host copies no cold copy backs to a persistent cold tier, most valuable
  // first, a few at a time, while close_timeout_ns lasts (HostOptions::flush_host_at_close).
  struct CloseFlush {
    std::vector<tier_key> order;    // most valuable first
    size_t next = 0;                // order[next..] not started yet
    std::vector<tier_key> started;  // the spills the flush started
    uint64_t no_room = 0;
    uint64_t failures_before = 0;  // stats_.spill_failures at the start
    uint64_t started_ns = 0;
  };
  bool FlushesAtClose() const;
  std::vector<tier_key> CloseFlushOrder() const;
  void StartCloseFlush();
  void ContinueCloseFlush();   // starts spills while fewer than a few are in flight
  bool CloseFlushing() const;  // some are not started yet
  void FinishCloseFlush();     // counts and logs what was written, failed and left
  CloseFlush close_flush_;

  // ---- start-up (startup.cc) --------------------------------------------------------------------
  Status OpenProvider();
  Status Readopt();
  // An entry for a checkpoint the cold tier holds (re-adopted, or found by probe), its segments
  // put in the canonical order; INVALID_ARGUMENT when they do not fit this pool's layout.
  Result<std::unique_ptr<CheckpointEntry>> EntryFromStored(
      const tier_key& key, std::vector<uint64_t> blocks, std::span<const tier_segment_info> stored,
      uint64_t stored_bytes) const;

  // ---- shared ----------------------------------------------------------------------------------
  void Emit(Event event) { out_.push_back(std::move(event)); }
  void ReleasePages(std::span<const uint32_t> pages);
  uint64_t Now() const;  // monotonic wall clock
  uint64_t LogicalOf(uint64_t physical) const { return physical * options_.bytes_scale; }
  // A checkpoint's logical bytes: its KV and state segments stand for bytes_scale times their
  // size; the manifests are real data, counted as they are.
  uint64_t LogicalOf(const std::vector<SegmentSpec>& segments) const;
  uint64_t clock_ns_ = 0;  // the latest server clock seen (recency for background pressure)
  // Logical bytes per second completed cold restores read (a running average; 2 GB/s before
  // the first).
  double observed_cold_read_bytes_per_second_ = 2e9;

  HostOptions options_;
  CostModel cost_;
  std::unique_ptr<MetricsRegistry> own_metrics_;
  MetricsRegistry* metrics_ = nullptr;
  std::unique_ptr<HostServices> services_;
  std::unique_ptr<ServerMetrics> server_metrics_;
  std::unique_ptr<TenantMetrics> tenant_metrics_;  // null unless options_.metrics_tenants
  std::unique_ptr<EventQueue> queue_;
  std::unique_ptr<ColdTier> cold_;  // null without a cold tier
  std::string provider_name_, io_path_;
  tier_info provider_info_{};
  uint64_t cold_capacity_bytes_ = 0;  // stored bytes the provider accepts (0 = no cold tier)
  bool shared_tier_ = false;          // TIER_CAP_SHARED with a probe slot
  std::unique_ptr<DeviceTier> device_;
  std::unique_ptr<HostMemory> memory_;           // the pinned arena and its releaser
  std::unique_ptr<KvEventPublisher> kv_events_;  // null unless kv_events.addr (outlives catalog_)
  Catalog catalog_;
  PolicyOrder policy_;
  HostStats stats_;

  OpMap ops_;                          // pending admissions and prefetches
  std::map<uint64_t, tier_key> used_;  // ready admissions not yet released -> their checkpoint
  std::deque<uint64_t> waiting_;       // ops in kWaitEntry/kWaitSlot/kWaitRoom, oldest first
  uint32_t restores_in_flight_ = 0;
  uint64_t restore_backoff_until_ns_ = 0;  // wall clock: no new cold restore before
  uint64_t restore_backoff_ns_ = 0;        // the current back-off (0 after a restore completed)
  uint32_t max_restores_ = 1;
  std::vector<SealOp> seals_;
  std::vector<CopyJob> lane_copies_;  // device hits' state copies still running
  // Device copies dropped while lane copies ran (they may read its state buffers): freed once
  // lane_copies_ is empty.
  std::vector<std::unique_ptr<DeviceCopy>> retired_device_copies_;
  std::vector<Demotion> demotions_;
  uint64_t demoting_bytes_ = 0;        // logical bytes of Device copies on their way to Host
  uint64_t releasing_bytes_ = 0;       // logical bytes of Host copies being spilled under pressure
  uint64_t spill_reserved_bytes_ = 0;  // stored bytes in-flight spills may take in Cold
  uint32_t spills_in_flight_ = 0;
  uint64_t spill_backoff_until_ns_ = 0;  // wall clock: no new spill before
  uint64_t spill_backoff_ns_ = 0;
  uint64_t spill_failures_unlogged_ = 0;  // repeated failures summarized, not logged one by one
  uint64_t spill_failures_logged_at_ns_ = 0;
  uint64_t next_id_ = 1;
  std::vector<Event> out_;  // events produced since the last Poll()
  Admission finished_;      // the result of an op that finished inside Admit/Prefetch
  bool closing_ = false;
  const std::thread::id owner_thread_ = std::this_thread::get_id();  // the one that opened
  bool in_allocator_ = false;  // AdmitRequest::allocate_pages is running
};

}  // namespace tier
