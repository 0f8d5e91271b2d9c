// admission.cc -- Admit, Prefetch, Cancel, Release and ReportVerification: finding the longest
// exact-prefix checkpoint and bringing it to the request without waiting.
//
//   Device:  state copied into the lane on the engine's stream, pages shared   -> ready at once
//   Host:    pages from the server, scatter + state copies queued               -> pending, kCopy
//   Cold:    plan_restore -> a restore slot -> host memory -> restore -> Host -> as Host
//   Shared:  probe the tier for longer prefixes -> stat -> a Cold entry         -> as Cold
// A candidate that cannot be used (cost, miss, no pages, an error) gives way to a shorter one;
// a timeout or a stale plan goes to the root at once.
#include <tier/host/identity.h>
#include <tier/host/log.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "host_impl.h"
#include "manifest.h"

namespace tier {
namespace {

constexpr int kMaxCandidates = 8;
constexpr uint64_t kSecondNs = 1000ull * 1000 * 1000;
// Below this a restore is waited for whatever its prefill: provider latency and scheduling
// jitter, not the restore's worth, decide there.
constexpr uint64_t kMinRestoreWaitNs = kSecondNs;
constexpr uint64_t kFirstRestoreBackoffNs = 5 * kSecondNs;
constexpr uint64_t kMaxRestoreBackoffNs = 60 * kSecondNs;

RootReason ReasonOfPlan(tier_reason reason) {
  switch (reason) {
    case TIER_REASON_MISS:
      return RootReason::kMiss;
    case TIER_REASON_COST:
      return RootReason::kCost;
    case TIER_REASON_CORRUPT:
      return RootReason::kCorrupt;
    default:
      return RootReason::kBusy;
  }
}

RootReason ReasonOfRestore(tier_status code) {
  switch (code) {
    case TIER_DATA_LOSS:
      return RootReason::kCorrupt;
    case TIER_NOT_FOUND:
      return RootReason::kMiss;
    case TIER_BUSY:
      return RootReason::kBusy;
    default:
      return RootReason::kRestoreFailed;
  }
}

}  // namespace

Host::Impl::AdmissionOp* Host::Impl::NewOp(bool prefetch) {
  auto op = std::make_unique<AdmissionOp>();
  op->id = next_id_++;
  op->prefetch = prefetch;
  op->started_wall_ns = Now();
  op->result.id = op->id;
  AdmissionOp* raw = op.get();
  ops_.emplace(raw->id, std::move(op));
  return raw;
}

Admission Host::Impl::Admit(const AdmitRequest& request) {
  clock_ns_ = std::max(clock_ns_, request.now_ns);
  AdmissionOp* op = NewOp(false);
  op->blocks.assign(request.blocks.begin(), request.blocks.end());
  op->hashes = PrefixHashes(op->blocks);
  op->now_ns = request.now_ns;
  op->allocate_pages = request.allocate_pages;
  op->state = request.state;
  op->order_after = request.order_after;
  op->max_blocks = op->blocks.size();
  const uint64_t id = op->id;
  if (!op->allocate_pages) {
    Log(TIER_LOG_ERROR, "host: Admit without allocate_pages; prefilling from the root");
    op->max_blocks = 0;
  }
  Advance(op);
  auto it = ops_.find(id);
  if (it == ops_.end()) {
    // Finished inside Admit: the result is the answer, no event follows.
    Admission done = std::move(finished_);
    finished_ = Admission();
    return done;
  }
  it->second->returned = true;
  Admission pending = it->second->result;
  pending.state = AdmissionState::kPending;
  return pending;
}

uint64_t Host::Impl::Prefetch(std::span<const uint64_t> blocks, uint64_t now_ns) {
  clock_ns_ = std::max(clock_ns_, now_ns);
  if (cold_ == nullptr) return 0;
  AdmissionOp* op = NewOp(true);
  op->blocks.assign(blocks.begin(), blocks.end());
  op->hashes = PrefixHashes(op->blocks);
  op->now_ns = now_ns;
  op->max_blocks = op->blocks.size();
  const uint64_t id = op->id;
  Advance(op);
  auto it = ops_.find(id);
  if (it == ops_.end()) {
    finished_ = Admission();
    return 0;  // nothing to fetch
  }
  it->second->returned = true;
  return id;
}

void Host::Impl::Advance(AdmissionOp* op) {
  if (op->stage == Stage::kLookup) Lookup(op);
}

void Host::Impl::Lookup(AdmissionOp* op) {
  if (op->cancelled || closing_) {
    Finish(op, Event::kAdmissionCancelled);
    return;
  }
  CheckpointEntry* best =
      op->max_blocks == 0 ? nullptr : catalog_.LongestMatch(op->blocks, op->hashes, op->max_blocks);
  const size_t best_blocks = best != nullptr ? best->blocks.size() : 0;
  if (shared_tier_ && !op->probed && best_blocks < op->max_blocks) {
    StartProbe(op, best_blocks);
    return;
  }
  if (best == nullptr || op->tries >= kMaxCandidates) {
    Root(op);
    return;
  }
  ++op->tries;
  op->max_blocks = best->blocks.size() - 1;
  op->entry = best;
  ++best->pins;
  TryCandidate(op);
}

void Host::Impl::TryCandidate(AdmissionOp* op) {
  CheckpointEntry* e = op->entry;
  if (op->prefetch && (e->in(kDevice) || e->in(kHost))) {
    Unpin(e);
    op->entry = nullptr;
    Finish(op, Event::kPrefetchDone);  // already warm: nothing to fetch
    return;
  }
  if (e->in(kDevice) && !e->sealing) {
    UseDeviceCopy(op);
  } else if (e->in(kHost)) {
    UseHostCopy(op);
  } else if (e->restoring) {
    op->stage = Stage::kWaitEntry;  // another admission or a prefetch is bringing it in
    op->result.outcome = Outcome::kColdRestore;
    if (!op->prefetch && op->restore_deadline_ns == 0) {
      op->restore_deadline_ns = Now() + RestoreWaitNs(*e);
    }
    op->wait_deadline_ns = WaitDeadline(*op);
    waiting_.push_back(op->id);
  } else if (e->in(kCold) && cold_ != nullptr) {
    StartPlan(op);
  } else {
    Skip(op, RootReason::kMiss, true);
  }
}

void Host::Impl::UseDeviceCopy(AdmissionOp* op) {
  CheckpointEntry* e = op->entry;
  const Status ordered = device_->OrderAfter(op->order_after);
  auto copied = ordered.ok() ? device_->StateToLane(*e->device_copy, *e, op->state)
                             : Result<CopyJob>(ordered);
  if (!copied.ok()) {
    Log(TIER_LOG_WARN,
        "host: device hit on " + KeyHex(e->key) + " unusable: " + copied.status().ToString());
    Skip(op, RootReason::kRestoreFailed, true);
    return;
  }
  op->result.outcome = Outcome::kDeviceHit;
  op->result.pages = e->device_copy->pages;
  op->result.pages_shared = true;
  op->result.state_copy = copied.value().Last();
  // The copies run on the engine's stream; their handles stay here (dropping the last one would
  // wait for them on the scheduler thread). Poll() lets go of them once they are done.
  lane_copies_.push_back(std::move(copied).value());
  StartHitCheck(e);  // verify_held_pages: the pages the request reads are what was sealed
  Ready(op);
}

void Host::Impl::UseHostCopy(AdmissionOp* op) {
  CheckpointEntry* e = op->entry;
  if (op->prefetch) {
    Finish(op, Event::kPrefetchDone);
    return;
  }
  std::vector<uint32_t> pages;
  in_allocator_ = true;
  const bool allocated = op->allocate_pages(e->page_count, &pages);
  in_allocator_ = false;
  if (!allocated) {
    GiveBack(op, pages);
    Skip(op, RootReason::kNoRoom, true);  // a shorter checkpoint needs fewer pages
    return;
  }
  if (Status wrong = CheckAllocated(e->page_count, pages); !wrong.ok()) {
    // The server's allocator broke its contract: not a lack of room, a bug to name.
    Log(TIER_LOG_ERROR, "host: restore of " + KeyHex(e->key) + ": " + wrong.message() +
                            "; the pages go back unused (unused_pages) and the request "
                            "prefills from the root");
    GiveBack(op, pages);
    Skip(op, RootReason::kRestoreFailed, false);
    return;
  }
  op->staging = e->host_copy;  // kept alive while the copies read it
  const Status ordered = device_->OrderAfter(op->order_after);
  auto copied = ordered.ok() ? device_->FromHost(*op->staging, *e, pages, op->state)
                             : Result<CopyJob>(ordered);
  if (!copied.ok()) {
    Log(TIER_LOG_WARN, "host: host-to-device copy of " + KeyHex(e->key) +
                           " failed: " + copied.status().ToString());
    op->result.unused_pages.insert(op->result.unused_pages.end(), pages.begin(), pages.end());
    Skip(op, RootReason::kRestoreFailed, true);
    return;
  }
  if (op->result.outcome != Outcome::kColdRestore) op->result.outcome = Outcome::kHostRestore;
  if (e->prefetched) {
    op->result.prefetched = true;
    op->result.prefetch_hidden_ns = e->prefetch_restore_ns;
    op->result.cold_restore_model_ns = e->prefetch_restore_model_ns;
    e->prefetched = false;
    ++stats_.prefetches_used;
    stats_.prefetch_hidden_ns += e->prefetch_restore_ns;
    server_metrics_->Prefetch("used");
    server_metrics_->PrefetchHiddenSeconds(static_cast<double>(e->prefetch_restore_ns) / 1e9);
  }
  op->result.transfer_model_ns = cost_.HostToDeviceNs(e->logical_bytes, e->segments.size());
  op->result.logical_bytes = e->logical_bytes;
  op->pages = std::move(pages);
  op->copy = std::move(copied).value();
  op->stage = Stage::kCopy;
  CheckCopy(op);
}

Status Host::Impl::CheckAllocated(uint32_t wanted, std::span<const uint32_t> pages) const {
  if (pages.size() != wanted) {
    return Status::InvalidArgument("AdmitRequest::allocate_pages returned true with " +
                                   std::to_string(pages.size()) + " page(s) for " +
                                   std::to_string(wanted) + " asked");
  }
  return device_->CheckPages(pages, true).Annotate("AdmitRequest::allocate_pages returned");
}

void Host::Impl::GiveBack(AdmissionOp* op, std::span<const uint32_t> pages) {
  // Each id the allocator handed over goes back once, even one it handed over twice.
  std::vector<uint32_t>& unused = op->result.unused_pages;
  for (uint32_t p : pages) {
    if (std::find(unused.begin(), unused.end(), p) == unused.end()) unused.push_back(p);
  }
}

void Host::Impl::CheckCopy(AdmissionOp* op) {
  if (!op->copy.Done()) return;
  const Status copied = op->copy.Wait();
  op->copy = CopyJob();
  // Reported wrong (ReportVerification) or found changed (verify_held_pages) while the copy ran:
  // never served, whatever the copy did.
  const bool doomed = op->entry != nullptr && op->entry->doomed;
  if (op->cancelled || !copied.ok() || doomed) {
    if (!copied.ok()) Log(TIER_LOG_WARN, "host: copy into the pool failed: " + copied.ToString());
    op->result.unused_pages.insert(op->result.unused_pages.end(), op->pages.begin(),
                                   op->pages.end());
    op->pages.clear();
    // cancelled: ends as kAdmissionCancelled
    Skip(op, doomed && copied.ok() ? RootReason::kCorrupt : RootReason::kRestoreFailed, false);
    return;
  }
  op->result.pages = op->pages;
  Ready(op);
}

uint64_t Host::Impl::RestoreWaitNs(const CheckpointEntry& entry) const {
  return std::min(options_.provider_timeout_ns,
                  std::max(entry.prefill_saved_ns, kMinRestoreWaitNs));
}

uint64_t Host::Impl::WaitDeadline(const AdmissionOp& op) const {
  const uint64_t deadline = Now() + options_.provider_timeout_ns;
  return op.restore_deadline_ns == 0 ? deadline : std::min(deadline, op.restore_deadline_ns);
}

void Host::Impl::RestoreTimedOut(const CheckpointEntry& entry) {
  restore_backoff_ns_ = restore_backoff_ns_ == 0
                            ? kFirstRestoreBackoffNs
                            : std::min(kMaxRestoreBackoffNs, restore_backoff_ns_ * 2);
  restore_backoff_until_ns_ = Now() + restore_backoff_ns_;
  Log(TIER_LOG_WARN, "host: cold restore of " + KeyHex(entry.key) +
                         " passed its deadline; cold restores back off " +
                         std::to_string(restore_backoff_ns_ / kSecondNs) +
                         " s (requests prefill from the root meanwhile)");
}

void Host::Impl::StartPlan(AdmissionOp* op) {
  CheckpointEntry* e = op->entry;
  const uint64_t now = Now();
  if (now < restore_backoff_until_ns_) {
    ++stats_.restores_skipped_backing_off;
    Skip(op, RootReason::kBusy, true);  // a shorter candidate may be on Device or in Host
    return;
  }
  if (!op->prefetch && op->restore_deadline_ns == 0) {
    op->restore_deadline_ns = now + RestoreWaitNs(*e);
  }
  const uint64_t deadline = WaitDeadline(*op);
  if (deadline <= now) {
    Skip(op, RootReason::kTimeout, false);  // it waited what the restore was worth already
    return;
  }
  // Providers compare against stored (scaled) bytes: scale the prediction the same way.
  uint64_t predicted_ns = cost_.RootPrefillNs(e->tokens) / options_.bytes_scale;
  if (options_.model_cold_read_bytes_per_second > 0) {
    // The model decides restore-or-root (deterministic); the provider only says whether it can.
    if (RestoreNsFrom(*e, kCold) >= e->prefill_saved_ns) {
      Skip(op, RootReason::kCost, true);
      return;
    }
    predicted_ns = UINT64_MAX;
  }
  op->result.outcome = Outcome::kColdRestore;  // while pending: the tier it comes from
  op->planned_generation = e->generation;
  op->stage = Stage::kPlan;
  op->awaiting_provider = true;
  const uint64_t id = op->id;
  cold_->PlanRestore(
      e->key, predicted_ns, op->prefetch ? IoPhase::kPrefetch : IoPhase::kAdmission,
      [this, id](Answer<tier_plan> answer) { OnPlan(id, std::move(answer)); }, deadline - now);
}

Host::Impl::AdmissionOp* Host::Impl::Answered(uint64_t id) {
  auto it = ops_.find(id);
  TIER_CHECK_MSG(it != ops_.end(), "provider answer for unknown admission %llu",
                 static_cast<unsigned long long>(id));
  AdmissionOp* op = it->second.get();
  TIER_CHECK(op->awaiting_provider);
  op->awaiting_provider = false;
  return op;
}

void Host::Impl::OnPlan(uint64_t id, Answer<tier_plan> answer) {
  AdmissionOp* op = Answered(id);
  if (op->cancelled) {
    Skip(op, RootReason::kNoCheckpoint, false);
    return;
  }
  if (answer.timed_out) {
    RestoreTimedOut(*op->entry);
    Skip(op, RootReason::kTimeout, false);
    return;
  }
  if (!answer.result.ok()) {
    Log(TIER_LOG_WARN, "host: plan_restore failed: " + answer.result.status().ToString());
    Skip(op, RootReason::kBusy, true);
    return;
  }
  const tier_plan& plan = answer.result.value();
  if (plan.decision != TIER_DECISION_RESTORE) {
    const RootReason reason = ReasonOfPlan(plan.reason);
    if (reason == RootReason::kMiss || reason == RootReason::kCorrupt) {
      ForgetCold(op->entry, false);
    }
    Skip(op, reason, true);
    return;
  }
  op->stored_bytes = plan.stored_bytes;
  if (!TakeSlot(op)) {
    op->stage = Stage::kWaitSlot;
    op->wait_deadline_ns = WaitDeadline(*op);
    waiting_.push_back(op->id);
    return;
  }
  StartRestore(op);
}

bool Host::Impl::TakeSlot(AdmissionOp* op) {
  if (op->holds_slot) return true;
  if (restores_in_flight_ >= max_restores_) return false;
  ++restores_in_flight_;
  op->holds_slot = true;
  return true;
}

void Host::Impl::ReleaseSlot(AdmissionOp* op) {
  if (!op->holds_slot) return;
  TIER_CHECK(restores_in_flight_ > 0);
  --restores_in_flight_;
  op->holds_slot = false;
}

void Host::Impl::StartRestore(AdmissionOp* op) {
  CheckpointEntry* e = op->entry;
  // A plan is only good for the catalog it was made against. If meanwhile another operation
  // brought the checkpoint into Host, use that; if it is leaving or lost its cold copy, the plan
  // is stale: prefill from the root.
  if (e->generation != op->planned_generation || !e->in(kCold) || e->doomed) {
    ReleaseSlot(op);
    if (!e->doomed && (e->in(kHost) || e->in(kDevice))) {
      op->result.outcome = Outcome::kRootPrefill;  // another operation brought it up
      TryCandidate(op);
      return;
    }
    Log(TIER_LOG_DEBUG, "host: stale plan for " + KeyHex(e->key) + ", prefilling from the root");
    Skip(op, RootReason::kStalePlan, false);
    return;
  }
  auto buffers = HostCopyMakingRoom(*e);
  if (!buffers.ok() && !FreeHostMemoryFor(*e)) {
    // Nothing under way will change what the arena holds, and no Host copy can be spilled to make
    // room: waiting would last until the deadline. Prefill instead.
    Log(TIER_LOG_DEBUG, "host: no host memory will free for the restore of " + KeyHex(e->key) +
                            ": " + buffers.status().ToString());
    Skip(op, RootReason::kNoRoom, true);
    return;
  }
  if (!buffers.ok()) {
    if (op->stage != Stage::kWaitRoom) {
      op->stage = Stage::kWaitRoom;  // pressure frees host memory; Poll retries
      op->wait_deadline_ns = WaitDeadline(*op);
    }
    waiting_.push_back(op->id);  // RetryWaiting took it off the list to retry it
    return;
  }
  std::shared_ptr<HostCopy> staging = std::move(buffers).value();
  std::vector<tier_segment> segments;
  for (size_t i = 0; i < e->segments.size(); ++i) {
    const SegmentSpec& s = e->segments[i];
    segments.push_back({s.kind, s.index, s.physical_bytes, staging->segment(i).data()});
  }
  e->restoring = true;
  ++e->ops;
  op->stage = Stage::kRestore;
  op->awaiting_provider = true;
  if (op->prefetch) {
    ++stats_.prefetches;
    server_metrics_->Prefetch("issued");
  }
  const uint64_t id = op->id;
  const uint64_t now = Now();
  const uint64_t deadline = WaitDeadline(*op);
  cold_->Restore(
      e->key, std::move(segments), op->prefetch ? IoPhase::kPrefetch : IoPhase::kAdmission,
      [this, id, staging](Answer<Completion> answer) {
        OnRestored(id, staging, std::move(answer));
      },
      [staging] {},  // the buffers outlive a late completion
      deadline > now ? deadline - now : 1);
}

void Host::Impl::OnRestored(uint64_t id, std::shared_ptr<HostCopy> buffers,
                            Answer<Completion> answer) {
  AdmissionOp* op = Answered(id);
  CheckpointEntry* e = op->entry;
  TIER_CHECK(e->ops > 0);
  --e->ops;
  e->restoring = false;
  ReleaseSlot(op);
  if (answer.timed_out) {
    RestoreTimedOut(*e);
    Skip(op, RootReason::kTimeout, false);
    return;
  }
  restore_backoff_ns_ = 0;  // the provider answers: the next timeout backs off 1 s again
  const Completion& done = answer.result.value();
  if (!done.status.ok()) {
    const RootReason reason = ReasonOfRestore(done.status.code());
    Log(TIER_LOG_WARN, "host: cold restore of " + KeyHex(e->key) +
                           " failed: " + done.status.ToString() + "; prefilling from the root");
    if (reason == RootReason::kCorrupt || reason == RootReason::kMiss) ForgetCold(e, false);
    Skip(op, reason, !op->cancelled);
    return;
  }
  stats_.restored_logical_bytes += e->logical_bytes;
  stats_.restored_stored_bytes += done.stored_bytes;
  op->cold_restore_ns = done.duration_ns;
  op->result.cold_restore_ns = done.duration_ns;
  const uint64_t model_ns = options_.model_cold_read_bytes_per_second > 0 ? ColdReadNs(*e) : 0;
  op->result.cold_restore_model_ns = model_ns;
  if (done.duration_ns > 0) {
    const double rate =
        static_cast<double>(e->logical_bytes) * 1e9 /
        (static_cast<double>(done.duration_ns) * static_cast<double>(options_.bytes_scale));
    observed_cold_read_bytes_per_second_ =
        0.8 * observed_cold_read_bytes_per_second_ + 0.2 * std::clamp(rate, 1e6, 1e12);
  }
  op->staging = std::move(buffers);
  if (!LandInHost(op)) return;
  if (e->readopted) ++stats_.readopted_hits;
  if (e->remote) ++stats_.remote_hits;
  if (op->cancelled || op->prefetch) {
    if (op->prefetch) {
      // The hint says it is about to be used: it ranks as if used now, so pressure does not take
      // back what it just fetched.
      e->prefetched = true;
      e->prefetch_restore_ns = done.duration_ns;
      e->prefetch_restore_model_ns = model_ns;
      e->last_use_ns = std::max(e->last_use_ns, op->now_ns);
    }
    Unpin(e);
    op->entry = nullptr;
    op->result.state = AdmissionState::kReady;
    Finish(op, op->prefetch ? Event::kPrefetchDone : Event::kAdmissionCancelled);
    return;
  }
  op->result.outcome = Outcome::kColdRestore;
  UseHostCopy(op);
}

bool Host::Impl::LandInHost(AdmissionOp* op) {
  CheckpointEntry* e = op->entry;
  HostCopy& copy = *op->staging;
  for (size_t i = 0; i < e->segments.size(); ++i) {
    const SegmentSpec& s = e->segments[i];
    const std::span<const std::byte> bytes = copy.segment(i);
    if (s.kind == TIER_SEGMENT_OTHER && s.index == 0) {
      e->server_manifest.assign(bytes.begin(), bytes.end());
    }
    if (s.kind != TIER_SEGMENT_MANIFEST || e->verified_manifest) continue;
    // Found by probe: the key matched; the manifest must say the same identity.
    auto m = DecodeManifest(bytes);
    const uint64_t tpp = device_->pool().layout.tokens_per_page();
    if (!m.ok() || m.value().namespace_id != options_.namespace_id ||
        m.value().blocks != e->blocks || m.value().bytes_scale != options_.bytes_scale ||
        m.value().tokens > e->tokens || m.value().tokens + tpp <= e->tokens) {
      // Its bytes verified (the provider's checksums): a checkpoint of another identity, layout
      // or scale (a mismatched peer), not damage. A miss for this server, left where it is: only
      // what fails its checksums is removed, by the provider's own rules (issue 26).
      Log(TIER_LOG_WARN, "host: " + KeyHex(e->key) +
                             " in the cold tier has a manifest of another identity, layout or "
                             "scale; not served, left in place");
      ForgetCold(e, false);
      Skip(op, RootReason::kMiss, true);
      return false;
    }
    e->verified_manifest = true;
    e->tokens = m.value().tokens;
    e->prefill_saved_ns = cost_.RootPrefillNs(e->tokens);
    e->shared_prefix = m.value().shared_prefix;
    e->has_parent = m.value().has_parent;
    e->parent_key = m.value().parent_key;
    e->manifest.assign(bytes.begin(), bytes.end());
  }
  if (!e->in(kHost)) {
    e->host_copy = op->staging;
    catalog_.AddPlacement(e, kHost);
    server_metrics_->Transition("cold", "host");
  }
  return true;
}

void Host::Impl::StartProbe(AdmissionOp* op, size_t from_blocks) {
  op->probed = true;
  std::vector<size_t> lengths;
  std::vector<tier_key> keys;
  for (size_t k = op->max_blocks; k > from_blocks && lengths.size() < options_.max_probe_keys;
       --k) {
    const tier_key key = PrefixKey(options_.namespace_id, std::span(op->blocks).first(k));
    if (catalog_.Find(key) != nullptr) continue;  // known here (being sealed, or doomed)
    lengths.push_back(k);
    keys.push_back(key);
  }
  if (keys.empty()) {
    Lookup(op);
    return;
  }
  op->stage = Stage::kProbe;
  op->awaiting_provider = true;
  const uint64_t id = op->id;
  cold_->Probe(std::move(keys), op->prefetch ? IoPhase::kPrefetch : IoPhase::kAdmission,
               [this, id, lengths](Answer<std::vector<uint8_t>> answer) {
                 OnProbed(id, std::move(answer), lengths);
               });
}

void Host::Impl::OnProbed(uint64_t id, Answer<std::vector<uint8_t>> answer,
                          std::vector<size_t> lengths) {
  AdmissionOp* op = Answered(id);
  op->stage = Stage::kLookup;
  if (op->cancelled || answer.timed_out || !answer.result.ok()) {
    if (!answer.timed_out && !answer.result.ok()) {
      Log(TIER_LOG_WARN, "host: probe failed: " + answer.result.status().ToString());
    }
    Lookup(op);  // the local candidates still stand
    return;
  }
  const std::vector<uint8_t>& found = answer.result.value();
  for (size_t i = 0; i < found.size() && i < lengths.size(); ++i) {
    if (found[i] == 0) continue;
    const size_t length = lengths[i];
    const tier_key key = PrefixKey(options_.namespace_id, std::span(op->blocks).first(length));
    op->stage = Stage::kStat;
    op->awaiting_provider = true;
    cold_->Stat(
        key, op->prefetch ? IoPhase::kPrefetch : IoPhase::kAdmission,
        [this, id, length](Answer<StatResult> stat) { OnStat(id, length, std::move(stat)); });
    return;
  }
  Lookup(op);
}

void Host::Impl::OnStat(uint64_t id, size_t length, Answer<StatResult> answer) {
  AdmissionOp* op = Answered(id);
  op->stage = Stage::kLookup;
  if (op->cancelled || answer.timed_out || !answer.result.ok()) {
    Lookup(op);
    return;
  }
  const tier_key key = PrefixKey(options_.namespace_id, std::span(op->blocks).first(length));
  CheckpointEntry* entry = catalog_.Find(key);
  if (entry == nullptr) {
    const StatResult& stat = answer.result.value();
    auto made =
        EntryFromStored(key, std::vector<uint64_t>(op->blocks.begin(), op->blocks.begin() + length),
                        stat.segments, stat.stat.stored_bytes);
    if (!made.ok()) {
      Log(TIER_LOG_WARN, "host: " + KeyHex(key) + " in the shared tier does not fit this pool: " +
                             made.status().ToString());
      Lookup(op);
      return;
    }
    made.value()->remote = true;
    made.value()->verified_manifest = false;
    made.value()->placements = kCold;
    policy_.OnInsert(made.value().get(), op->now_ns);
    entry = catalog_.Insert(std::move(made).value());
  }
  if (entry == nullptr || entry->doomed) {
    Lookup(op);
    return;
  }
  ++op->tries;
  op->max_blocks = length - 1;
  op->entry = entry;
  ++entry->pins;
  TryCandidate(op);
}

void Host::Impl::ForgetCold(CheckpointEntry* entry, bool remove_from_provider) {
  // The provider no longer holds it (or it is damaged): the catalog must stop believing it does.
  if (!entry->in(kCold)) return;
  if (remove_from_provider) {
    DropCold(entry, IoPhase::kEviction);
  } else {
    catalog_.RemovePlacement(entry, kCold);
    server_metrics_->Transition("cold", "evicted");
  }
  if (entry->placements == 0) entry->doomed = true;  // leaves the catalog once unpinned
}

void Host::Impl::Skip(AdmissionOp* op, RootReason reason, bool try_shorter) {
  if (!op->skipped) op->first_reason = reason;
  op->skipped = true;
  if (op->entry != nullptr) {
    Unpin(op->entry);
    op->entry = nullptr;
  }
  ReleaseSlot(op);
  op->staging.reset();
  op->result.outcome = Outcome::kRootPrefill;
  if (op->cancelled) {
    Finish(op, Event::kAdmissionCancelled);
  } else if (try_shorter && op->max_blocks > 0 && op->tries < kMaxCandidates) {
    op->stage = Stage::kLookup;
    Lookup(op);
  } else {
    Root(op);
  }
}

void Host::Impl::Root(AdmissionOp* op) {
  op->result.state = AdmissionState::kRoot;
  op->result.outcome = Outcome::kRootPrefill;
  op->result.root_reason = op->skipped ? op->first_reason : RootReason::kNoCheckpoint;
  if (op->prefetch) {
    Finish(op, Event::kPrefetchDone);
    return;
  }
  server_metrics_->Admission(Outcome::kRootPrefill);
  server_metrics_->RootPrefill(op->result.root_reason);
  Finish(op, Event::kAdmissionRoot);
}

void Host::Impl::Ready(AdmissionOp* op) {
  CheckpointEntry* e = op->entry;
  policy_.OnUse(e, op->now_ns);
  op->result.state = AdmissionState::kReady;
  op->result.key = e->key;
  op->result.cached_tokens = e->tokens;
  op->result.server_manifest = e->server_manifest;
  op->result.wait_ns = Now() - op->started_wall_ns;
  used_[op->id] = e->key;  // the pin passes to the request until Release()
  op->entry = nullptr;
  op->staging.reset();
  server_metrics_->Admission(op->result.outcome);
  Finish(op, Event::kAdmissionReady);
}

void Host::Impl::Finish(AdmissionOp* op, Event::Kind kind) {
  TIER_CHECK(op->entry == nullptr && !op->holds_slot);
  if (kind == Event::kAdmissionCancelled) op->result.state = AdmissionState::kCancelled;
  op->stage = Stage::kDone;
  if (op->awaiting_provider) return;  // a cancelled op: erased when its provider call answers
  const bool emit = op->returned && !(kind == Event::kAdmissionCancelled && op->cancel_emitted);
  if (emit) {
    Event event;
    event.kind = kind;
    event.id = op->id;
    event.admission = op->result;
    Emit(std::move(event));
  } else if (!op->returned) {
    finished_ = op->result;
  }
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), op->id), waiting_.end());
  ops_.erase(op->id);
}

void Host::Impl::RetryWaiting() {
  const std::deque<uint64_t> waiting = std::move(waiting_);
  waiting_.clear();
  const uint64_t now = Now();
  for (uint64_t id : waiting) {
    auto it = ops_.find(id);
    if (it == ops_.end()) continue;
    AdmissionOp* op = it->second.get();
    if (op->cancelled) {
      Skip(op, RootReason::kNoCheckpoint, false);
      continue;
    }
    const Stage stage = op->stage;
    if (now >= op->wait_deadline_ns) {
      Skip(op,
           stage == Stage::kWaitRoom   ? RootReason::kNoRoom
           : stage == Stage::kWaitSlot ? RootReason::kBusy
                                       : RootReason::kTimeout,
           false);
      continue;
    }
    if (stage == Stage::kWaitEntry) {
      if (op->entry->restoring) {
        waiting_.push_back(id);
      } else {
        op->stage = Stage::kLookup;
        op->result.outcome = Outcome::kRootPrefill;  // what the other operation left decides
        TryCandidate(op);
      }
    } else if (stage == Stage::kWaitSlot) {
      if (TakeSlot(op)) {
        StartRestore(op);
      } else {
        waiting_.push_back(id);
      }
    } else if (stage == Stage::kWaitRoom) {
      StartRestore(op);  // waits again (re-queued) while the arena is full
    }
  }
}

bool Host::Impl::Cancel(uint64_t admission_id) {
  auto it = ops_.find(admission_id);
  if (it == ops_.end() || it->second->prefetch) return false;
  AdmissionOp* op = it->second.get();
  if (op->stage == Stage::kDone || op->cancelled) return false;
  op->cancelled = true;
  switch (op->stage) {
    case Stage::kCopy:
      return true;  // kAdmissionCancelled once the copies into the server's pages are over
    case Stage::kWaitEntry:
    case Stage::kWaitSlot:
    case Stage::kWaitRoom:
    case Stage::kLookup:
      Skip(op, RootReason::kNoCheckpoint, false);
      return true;
    default: {
      // A provider call is out; nothing has touched the server's pages or buffers yet. The op
      // lives on (detached) until the call answers, to release what it holds.
      Event event;
      event.kind = Event::kAdmissionCancelled;
      event.id = op->id;
      event.admission = op->result;
      event.admission.state = AdmissionState::kCancelled;
      Emit(std::move(event));
      op->cancel_emitted = true;
      return true;
    }
  }
}

void Host::Impl::Unpin(CheckpointEntry* entry) {
  TIER_CHECK(entry->pins > 0);
  --entry->pins;
  DropIfDoomed(entry);
}

void Host::Impl::Release(uint64_t admission_id) {
  auto it = used_.find(admission_id);
  if (it == used_.end()) return;
  CheckpointEntry* entry = catalog_.Find(it->second);
  used_.erase(it);
  TIER_CHECK_MSG(entry != nullptr, "released admission %llu lost its checkpoint",
                 static_cast<unsigned long long>(admission_id));
  Unpin(entry);
}

void Host::Impl::ReportVerification(uint64_t admission_id, bool exact) {
  ++stats_.verified_restores;
  server_metrics_->RestoreVerification(exact);
  if (exact) return;
  ++stats_.mismatched_restores;
  auto it = used_.find(admission_id);
  if (it == used_.end()) return;
  CheckpointEntry* entry = catalog_.Find(it->second);
  if (entry == nullptr) return;
  Log(TIER_LOG_ERROR, "host: the server found wrong bytes in " + KeyHex(entry->key) +
                          "; it leaves every tier and is never served again");
  entry->doomed = true;  // hidden from lookups now, dropped when released
  if (entry->in(kCold)) DropCold(entry, IoPhase::kEviction);
}

}  // namespace tier
