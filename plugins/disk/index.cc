#include "index.h"

#include <algorithm>

#include "tier/check.h"

namespace tier::disk {

std::shared_ptr<Entry> MakeEntry(const Header& header, std::string file_name,
                                 uint64_t last_used_unix_ns) {
  auto entry = std::make_shared<Entry>();
  entry->key = header.key;
  entry->file_name = std::move(file_name);
  entry->logical_bytes = header.logical_bytes;
  entry->stored_bytes = header.file_bytes;
  entry->manifest = header.manifest;
  entry->created_unix_ns = header.created_unix_ns;
  entry->last_used_unix_ns.store(last_used_unix_ns);
  for (const SegmentRecord& rec : header.segments) {
    entry->segments.push_back({rec.kind, rec.index, rec.logical_bytes});
    for (uint32_t c = 0; c < rec.chunk_count; ++c) {
      if (IsZstdCodec(header.chunks[rec.first_chunk + c].codec)) {
        entry->zstd_logical_bytes += std::min<uint64_t>(
            header.chunk_bytes, rec.logical_bytes - uint64_t{c} * header.chunk_bytes);
      }
    }
  }
  return entry;
}

Index::Index(uint64_t capacity_bytes, uint64_t max_entries)
    : capacity_bytes_(capacity_bytes), max_entries_(max_entries) {}

std::shared_ptr<Entry> Index::Find(const KeyBytes& key) const {
  const auto it = map_.find(key);
  return it == map_.end() ? nullptr : it->second;
}

void Index::Insert(std::shared_ptr<Entry> entry) {
  TIER_CHECK(entry != nullptr && !entry->detached);
  const KeyBytes key = entry->key;
  const uint64_t stored_bytes = entry->stored_bytes;
  // The map first: if it cannot grow (std::bad_alloc), nothing has been counted.
  const bool inserted = map_.emplace(key, std::move(entry)).second;
  TIER_CHECK(inserted);
  used_bytes_ += stored_bytes;
  corrupt_.erase(key);
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
