// stored_checkpoint.h -- a checkpoint as the in-memory test providers keep it (the scripted
// provider of tests/host, the simulation's SimProvider): its segment table and a copy of every
// segment's bytes, with what stat and enumerate report of it and how a completion reports it.
// Header-only: the scripted provider
// is a plugin that links nothing but the ABI.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "tier_provider.h"

namespace tier::test {

// Orders keys by their bytes (for a std::map of stored checkpoints).
struct KeyLess {
  bool operator()(const tier_key& a, const tier_key& b) const {
    return std::memcmp(a.bytes, b.bytes, TIER_KEY_BYTES) < 0;
  }
};

struct StoredCheckpoint {
  std::vector<tier_segment_info> table;
  std::vector<std::vector<unsigned char>> data;  // data[i]: the bytes of table[i]
  uint64_t bytes = 0;                            // logical bytes (stored as they are)

  // A copy of `count` segments.
  static StoredCheckpoint CopyOf(const tier_segment* segments, size_t count) {
    StoredCheckpoint c;
    for (size_t i = 0; i < count; ++i) {
      const tier_segment& s = segments[i];
      c.table.push_back({s.kind, s.index, s.length_bytes});
      const auto* data = static_cast<const unsigned char*>(s.data);
      c.data.emplace_back(data, data + s.length_bytes);
      c.bytes += s.length_bytes;
    }
    return c;
  }

  // Stat's segment count and bytes (logical = stored), and up to `capacity` of its table
  // into `segments`. The estimated restore time is the provider's to set.
  void FillStat(tier_stat_result* out, tier_segment_info* segments, uint32_t capacity) const {
    out->segment_count = static_cast<uint32_t>(table.size());
    out->logical_bytes = out->stored_bytes = bytes;
    for (uint32_t i = 0; i < capacity && i < table.size(); ++i) segments[i] = table[i];
  }

  // What enumerate reports of it under `key`, an entry of `struct_size` bytes whose pointers
  // point into this checkpoint.
  tier_entry Entry(const tier_key& key, uint32_t struct_size) const {
    tier_entry e{};
    e.struct_size = struct_size;
    e.key = key;
    e.segment_count = static_cast<uint32_t>(table.size());
    e.logical_bytes = e.stored_bytes = bytes;
    e.segments = table.data();
    for (size_t j = 0; j < table.size(); ++j) {
      if (table[j].kind == TIER_SEGMENT_MANIFEST) {
        e.manifest = data[j].data();
        e.manifest_bytes = data[j].size();
      }
    }
    return e;
  }
};

// Calls `done` as the in-memory test providers complete: OK with `bytes` logical and stored, or
// `status` with `failure_message` and no bytes; a duration of 1 us.
inline void CompleteWith(tier_done_fn done, void* user, tier_status status, uint64_t bytes,
                         const char* failure_message) {
  tier_completion c{};
  c.struct_size = sizeof(c);
  c.status = status;
  c.message = status == TIER_OK ? "" : failure_message;
  c.logical_bytes = status == TIER_OK ? bytes : 0;
  c.stored_bytes = status == TIER_OK ? bytes : 0;
  c.duration_ns = 1000;
  done(user, &c);
}

}  // namespace tier::test
