// catalog.h -- the one catalog: one entry per sealed checkpoint, whatever tiers hold it.
//
// A checkpoint's identity is its whole token prefix, given as the content ids of its blocks (the
// request traces' 512-token hash_ids, or the workload generator's equivalent). Lookups return the
// longest checkpoints whose full identity is a prefix of the request: a candidate found through a
// hash is confirmed by comparing every block id, never by the hash alone. Published checkpoints
// are immutable; only their placements, pins and use times change. Single-threaded: the planner
// owns the catalog and is the only one to touch it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <tier/host/identity.h>

#include "host_copy.h"
#include "tier_provider.h"

namespace tier {

enum Placement : uint8_t { kDevice = 1, kHost = 2, kCold = 4 };
const char* PlacementName(Placement placement);  // "device", "host", "cold"

// One segment of a checkpoint: its logical size (what the model holds) and the bytes actually
// stored and copied (logical / bytes_scale, so a laptop can replay a 100k-token workload).
struct SegmentSpec {
  tier_segment_kind kind = 0;
  uint32_t index = 0;
  uint64_t logical_bytes = 0;
  uint64_t physical_bytes = 0;
};

// The bytes of one checkpoint in device memory (device_tier.h makes them). Owned by its entry.
class DeviceCopy {
 public:
  virtual ~DeviceCopy() = default;
};

struct CheckpointEntry {
  tier_key key{};
  std::vector<uint64_t> blocks;  // identity: content id of every block of the prefix
  uint64_t tokens = 0;           // the frontier this checkpoint restores to
  tier_key parent_key{};         // the checkpoint it extends (valid when has_parent)
  bool has_parent = false;
  bool shared_prefix = false;  // published as a shared stable prefix (a system head)
  std::vector<SegmentSpec> segments;
  std::vector<std::byte> manifest;  // the TIER_SEGMENT_MANIFEST bytes (identity, for re-adoption)
  uint64_t logical_bytes = 0;
  uint64_t physical_bytes = 0;
  uint64_t prefill_saved_ns = 0;        // root prefill of `tokens`: what a hit on it saves
  uint64_t last_use_ns = 0;             // virtual clock
  uint8_t placements = 0;               // Placement bits
  uint64_t cold_stored_bytes = 0;       // bytes the provider reported for it
  uint32_t pins = 0;                    // operations and requests using it: never dropped while > 0
  uint64_t generation = 0;              // changes whenever placements change (stale-plan detection)
  bool spill_failed = false;            // a spill of it failed; do not retry it
  bool readopted = false;               // adopted from the cold tier at start (survived a restart)
  std::unique_ptr<HostCopy> host_copy;  // present iff placements & kHost
  std::unique_ptr<DeviceCopy> device_copy;  // present iff placements & kDevice

  bool in(Placement p) const { return (placements & p) != 0; }
};


class Catalog {
 public:
  // Adds a published checkpoint; nullptr if an entry with the same key exists.
  CheckpointEntry* Insert(std::unique_ptr<CheckpointEntry> entry);
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
  // Drops an entry with no placement left. The caller checked pins == 0.
  void Erase(CheckpointEntry* entry);

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

  std::unordered_map<tier_key, std::unique_ptr<CheckpointEntry>, KeyHash, KeyEqual> by_key_;
  std::unordered_multimap<uint64_t, CheckpointEntry*> by_prefix_hash_;
  // Hashes of every prefix of every entry, with counts: "does any entry extend this prefix?",
  // which is monotone in the prefix length, so the longest shared prefix is a binary search.
  std::unordered_map<uint64_t, uint32_t> prefix_counts_;
  std::vector<uint32_t> entries_with_length_;  // [k] = entries of exactly k blocks
  uint64_t next_generation_ = 1;
  uint64_t bytes_[3] = {0, 0, 0};
  uint64_t physical_[3] = {0, 0, 0};
  uint64_t entries_[3] = {0, 0, 0};
};

}  // namespace tier
