// kv_events.cc -- the KV-event publisher (kv_events.h): encoding, the queue and its thread.
#include "kv_events.h"

#include <tier/check.h>
#include <tier/host/log.h>

#include <array>
#include <chrono>
#include <cstring>

#if TIER_HAVE_KV_EVENTS
#include <msgpack.h>
#include <zmq.h>
#endif

namespace tier {

bool KvEventsAvailable() {
  return TIER_HAVE_KV_EVENTS != 0;
}

#if TIER_HAVE_KV_EVENTS

namespace {

void PackStr(msgpack_packer* pk, const std::string& s) {
  msgpack_pack_str(pk, s.size());
  msgpack_pack_str_body(pk, s.data(), s.size());
}

void PackHashes(msgpack_packer* pk, const std::vector<uint64_t>& hashes) {
  msgpack_pack_array(pk, hashes.size());
  for (uint64_t h : hashes) msgpack_pack_uint64(pk, h);
}

void PackEvent(msgpack_packer* pk, const KvEvent& e) {
  switch (e.kind) {
    case KvEvent::kStored:
      msgpack_pack_array(pk, 7);
      PackStr(pk, "BlockStored");
      PackHashes(pk, e.block_hashes);
      if (e.parent_block_hash) {
        msgpack_pack_uint64(pk, *e.parent_block_hash);
      } else {
        msgpack_pack_nil(pk);
      }
      msgpack_pack_array(pk, 0);  // token_ids: the Host knows block ids, not tokens
      msgpack_pack_uint32(pk, e.block_size);
      msgpack_pack_nil(pk);  // lora_id
      PackStr(pk, e.medium);
      break;
    case KvEvent::kRemoved:
      msgpack_pack_array(pk, 3);
      PackStr(pk, "BlockRemoved");
      PackHashes(pk, e.block_hashes);
      PackStr(pk, e.medium);
      break;
    case KvEvent::kAllCleared:
      msgpack_pack_array(pk, 1);
      PackStr(pk, "AllBlocksCleared");
      break;
  }
}

std::array<std::byte, 8> BigEndian(int64_t v) {
  std::array<std::byte, 8> out{};
  const auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(u >> (56 - 8 * i));
  return out;
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::vector<std::byte> EncodeKvEventBatch(double ts_s, std::span<const KvEvent> events,
                                          int data_parallel_rank) {
  msgpack_sbuffer buffer;
  msgpack_sbuffer_init(&buffer);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &buffer, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, 3);
  msgpack_pack_double(&pk, ts_s);
  msgpack_pack_array(&pk, events.size());
  for (const KvEvent& e : events) PackEvent(&pk, e);
  msgpack_pack_int(&pk, data_parallel_rank);
  const auto* begin = reinterpret_cast<const std::byte*>(buffer.data);
  std::vector<std::byte> out(begin, begin + buffer.size);
  msgpack_sbuffer_destroy(&buffer);
  return out;
}

struct KvEventPublisher::Sockets {
  void* context = nullptr;
  void* pub = nullptr;
  void* replay = nullptr;
  ~Sockets() {
    if (pub != nullptr) zmq_close(pub);
    if (replay != nullptr) zmq_close(replay);
    if (context != nullptr) zmq_ctx_term(context);
  }
};

Result<std::unique_ptr<KvEventPublisher>> KvEventPublisher::Start(const KvEventsOptions& options,
                                                                  std::string topic,
                                                                  std::string medium_by_tier[3],
                                                                  uint32_t block_size) {
  std::unique_ptr<KvEventPublisher> p(new KvEventPublisher());
  p->options_ = options;
  p->topic_ = std::move(topic);
  for (int i = 0; i < 3; ++i) p->medium_[i] = std::move(medium_by_tier[i]);
  p->block_size_ = block_size;
  p->held_.resize(3);
  p->sockets_ = std::make_unique<Sockets>();
  Sockets& s = *p->sockets_;
  s.context = zmq_ctx_new();
  if (s.context == nullptr) return Status::IoError("kv events: zmq_ctx_new failed");
  const int linger_ms = 0;
  s.pub = zmq_socket(s.context, ZMQ_PUB);
  zmq_setsockopt(s.pub, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
  if (zmq_bind(s.pub, options.addr.c_str()) != 0) {
    return Status::InvalidArgument("kv events: cannot bind " + options.addr + ": " +
                                   zmq_strerror(zmq_errno()));
  }
  if (!options.replay_addr.empty()) {
    s.replay = zmq_socket(s.context, ZMQ_ROUTER);
    zmq_setsockopt(s.replay, ZMQ_LINGER, &linger_ms, sizeof linger_ms);
    if (zmq_bind(s.replay, options.replay_addr.c_str()) != 0) {
      return Status::InvalidArgument("kv events: cannot bind replay " + options.replay_addr + ": " +
                                     zmq_strerror(zmq_errno()));
    }
  }
  p->Send({KvEvent{KvEvent::kAllCleared, {}, std::nullopt, 0, ""}});  // seq 0
  p->thread_ = std::thread([raw = p.get()] { raw->Run(); });
  Log(TIER_LOG_INFO,
      "host: kv events on " + options.addr +
          (options.replay_addr.empty() ? "" : " (replay " + options.replay_addr + ")") +
          ", topic " + p->topic_);
  return p;
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void KvEventPublisher::Changed(std::span<const uint64_t> blocks, int tier_slot, bool entered) {
  TIER_CHECK(tier_slot >= 0 && tier_slot < 3);
  queued_.fetch_add(1, std::memory_order_relaxed);
  Change change{std::vector<uint64_t>(blocks.begin(), blocks.end()), tier_slot, entered};
  {
    std::lock_guard<std::mutex> lock(mu_);  // held for a push: the publisher only swaps
    if (queue_.size() >= options_.queue_events) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    queue_.push_back(std::move(change));
  }
  wake_.notify_one();
}

void KvEventPublisher::Run() {
  const auto deadline_after_stop = std::chrono::seconds(1);
  std::chrono::steady_clock::time_point stop_at{};
  for (;;) {
    std::deque<Change> batch;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait_for(lock, std::chrono::milliseconds(20), [&] { return stop_ || !queue_.empty(); });
      batch.swap(queue_);
      stopping = stop_;
    }
    std::vector<KvEvent> events;
    for (const Change& change : batch) Apply(change, &events);
    if (!events.empty()) Send(events);
    published_.fetch_add(batch.size(), std::memory_order_relaxed);
    ServeReplay();
    if (stopping) {
      if (stop_at == std::chrono::steady_clock::time_point{}) {
        stop_at = std::chrono::steady_clock::now() + deadline_after_stop;
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty() || std::chrono::steady_clock::now() > stop_at) return;
    }
  }
}

// Turns one placement change into the (block, medium) transitions it causes: runs of newly held
// blocks become BlockStored (parent: the block before the run), newly released ones BlockRemoved.
void KvEventPublisher::Apply(const Change& change, std::vector<KvEvent>* out) {
  auto& held = held_[change.tier_slot];
  const std::string& medium = medium_[change.tier_slot];
  if (!change.entered) {
    KvEvent removed{KvEvent::kRemoved, {}, std::nullopt, 0, medium};
    for (uint64_t block : change.blocks) {
      auto it = held.find(block);
      if (it == held.end()) continue;  // a dropped store: nothing to take back
      if (--it->second == 0) {
        held.erase(it);
        removed.block_hashes.push_back(block);
      }
    }
    if (!removed.block_hashes.empty()) out->push_back(std::move(removed));
    return;
  }
  KvEvent* run = nullptr;
  for (size_t i = 0; i < change.blocks.size(); ++i) {
    const uint64_t block = change.blocks[i];
    if (held[block]++ != 0) {
      run = nullptr;
      continue;
    }
    if (run == nullptr) {
      out->push_back(KvEvent{KvEvent::kStored,
                             {},
                             i == 0 ? std::nullopt : std::optional<uint64_t>(change.blocks[i - 1]),
                             block_size_,
                             medium});
      run = &out->back();
    }
    run->block_hashes.push_back(block);
  }
}

void KvEventPublisher::Send(const std::vector<KvEvent>& events) {
  std::vector<std::byte> payload =
      EncodeKvEventBatch(WallSeconds(), events, options_.data_parallel_rank);
  const uint64_t seq = next_seq_++;
  const auto seq_bytes = BigEndian(static_cast<int64_t>(seq));
  void* pub = sockets_->pub;
  // PUB never blocks: past its high-water mark a slow subscriber misses batches (replay).
  zmq_send(pub, topic_.data(), topic_.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
  zmq_send(pub, seq_bytes.data(), seq_bytes.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
  zmq_send(pub, payload.data(), payload.size(), ZMQ_DONTWAIT);
  replay_.emplace_back(seq, std::move(payload));
  while (replay_.size() > options_.replay_batches) replay_.pop_front();
}

// Answers every waiting replay request ([identity, "", start_seq]); malformed ones are ignored.
void KvEventPublisher::ServeReplay() {
  void* router = sockets_->replay;
  if (router == nullptr) return;
  for (;;) {
    std::vector<std::vector<std::byte>> frames;
    int more = 0;
    do {
      zmq_msg_t msg;
      zmq_msg_init(&msg);
      if (zmq_msg_recv(&msg, router, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&msg);
        if (frames.empty()) return;
        break;
      }
      const auto* data = static_cast<const std::byte*>(zmq_msg_data(&msg));
      frames.emplace_back(data, data + zmq_msg_size(&msg));
      more = zmq_msg_more(&msg);
      zmq_msg_close(&msg);
    } while (more);
    if (frames.size() != 3 || frames[2].size() != 8) continue;
    uint64_t start = 0;
    for (std::byte b : frames[2]) start = (start << 8) | static_cast<uint8_t>(b);
    const std::vector<std::byte>& id = frames[0];
    auto send4 = [&](const void* seq, size_t seq_size, const void* body, size_t body_size) {
      zmq_send(router, id.data(), id.size(), ZMQ_SNDMORE | ZMQ_DONTWAIT);
      zmq_send(router, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT);
      zmq_send(router, seq, seq_size, ZMQ_SNDMORE | ZMQ_DONTWAIT);
      zmq_send(router, body, body_size, ZMQ_DONTWAIT);
    };
    for (const auto& [seq, payload] : replay_) {
      if (seq < start) continue;
      const auto seq_bytes = BigEndian(static_cast<int64_t>(seq));
      send4(seq_bytes.data(), seq_bytes.size(), payload.data(), payload.size());
    }
    const auto end = BigEndian(-1);
    send4(end.data(), end.size(), "", 0);
  }
}

#else  // !TIER_HAVE_KV_EVENTS

std::vector<std::byte> EncodeKvEventBatch(double, std::span<const KvEvent>, int) {
  return {};
}

struct KvEventPublisher::Sockets {};

Result<std::unique_ptr<KvEventPublisher>> KvEventPublisher::Start(const KvEventsOptions&,
                                                                  std::string, std::string[3],
                                                                  uint32_t) {
  return Status::Unsupported(
      "kv events: this build has no libzmq/msgpack-c (Debian: libzmq3-dev libmsgpack-dev)");
}
KvEventPublisher::~KvEventPublisher() = default;
void KvEventPublisher::Changed(std::span<const uint64_t>, int, bool) {}
void KvEventPublisher::Run() {}
void KvEventPublisher::Apply(const Change&, std::vector<KvEvent>*) {}
void KvEventPublisher::Send(const std::vector<KvEvent>&) {}
void KvEventPublisher::ServeReplay() {}

#endif

}  // namespace tier
