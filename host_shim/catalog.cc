#include "catalog.h"

#include <xxhash.h>

#include <algorithm>
#include <cassert>
#include <cstring>

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

std::vector<uint64_t> PrefixHashes(std::span<const uint64_t> blocks) {
  std::vector<uint64_t> hashes(blocks.size());
  uint64_t state[2] = {0x74696572ull, 0};
  for (size_t i = 0; i < blocks.size(); ++i) {
    state[1] = blocks[i];
    state[0] = XXH3_64bits(state, sizeof(state));
    hashes[i] = state[0];
  }
  return hashes;
}

tier_key PrefixKey(const std::string& namespace_id, std::span<const uint64_t> blocks) {
  XXH3_state_t* state = XXH3_createState();
  tier_key key{};
  for (int half = 0; half < 2; ++half) {
    XXH3_128bits_reset_withSeed(state, 0x6b6579ull + static_cast<uint64_t>(half));
    XXH3_128bits_update(state, namespace_id.data(), namespace_id.size());
    const uint64_t count = blocks.size();
    XXH3_128bits_update(state, &count, sizeof(count));
    XXH3_128bits_update(state, blocks.data(), blocks.size_bytes());
    const XXH128_hash_t digest = XXH3_128bits_digest(state);
    std::memcpy(key.bytes + 16 * half, &digest, 16);
  }
  XXH3_freeState(state);
  return key;
}

size_t Catalog::KeyHash::operator()(const tier_key& key) const {
  size_t h;
  std::memcpy(&h, key.bytes, sizeof(h));
  return h;
}

bool Catalog::KeyEqual::operator()(const tier_key& a, const tier_key& b) const {
  return std::memcmp(a.bytes, b.bytes, TIER_KEY_BYTES) == 0;
}

CheckpointEntry* Catalog::Insert(std::unique_ptr<CheckpointEntry> entry) {
  if (by_key_.count(entry->key) != 0 || entry->blocks.empty()) return nullptr;
  CheckpointEntry* raw = entry.get();
  const uint64_t hash = PrefixHashes(raw->blocks).back();
  const uint8_t placements = raw->placements;
  raw->placements = 0;
  raw->generation = next_generation_++;
  by_key_.emplace(raw->key, std::move(entry));
  by_prefix_hash_.emplace(hash, raw);
  for (Placement p : {kDevice, kHost, kCold}) {
    if (placements & p) AddPlacement(raw, p);
  }
  return raw;
}

CheckpointEntry* Catalog::Find(const tier_key& key) const {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : it->second.get();
}

std::vector<CheckpointEntry*> Catalog::LongestPrefixMatches(std::span<const uint64_t> blocks,
                                                            std::span<const uint64_t> prefix_hashes,
                                                            size_t limit) const {
  assert(blocks.size() == prefix_hashes.size());
  std::vector<CheckpointEntry*> matches;
  for (size_t k = blocks.size(); k > 0 && matches.size() < limit; --k) {
    auto [begin, end] = by_prefix_hash_.equal_range(prefix_hashes[k - 1]);
    for (auto it = begin; it != end; ++it) {
      CheckpointEntry* entry = it->second;
      // Exact identity: every block id, not the hash.
      if (entry->blocks.size() == k &&
          std::equal(entry->blocks.begin(), entry->blocks.end(), blocks.begin())) {
        matches.push_back(entry);
        break;
      }
    }
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
}

void Catalog::RemovePlacement(CheckpointEntry* entry, Placement placement) {
  if (!entry->in(placement)) return;
  entry->placements &= static_cast<uint8_t>(~placement);
  entry->generation = next_generation_++;
  bytes_[Slot(placement)] -= entry->logical_bytes;
  physical_[Slot(placement)] -=
      placement == kCold ? entry->cold_stored_bytes : entry->physical_bytes;
  entries_[Slot(placement)] -= 1;
  if (placement == kHost) entry->host_copy.reset();
  if (placement == kDevice) entry->device_copy.reset();
}

void Catalog::Erase(CheckpointEntry* entry) {
  assert(entry->placements == 0 && entry->pins == 0);
  const uint64_t hash = PrefixHashes(entry->blocks).back();
  auto [begin, end] = by_prefix_hash_.equal_range(hash);
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
