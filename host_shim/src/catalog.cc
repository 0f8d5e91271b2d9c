#include "catalog.h"

#include "kv_events.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include <tier/check.h>

namespace tier {

const char* PlacementName(Placement placement) {
  switch (placement) {
    case kDevice:
      return "device";
    case kHost:
      return "host";
    case kCold:
      return "cold";
  }
  return "unknown";
}

size_t Catalog::KeyHash::operator()(const tier_key& key) const {
  size_t h;
  std::memcpy(&h, key.bytes, sizeof(h));
  return h;
}

bool Catalog::KeyEqual::operator()(const tier_key& a, const tier_key& b) const {
  return std::memcmp(a.bytes, b.bytes, TIER_KEY_BYTES) == 0;
}

Catalog::Catalog() {
  prefix_counts_.reserve(kReservedPrefixes);
  by_key_.reserve(kReservedPrefixes / 64);
  by_prefix_hash_.reserve(kReservedPrefixes / 64);
}

CheckpointEntry* Catalog::Insert(std::unique_ptr<CheckpointEntry> entry) {
  if (by_key_.count(entry->key) != 0 || entry->blocks.empty()) return nullptr;
  CheckpointEntry* raw = entry.get();
  const std::vector<uint64_t> hashes = PrefixHashes(raw->blocks);
  const uint8_t placements = raw->placements;
  raw->placements = 0;
  raw->generation = next_generation_++;
  by_key_.emplace(raw->key, std::move(entry));
  by_prefix_hash_.emplace(hashes.back(), raw);
  for (uint64_t h : hashes) ++prefix_counts_[h];
  if (entries_with_length_.size() <= raw->blocks.size()) {
    entries_with_length_.resize(raw->blocks.size() + 1);
  }
  ++entries_with_length_[raw->blocks.size()];
  for (Placement p : {kDevice, kHost, kCold}) {
    if (placements & p) AddPlacement(raw, p);
  }
  AddChild(*raw, 1);
  return raw;
}

void Catalog::UpdateSuperseded(CheckpointEntry* entry) {
  entry->superseded = !entry->shared_prefix && entry->children == 1;
}

void Catalog::MarkShared(CheckpointEntry* entry) {
  entry->shared_prefix = true;
  UpdateSuperseded(entry);
}

void Catalog::AddChild(const CheckpointEntry& child, int delta) {
  if (!child.has_parent) return;
  CheckpointEntry* parent = Find(child.parent_key);
  if (parent == nullptr || parent == &child) return;
  if (delta < 0 && parent->children == 0) return;  // counted before the parent was re-sealed
  parent->children = static_cast<uint32_t>(static_cast<int64_t>(parent->children) + delta);
  UpdateSuperseded(parent);
}

void Catalog::RecountChildren() {
  for (auto& [key, entry] : by_key_) entry->children = 0;
  for (auto& [key, entry] : by_key_) AddChild(*entry, 1);
  for (auto& [key, entry] : by_key_) UpdateSuperseded(entry.get());
}

CheckpointEntry* Catalog::Find(const tier_key& key) const {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : it->second.get();
}

CheckpointEntry* Catalog::LongestMatch(std::span<const uint64_t> blocks,
                                       std::span<const uint64_t> prefix_hashes,
                                       size_t max_blocks) const {
  TIER_CHECK(blocks.size() == prefix_hashes.size());
  max_blocks = std::min(max_blocks, blocks.size());
  // Longest k such that some entry extends blocks[0..k): binary search (monotone in k). A hash
  // collision can only overshoot; the walk below verifies every candidate block by block.
  size_t lo = 0, hi = max_blocks;
  while (lo < hi) {
    const size_t mid = (lo + hi + 1) / 2;
    if (prefix_counts_.count(prefix_hashes[mid - 1]) != 0) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  for (size_t k = lo; k > 0; --k) {
    if (k >= entries_with_length_.size() || entries_with_length_[k] == 0) continue;
    auto [begin, end] = by_prefix_hash_.equal_range(prefix_hashes[k - 1]);
    for (auto it = begin; it != end; ++it) {
      CheckpointEntry* entry = it->second;
      // Exact identity: every block id, not the hash.
      if (entry->blocks.size() == k && !entry->sealing && !entry->doomed &&
          std::equal(entry->blocks.begin(), entry->blocks.end(), blocks.begin())) {
        return entry;
      }
    }
  }
  return nullptr;
}

std::vector<CheckpointEntry*> Catalog::LongestPrefixMatches(std::span<const uint64_t> blocks,
                                                            std::span<const uint64_t> prefix_hashes,
                                                            size_t limit) const {
  std::vector<CheckpointEntry*> matches;
  size_t max_blocks = blocks.size();
  while (matches.size() < limit && max_blocks > 0) {
    CheckpointEntry* entry = LongestMatch(blocks, prefix_hashes, max_blocks);
    if (entry == nullptr) break;
    matches.push_back(entry);
    max_blocks = entry->blocks.size() - 1;
  }
  return matches;
}

void Catalog::AddPlacement(CheckpointEntry* entry, Placement placement) {
  if (entry->in(placement)) return;
  entry->placements |= placement;
  entry->generation = next_generation_++;
  bytes_[Slot(placement)] += entry->logical_bytes;
  physical_[Slot(placement)] +=
      placement == kCold ? entry->cold_stored_bytes : entry->physical_bytes;
  entries_[Slot(placement)] += 1;
  if (kv_events_ != nullptr) kv_events_->Changed(entry->blocks, Slot(placement), true);
}

void Catalog::RemovePlacement(CheckpointEntry* entry, Placement placement) {
  if (!entry->in(placement)) return;
  entry->placements &= static_cast<uint8_t>(~placement);
  entry->generation = next_generation_++;
  const uint64_t physical = placement == kCold ? entry->cold_stored_bytes : entry->physical_bytes;
  TIER_CHECK(bytes_[Slot(placement)] >= entry->logical_bytes);
  TIER_CHECK(physical_[Slot(placement)] >= physical && entries_[Slot(placement)] > 0);
  bytes_[Slot(placement)] -= entry->logical_bytes;
  physical_[Slot(placement)] -= physical;
  entries_[Slot(placement)] -= 1;
  if (kv_events_ != nullptr) kv_events_->Changed(entry->blocks, Slot(placement), false);
  if (placement == kHost) entry->host_copy.reset();
  if (placement == kDevice) entry->device_copy.reset();
}

void Catalog::Erase(CheckpointEntry* entry) {
  TIER_CHECK(entry->placements == 0 && entry->idle());
  AddChild(*entry, -1);
  const std::vector<uint64_t> hashes = PrefixHashes(entry->blocks);
  for (uint64_t h : hashes) {
    auto count = prefix_counts_.find(h);
    if (count != prefix_counts_.end() && --count->second == 0) prefix_counts_.erase(count);
  }
  --entries_with_length_[entry->blocks.size()];
  auto [begin, end] = by_prefix_hash_.equal_range(hashes.back());
  for (auto it = begin; it != end; ++it) {
    if (it->second == entry) {
      by_prefix_hash_.erase(it);
      break;
    }
  }
  by_key_.erase(entry->key);
}

std::vector<CheckpointEntry*> Catalog::Entries() const {
  std::vector<CheckpointEntry*> entries;
  entries.reserve(by_key_.size());
  for (const auto& [key, entry] : by_key_) entries.push_back(entry.get());
  return entries;
}

}  // namespace tier
