// index.h -- the in-memory index from full 32-byte key to a stored checkpoint, plus the byte
// budget. Not thread-safe by itself: the provider guards it with its index mutex. Entries are
// shared_ptr so an operation pins what it uses until it completes.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "format.h"
#include "tier_provider.h"

namespace tier::disk {

struct KeyHash {
  size_t operator()(const KeyBytes& key) const {
    size_t h;  // keys are digests: their first bytes are already uniform
    std::memcpy(&h, key.data(), sizeof(h));
    return h;
  }
};

struct Entry {
  KeyBytes key{};
  std::string file_name;
  uint32_t dir = 0;  // which of the provider's directories holds the file
  uint64_t logical_bytes = 0;
  uint64_t stored_bytes = 0;                // the file's length: header, padding and chunks
  uint64_t zstd_logical_bytes = 0;          // logical bytes held in zstd chunks (estimate)
  std::vector<tier_segment_info> segments;  // stored order
  std::vector<uint8_t> manifest;            // verified copy, for enumerate
  uint64_t created_unix_ns = 0;             // the header's creation time
  // The file's modification time: its spill, or the last restore that completed (restores touch
  // it), so it survives a restart. Updated by the restore's runner, read by enumerate.
  std::atomic<uint64_t> last_used_unix_ns{0};
  // Guarded by the provider's index mutex:
  uint32_t pins = 0;      // accepted restores reading the file
  bool detached = false;  // no longer in the index; its bytes are released at the last unpin
};

// The entry of a checkpoint whose header verified, stored in `file_name`. Any thread.
std::shared_ptr<Entry> MakeEntry(const Header& header, std::string file_name,
                                 uint64_t last_used_unix_ns);

class Index {
 public:
  Index(uint64_t capacity_bytes, uint64_t max_entries);

  std::shared_ptr<Entry> Find(const KeyBytes& key) const;
  // Whether `key` is stored and visible (not pending, not detached).
  bool Contains(const KeyBytes& key) const { return map_.count(key) != 0; }
  // Adds a visible entry and charges its stored bytes. The key must be absent.
  void Insert(std::shared_ptr<Entry> entry);
  // Removes the entry from the index; its bytes are released now when unpinned, else at the last
  // Unpin. Returns the entry or nullptr.
  std::shared_ptr<Entry> Detach(const KeyBytes& key);
  void Pin(Entry* entry);
  void Unpin(Entry* entry);

  // Budget for a spill: reserves `worst_case_bytes` against capacity and marks the key as being
  // stored. Fails (false) when the key is stored or pending (*exists), or over capacity.
  bool Reserve(const KeyBytes& key, uint64_t worst_case_bytes, bool* exists, bool* too_many);
  // Ends a reservation (the spill failed, or succeeded and Insert follows).
  void Unreserve(const KeyBytes& key, uint64_t worst_case_bytes);

  // Keys found corrupt recently (bounded), for plan_restore's `corrupt` reason.
  void MarkCorrupt(const KeyBytes& key);
  bool WasCorrupt(const KeyBytes& key) const;

  uint64_t capacity_bytes() const { return capacity_bytes_; }
  uint64_t used_bytes() const { return used_bytes_; }  // visible + detached-but-pinned
  uint64_t reserved_bytes() const { return reserved_bytes_; }
  uint64_t entries() const { return map_.size(); }
  std::vector<std::shared_ptr<Entry>> Snapshot() const;

  static constexpr size_t kMaxCorruptKeys = 1024;

 private:
  const uint64_t capacity_bytes_;
  const uint64_t max_entries_;
  uint64_t used_bytes_ = 0;
  uint64_t reserved_bytes_ = 0;
  std::unordered_map<KeyBytes, std::shared_ptr<Entry>, KeyHash> map_;
  std::unordered_set<KeyBytes, KeyHash> pending_;
  std::deque<KeyBytes> corrupt_order_;
  std::unordered_set<KeyBytes, KeyHash> corrupt_;
};

}  // namespace tier::disk
