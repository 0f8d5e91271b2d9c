// job.h -- internal: one accepted spill or restore and the window of its chunk operations.
// Shared by rados_provider.cc, spill.cc and restore.cc only.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "rados_provider.h"
#include "tier/provider/chunk_window.h"

namespace tier::rados {

// Counts a job's chunk operations not yet finished and keeps the first error (plugins/kit). The
// runner waits on it; workers and librados callbacks only signal it (End is the last touch).
struct RadosProvider::ChunkWindow : provider::ChunkWindow {};

// Where one chunk of a checkpoint comes from (spill) or goes to (restore).
struct ChunkPlace {
  uint32_t segment = 0;      // index into Header::segments
  uint32_t chunk_index = 0;  // within the segment
  uint64_t offset = 0;       // within the segment
  uint32_t logical_bytes = 0;
};

struct RadosProvider::SpillJob {
  KeyBytes key{};
  std::vector<tier_segment> segments;  // the caller's table; data borrowed until completion
  tier_done_fn done = nullptr;
  void* user_data = nullptr;
  uint64_t accepted_ns = 0;
  uint64_t worst_case_bytes = 0;        // reserved at acceptance
  uint64_t fleet_reserved_bytes = 0;    // held in the fleet ledger for this spill
  uint64_t fleet_committed_bytes = 0;   // counted as stored in the fleet ledger (before publish)
  Header header;                        // tables filled as chunks are prepared
  std::vector<ChunkPlace> places;       // by seq
  std::vector<const uint8_t*> sources;  // by header segment: the caller's bytes
  std::vector<uint8_t> submitted;       // by seq: a write was sent (cleanup removes those)
  ChunkWindow window;
  // The spill's lease, shared with refreshes in flight (which the job does not wait for).
  struct Lease {
    std::atomic<uint64_t> ok_ns{0};  // monotonic: submission of the last write that succeeded
    std::atomic<bool> lost{false};   // a refresh found it removed (a sweep judged us dead)
    std::atomic<bool> refreshing{false};
  };
  std::shared_ptr<Lease> lease = std::make_shared<Lease>();
  // By header segment: compression=auto found its first chunk incompressible (written raw).
  std::unique_ptr<std::atomic<bool>[]> segment_raw;
};

struct RadosProvider::RestoreJob {
  KeyBytes key{};
  std::vector<tier_segment> segments;  // the caller's table; data borrowed until completion
  tier_done_fn done = nullptr;
  void* user_data = nullptr;
  uint64_t accepted_ns = 0;
  std::shared_ptr<const Header> header;  // pinned (key, spill id) until completion
  std::vector<uint8_t*> targets;         // by header segment: the caller's buffer
  std::vector<ChunkPlace> places;        // by seq
  ChunkWindow window;
  std::atomic<bool> suspicious{false};  // a chunk missing, short or failing verification
  std::mutex suspicion_mu;
  std::string suspicion;  // the first such finding
  bool retried = false;
  bool fleet_pinned = false;  // a pin in the fleet ledger: no server evicts the key meanwhile
};

// The chunk places of `header`, by seq.
std::vector<ChunkPlace> ChunkPlaces(const Header& header);

}  // namespace tier::rados
