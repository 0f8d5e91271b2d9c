#include "index.h"

#include "tier/check.h"

namespace tier::disk {

Index::Index(uint64_t capacity_bytes, uint64_t max_entries)
    : capacity_bytes_(capacity_bytes), max_entries_(max_entries) {}

std::shared_ptr<Entry> Index::Find(const KeyBytes& key) const {
  const auto it = map_.find(key);
  return it == map_.end() ? nullptr : it->second;
}

void Index::Insert(std::shared_ptr<Entry> entry) {
  TIER_CHECK(entry != nullptr && !entry->detached);
  used_bytes_ += entry->stored_bytes;
  corrupt_.erase(entry->key);
  const bool inserted = map_.emplace(entry->key, std::move(entry)).second;
  TIER_CHECK(inserted);
  (void)inserted;
}

std::shared_ptr<Entry> Index::Detach(const KeyBytes& key) {
  const auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  std::shared_ptr<Entry> entry = std::move(it->second);
  map_.erase(it);
  entry->detached = true;
  if (entry->pins == 0) {
    TIER_CHECK(used_bytes_ >= entry->stored_bytes);
    used_bytes_ -= entry->stored_bytes;
  }
  return entry;
}

void Index::Pin(Entry* entry) {
  TIER_CHECK(!entry->detached);
  ++entry->pins;
}

void Index::Unpin(Entry* entry) {
  TIER_CHECK(entry->pins > 0);
  if (--entry->pins == 0 && entry->detached) {
    TIER_CHECK(used_bytes_ >= entry->stored_bytes);
    used_bytes_ -= entry->stored_bytes;
  }
}

bool Index::Reserve(const KeyBytes& key, uint64_t worst_case_bytes, bool* exists, bool* too_many) {
  *exists = map_.count(key) != 0 || pending_.count(key) != 0;
  *too_many = map_.size() + pending_.size() >= max_entries_;
  if (*exists || *too_many) return false;
  if (worst_case_bytes > capacity_bytes_ ||
      used_bytes_ + reserved_bytes_ > capacity_bytes_ - worst_case_bytes) {
    return false;
  }
  reserved_bytes_ += worst_case_bytes;
  pending_.insert(key);
  return true;
}

void Index::Unreserve(const KeyBytes& key, uint64_t worst_case_bytes) {
  TIER_CHECK(reserved_bytes_ >= worst_case_bytes);
  reserved_bytes_ -= worst_case_bytes;
  const size_t erased = pending_.erase(key);
  TIER_CHECK(erased == 1);
  (void)erased;
}

void Index::MarkCorrupt(const KeyBytes& key) {
  if (!corrupt_.insert(key).second) return;
  corrupt_order_.push_back(key);
  if (corrupt_order_.size() > kMaxCorruptKeys) {
    corrupt_.erase(corrupt_order_.front());
    corrupt_order_.pop_front();
  }
}

bool Index::WasCorrupt(const KeyBytes& key) const {
  return corrupt_.count(key) != 0;
}

std::vector<std::shared_ptr<Entry>> Index::Snapshot() const {
  std::vector<std::shared_ptr<Entry>> out;
  out.reserve(map_.size());
  for (const auto& [key, entry] : map_) out.push_back(entry);
  return out;
}

}  // namespace tier::disk
