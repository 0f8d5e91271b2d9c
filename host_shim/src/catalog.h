// catalog.h -- the one catalog: one entry per sealed checkpoint, whatever tiers hold it.
//
// A checkpoint's identity is its whole token prefix, given as the content ids of its blocks (the
// request traces' 512-token hash_ids, or the workload generator's equivalent). Lookups return the
// longest checkpoints whose full identity is a prefix of the request: a candidate found through a
// hash is confirmed by comparing every block id, never by the hash alone. Published checkpoints
// are immutable; only their placements, pins and use times change. Single-threaded: the Host
// owns the catalog and is the only one to touch it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <tier/host/identity.h>

#include <tier/device/transfer_engine.h>

#include "device_arena.h"
#include "host_copy.h"
#include "tier_provider.h"

namespace tier {

class KvEventPublisher;

enum Placement : uint8_t { kDevice = 1, kHost = 2, kCold = 4 };
const char* PlacementName(Placement placement);  // "device", "host", "cold"

// One segment of a checkpoint: what is stored and copied (physical), and what it stands for in
// the real model (logical = physical x bytes_scale; 1 for a real server).
struct SegmentSpec {
  tier_segment_kind kind = 0;
  uint32_t index = 0;
  uint64_t physical_bytes = 0;
};

// A Device placement: the checkpoint's KV pages are resident in the server's pool (the Host holds
// a reference on each) and its state buffers live in device memory of the transfer engine.
struct DeviceCopy {
  std::vector<uint32_t> pages;
  DeviceState state;  // one block per state segment, in segment order (the Device tier's arena)
};

struct CheckpointEntry {
  tier_key key{};
  std::vector<uint64_t> blocks;  // identity: content id of every block of the prefix
  uint64_t tokens = 0;           // the frontier this checkpoint restores to
  uint32_t page_count = 0;       // pool pages of its KV
  tier_key parent_key{};         // the checkpoint it extends (valid when has_parent)
  bool has_parent = false;
  bool shared_prefix = false;  // published as a shared stable prefix (a system head)
  std::string tenant;  // SealRequest::tenant ("": none, or re-adopted: no manifest names it)
  // Segments in stored order: MAIN_KV layers, SPEC_KV layers, state buffers, MANIFEST, and OTHER
  // (the server's manifest) when the server gave one.
  std::vector<SegmentSpec> segments;
  uint32_t kv_segments = 0;                // the first kv_segments are pool layers
  std::vector<std::byte> manifest;         // the TIER_SEGMENT_MANIFEST bytes (identity)
  std::vector<std::byte> server_manifest;  // opaque, the server's
  uint64_t logical_bytes = 0;
  uint64_t physical_bytes = 0;
  uint64_t prefill_saved_ns = 0;  // root prefill of `tokens`: what a hit on it saves
  // Policy inputs (policy.h).
  uint64_t last_use_ns = 0;  // server clock
  uint64_t uses = 0;         // admissions that reused it
  uint32_t children = 0;     // checkpoints in the catalog whose parent it is
  // Its conversation moved on: exactly one child extends it and it is not a shared prefix
  // (kept by the catalog as children and shared_prefix change).
  bool superseded = false;
  double gdsf_priority = 0;        // GDSF's H value, set when used or inserted
  uint8_t placements = 0;          // Placement bits
  uint64_t cold_stored_bytes = 0;  // bytes the provider reported for it
  uint32_t pins = 0;               // requests and operations using it: never dropped while > 0
  uint32_t ops = 0;                // operations moving its bytes (a demotion, a spill, a restore)
  uint64_t generation = 0;         // changes whenever placements change (stale-plan detection)
  bool sealing = false;            // its state is still being copied in: not served yet
  bool spill_failed = false;       // a spill of it failed; do not retry it for a while
  uint64_t spill_retry_after_ns = 0;  // (wall clock) when it may be retried
  bool readopted = false;             // adopted from the cold tier at start (survived a restart)
  bool remote = false;                // found by probe: another server spilled it
  bool verified_manifest = true;      // false until a remote entry's manifest was read and checked
  bool restoring = false;             // a cold restore into Host is in flight
  bool prefetched = false;           // its Host copy came from a prefetch and has not been used yet
  uint64_t prefetch_restore_ns = 0;  // what that prefetch's cold restore took
  uint64_t prefetch_restore_model_ns = 0;  // ... modelled (model_cold_read_bytes_per_second)
  bool doomed = false;  // leaves every tier once unpinned (corrupt, evicted while in use)
  std::shared_ptr<HostCopy> host_copy;      // present iff placements & kHost (operations
                                            // reading it hold references too)
  std::unique_ptr<DeviceCopy> device_copy;  // present iff placements & kDevice
  std::vector<uint64_t> page_sums;  // verify_held_pages: one per page, as sealed (Device seals)

  bool in(Placement p) const { return (placements & p) != 0; }
  // Not moving and not in use: pressure may demote, spill or drop it.
  bool idle() const { return pins == 0 && ops == 0 && !sealing; }
};

class Catalog {
 public:
  // The prefix index is sized up front for kReservedPrefixes distinct prefixes (~2 MiB of
  // buckets): growing a hash table rehashes all of it inside one call, and at ~1,500 blocks a
  // checkpoint that was the scheduler thread's slowest Seal (several ms). A larger catalog still
  // rehashes once per doubling past it.
  static constexpr size_t kReservedPrefixes = size_t{1} << 18;
  Catalog();

  // Adds a published checkpoint; nullptr if an entry with the same key exists. Its parent (when
  // present) counts one more child.
  CheckpointEntry* Insert(std::unique_ptr<CheckpointEntry> entry);
  // Counts every entry's children again (after entries were adopted in any order).
  void RecountChildren();
  // Marks a checkpoint a shared prefix (it no longer counts as superseded).
  static void MarkShared(CheckpointEntry* entry);
  CheckpointEntry* Find(const tier_key& key) const;
  // The longest entry whose identity is a prefix of blocks[0..max_blocks), or nullptr.
  // `prefix_hashes` must be PrefixHashes(blocks). Cost: a binary search for the longest prefix any
  // entry shares (O(log n) probes), then a walk down over lengths some entry has, comparing every
  // block id of a candidate.
  CheckpointEntry* LongestMatch(std::span<const uint64_t> blocks,
                                std::span<const uint64_t> prefix_hashes, size_t max_blocks) const;
  // Up to `limit` entries whose identity is a prefix of `blocks`, longest first.
  std::vector<CheckpointEntry*> LongestPrefixMatches(std::span<const uint64_t> blocks,
                                                     std::span<const uint64_t> prefix_hashes,
                                                     size_t limit) const;
  // Adds or removes a placement (bumping the generation and the per-tier totals).
  void AddPlacement(CheckpointEntry* entry, Placement placement);
  void RemovePlacement(CheckpointEntry* entry, Placement placement);
  // Drops an entry with no placement left (its parent counts one child less). The caller checked
  // idle().
  void Erase(CheckpointEntry* entry);
  // Every placement added or removed from now on is published there (kv_events.h); null = none.
  // Borrowed: it must outlive the catalog's last placement change.
  void set_kv_events(KvEventPublisher* publisher) { kv_events_ = publisher; }

  size_t size() const { return by_key_.size(); }
  uint64_t logical_bytes_in(Placement p) const { return bytes_[Slot(p)]; }
  uint64_t physical_bytes_in(Placement p) const { return physical_[Slot(p)]; }
  uint64_t entries_in(Placement p) const { return entries_[Slot(p)]; }
  // Every entry (unordered). For pressure scans and re-adoption checks.
  std::vector<CheckpointEntry*> Entries() const;

 private:
  struct KeyHash {
    size_t operator()(const tier_key& key) const;
  };
  struct KeyEqual {
    bool operator()(const tier_key& a, const tier_key& b) const;
  };
  static int Slot(Placement p) { return p == kDevice ? 0 : p == kHost ? 1 : 2; }
  static void UpdateSuperseded(CheckpointEntry* entry);
  void AddChild(const CheckpointEntry& child, int delta);

  std::unordered_map<tier_key, std::unique_ptr<CheckpointEntry>, KeyHash, KeyEqual> by_key_;
  std::unordered_multimap<uint64_t, CheckpointEntry*> by_prefix_hash_;
  // Hashes of every prefix of every entry, with counts: "does any entry extend this prefix?",
  // which is monotone in the prefix length, so the longest shared prefix is a binary search.
  std::unordered_map<uint64_t, uint32_t> prefix_counts_;
  std::vector<uint32_t> entries_with_length_;  // [k] = entries of exactly k blocks
  KvEventPublisher* kv_events_ = nullptr;
  uint64_t next_generation_ = 1;
  uint64_t bytes_[3] = {0, 0, 0};
  uint64_t physical_[3] = {0, 0, 0};
  uint64_t entries_[3] = {0, 0, 0};
};

}  // namespace tier
