// kv_events.h -- KV events: what the tiers hold, published over ZeroMQ in vLLM's KV-event format
// (vllm/distributed/kv_events.py as of vLLM v0.10/v0.11: msgspec array_like structs) for
// KV-aware routers (llm-d's indexer and others).
//
// Wire format (host_shim/README.md "KV events"): the PUB socket sends multipart
// [topic, seq (8 bytes big-endian), payload]; payload is the msgpack of a KVEventBatch,
// [ts (float64 seconds), [event...], data_parallel_rank], each event a tagged array:
//   ["BlockStored", block_hashes, parent_block_hash|nil, token_ids, block_size, lora_id|nil,
//   medium]
//   ["BlockRemoved", block_hashes, medium]
//   ["AllBlocksCleared"]
// The ROUTER replay socket answers [identity, "", start_seq (8 bytes)] with every buffered batch
// of seq >= start_seq as [identity, "", seq, payload], then [identity, "", -1 (8 bytes), ""].
//
// A (block id, medium) is held while at least one checkpoint holding that block is in that tier:
// the publisher keeps those counts and publishes only the changes (0 -> 1 stored, 1 -> 0
// removed). The first batch (seq 0) is AllBlocksCleared: a restarted server's old state is gone.
#pragma once

#include <tier/host/host.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace tier {

// One event of a batch, as vLLM defines it.
struct KvEvent {
  enum Kind : uint8_t { kStored, kRemoved, kAllCleared } kind = kStored;
  std::vector<uint64_t> block_hashes;
  std::optional<uint64_t> parent_block_hash;  // BlockStored only
  uint32_t block_size = 0;                    // BlockStored only (tokens a block)
  std::string medium;                         // not for AllBlocksCleared
};

// The msgpack payload of one KVEventBatch. Pure: any thread.
std::vector<std::byte> EncodeKvEventBatch(double ts_s, std::span<const KvEvent> events,
                                          int data_parallel_rank);

// True when this build has KV events (libzmq and msgpack-c were found).
bool KvEventsAvailable();

class KvEventPublisher {
 public:
  // Binds the PUB (and ROUTER) sockets and starts the publisher thread. UNSUPPORTED in a build
  // without libzmq/msgpack-c; INVALID_ARGUMENT naming an endpoint that does not bind.
  static Result<std::unique_ptr<KvEventPublisher>> Start(const KvEventsOptions& options,
                                                         std::string topic,
                                                         std::string medium_by_tier[3],
                                                         uint32_t block_size);
  // Publishes what is queued (bounded: about a second), then stops and closes the sockets.
  ~KvEventPublisher();
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // A checkpoint of `blocks` entered (or left) tier `tier_slot` (0 Device, 1 Host, 2 Cold).
  // Never blocks: copies the ids into the bounded queue or counts a drop. Scheduler thread.
  void Changed(std::span<const uint64_t> blocks, int tier_slot, bool entered);

  uint64_t queued() const { return queued_.load(std::memory_order_relaxed); }
  uint64_t published() const { return published_.load(std::memory_order_relaxed); }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

  struct Sockets;

 private:
  struct Change {
    std::vector<uint64_t> blocks;
    int tier_slot = 0;
    bool entered = false;
  };
  KvEventPublisher() = default;
  void Run();
  void Apply(const Change& change, std::vector<KvEvent>* out);
  void Send(const std::vector<KvEvent>& events);
  void ServeReplay();

  KvEventsOptions options_;
  std::string topic_;
  std::string medium_[3];
  uint32_t block_size_ = 0;
  std::unique_ptr<Sockets> sockets_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Change> queue_;  // guarded by mu_
  bool stop_ = false;         // guarded by mu_
  std::atomic<uint64_t> queued_{0}, published_{0}, dropped_{0};
  // Publisher thread only.
  std::vector<std::unordered_map<uint64_t, uint32_t>> held_;  // per tier: block id -> holders
  uint64_t next_seq_ = 0;
  std::deque<std::pair<uint64_t, std::vector<std::byte>>> replay_;
  std::thread thread_;
};

}  // namespace tier
