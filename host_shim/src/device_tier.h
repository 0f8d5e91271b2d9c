// device_tier.h -- how checkpoint bytes move between the server's paged KV pool, its state
// buffers, device memory the Host owns, and Host copies: tier_cuda's transfer engine (gather and
// scatter kernels and async copies on the CUDA path, a worker thread giving identical bytes on the
// CPU path). Everything is queued and returns a CopyJob to poll; nothing here waits.
//
// It also keeps the Host's page ledger: how many Device placements hold each pool page.
#pragma once

#include <tier/device/transfer_engine.h>
#include <tier/host/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "catalog.h"
#include "device_arena.h"
#include "host_copy.h"

namespace tier {

// Transfers queued together; done when every one is. Scheduler thread.
class CopyJob {
 public:
  void Add(device::Transfer transfer) { transfers_.push_back(std::move(transfer)); }
  bool Done() const;
  // The first error once Done() (waits otherwise).
  Status Wait() const;
  bool empty() const { return transfers_.empty(); }
  const std::vector<device::Transfer>& transfers() const { return transfers_; }
  // One transfer the server can order its stream after (the last queued).
  device::Transfer Last() const {
    return transfers_.empty() ? device::Transfer() : transfers_.back();
  }

 private:
  std::vector<device::Transfer> transfers_;
};

class DeviceTier {
 public:
  // Validates the pool against the engine (INVALID_ARGUMENT naming what is wrong) and allocates
  // the device arena of `state_bytes` for Device placements' state (NO_SPACE when the device
  // refuses; 0: no arena, seals go to Host).
  static Result<std::unique_ptr<DeviceTier>> Create(std::shared_ptr<device::TransferEngine> engine,
                                                    KvPool pool, uint64_t state_bytes);

  const KvPool& pool() const { return pool_; }
  device::TransferEngine& engine() { return *engine_; }
  uint32_t kv_layers() const { return pool_.layout.layer_count(); }
  uint32_t PagesFor(uint64_t tokens) const;
  // The segment (kind, index) that pool layer `layer` is stored as.
  SegmentSpec LayerSegment(uint32_t layer, uint32_t pages) const;
  // OK when every id is < page_count (and distinct when `distinct`); else which index and id.
  Status CheckPages(std::span<const uint32_t> pages, bool distinct) const;

  // Queues the gather of `pages` into the first kv_layers() segments of `dst` and the copy of
  // `state` into the next state.size() segments. Buffers must stay until the job is done.
  Result<CopyJob> ToHost(std::span<const uint32_t> pages, std::span<const StateBuffer> state,
                         HostCopy& dst);
  // Queues a Device placement's own state buffers into `dst`'s state segments.
  Result<CopyJob> DeviceStateToHost(const DeviceCopy& copy, HostCopy& dst);
  // Queues the scatter of `src`'s KV segments into `pages` and its state segments into `lane`
  // (matched by kind and index; sizes must be equal).
  Result<CopyJob> FromHost(const HostCopy& src, const CheckpointEntry& entry,
                           std::span<const uint32_t> pages, std::span<const StateBuffer> lane);
  // Copies the server's state buffers into the device arena (a Device placement); nothing is
  // allocated from the device. NO_SPACE when the arena is full, or the engine's error (then the
  // seal goes to Host); what was taken goes back only after the copies queued into it are done.
  Result<DeviceState> CopyStateOnDevice(std::span<const StateBuffer> state, CopyJob* job);
  // Returns to the arena what Device placements let go once their copies are done. Poll().
  void Collect() { arena_->Collect(); }
  const DeviceArena& arena() const { return *arena_; }
  // Queues a Device placement's state into the lane's buffers (a device hit).
  Result<CopyJob> StateToLane(const DeviceCopy& copy, const CheckpointEntry& entry,
                              std::span<const StateBuffer> lane);

  // Orders the engine's later copies after the work queued on the server's stream `producer`
  // so far (nullptr: nothing to do). The error keeps the engine's code, "device: " before it.
  Status OrderAfter(device::NativeStream producer);

  // The page ledger. Hold adds one reference per page; Drop removes one and returns the pages
  // whose last reference went (the server may reuse them).
  void Hold(std::span<const uint32_t> pages);
  std::vector<uint32_t> Drop(std::span<const uint32_t> pages);
  uint64_t held_pages() const { return held_pages_; }

 private:
  DeviceTier(std::shared_ptr<device::TransferEngine> engine, KvPool pool,
             std::shared_ptr<DeviceArena> arena)
      : engine_(std::move(engine)),
        pool_(std::move(pool)),
        arena_(std::move(arena)),
        held_(pool_.layout.page_count(), 0),
        seen_(pool_.layout.page_count(), 0) {}
  // The lane buffer for state segment `spec`, or nullptr.
  static const StateBuffer* Find(std::span<const StateBuffer> lane, const SegmentSpec& spec);
  Result<device::Transfer> DeviceToDevice(std::byte* dst, const std::byte* src, uint64_t bytes);

  std::shared_ptr<device::TransferEngine> engine_;
  KvPool pool_;
  std::shared_ptr<DeviceArena> arena_;  // shared with the DeviceStates it handed out
  // The ledger and CheckPages' scratch are indexed by page id (constant work per page: a seal or a
  // release of ~1,500 pages costs microseconds on the scheduler thread, never a tree per page).
  std::vector<uint32_t> held_;          // page -> references
  uint64_t held_pages_ = 0;             // pages with at least one reference
  mutable std::vector<uint32_t> seen_;  // page -> the CheckPages call that last saw it
  mutable uint32_t check_ = 0;
};

// Maps a device-layer error to a status that says where it came from.
Status FromDevice(const Status& status, const std::string& what);

}  // namespace tier
