// reference_provider.cc -- small providers built only to prove that the AbiConformance suite
// catches what it claims to. The correct variant is a persistent provider (one file per checkpoint
// under `dir`, or process memory without it) with checksums, an asynchronous worker pool and a
// bound of kMaxInflightOps; every other variant (REFERENCE_DEFECT_*, chosen at compile time like
// tests/loader/test_provider.c) breaks exactly one rule of abi/tier_provider.h:
//
//   STAT_SEES_INFLIGHT      stat finds a checkpoint whose spill is still in flight
//   ENTRIES_COUNT_INFLIGHT  stats.entries counts spills in flight
//   IGNORES_MAX_INFLIGHT    never refuses BUSY, whatever is in flight
//   NULL_MESSAGE            completions carry a NULL message
//   UNVERIFIED_CHECKSUMS    claims TIER_CAP_CHECKSUMS but restores without verifying
//   NEVER_COMPLETES         accepts restores and never completes them
//   PROBE_SEES_INFLIGHT     probe finds a checkpoint whose spill is still in flight
//   PROBE_MISS_UNWRITTEN    probe leaves found[i] unwritten for a key it does not find
//   PROBE_FIRST_KEY_ONLY    probe looks up keys[0] only (every other found[i] is 0)
//   PROBE_HASH_HEAD_ONLY    probe compares only the head of each hash chain (first 8 key bytes)
//   PROBE_READS_PAST_KEYS   probe refuses key_count 0 only, and reads key_count keys
//   SHARED_PRIVATE_STORE    shared=1 claims TIER_CAP_SHARED over a store of its own instance
//   OPEN_REUSES_INSTANCE    open hands out the instance already open over the same dir, whatever
//                           the namespace
//   ENTRY_TIME_FUTURE       created_unix_ns is an hour ahead
//   LAST_USED_NOT_MOVED     a restore does not move last_used_unix_ns
//   LAST_USED_MOVED_BY_STAT stat moves last_used_unix_ns
//   REMOVE_NOT_PERSISTED    a remove unlinks the file only when a later spill comes
//   STAT_STORED_WITHOUT_OVERHEAD  stat's stored_bytes leaves the header out
//   RESTORE_LOGICAL_IS_STORED     a restore completion's logical_bytes is the stored size
//   ADMITS_BY_LOGICAL       admission weighs logical bytes, accounting charges stored bytes
//   TINY_INLINE_LOCKED      spills of 64 KiB or less complete inside spill(), under its lock
//   RESTORE_OVERRUNS        a restore writes up to 7 bytes past each destination segment
//   RESTORE_WRONG_PAST_32MIB      a restore returns OK with the byte at 32 MiB wrong
//   RESTORE_BROKEN_BY_REMOVE      a remove makes an accepted restore complete NOT_FOUND
//   CLOSE_RETURNS_EARLY     close cancels the queue and returns while workers still run
//
// Built against abi/tier_provider.h (1.1) or, for the cross-version tests, the frozen 1.0 header.
// Options: dir=PATH (persistent), capacity_bytes=N, op_delay_ms=N (each operation completes no
// sooner than this after acceptance: the window in which a spill is in flight; default 20),
// shared=1 (without dir: TIER_CAP_SHARED, every instance of a namespace in this process uses one
// store, as hosts of a fleet would).
// The ABI header first: built against the frozen 1.0 copy, that copy must win over abi/'s.
#include "tier_provider.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "tier/provider/adapter.h"
#include "tier/provider/restore_plan.h"
#include "tier/status.h"
#include "tier_validate.h"

#ifndef REFERENCE_NAME
#define REFERENCE_NAME "reference"
#endif

namespace tier::reference {
namespace {

constexpr uint32_t kMaxInflightOps = 4;
constexpr uint32_t kWorkers = 2;
constexpr char kMagic[8] = {'T', 'I', 'E', 'R', 'R', 'E', 'F', '1'};

using Clock = std::chrono::steady_clock;
using KeyString = std::string;  // the 32 key bytes

KeyString KeyOf(const tier_key& key) {
  return KeyString(reinterpret_cast<const char*>(key.bytes), TIER_KEY_BYTES);
}

// FNV-1a, 64 bits: enough to catch any flipped byte the suite makes.
uint64_t Checksum(const void* data, uint64_t length_bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (uint64_t i = 0; i < length_bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

struct SegmentRecord {
  tier_segment_info info;
  uint64_t checksum;
  uint64_t offset;  // in the file (or the memory copy)
};

// One checkpoint, stored or (complete == false) being spilled.
struct Stored {
  tier_key key{};
  std::vector<SegmentRecord> segments;
  std::vector<tier_segment_info> infos;  // for stat and enumerate
  uint64_t logical_bytes = 0;
  uint64_t stored_bytes = 0;
  std::vector<uint8_t> manifest;
  std::string file;                            // persistent: the file name in dir
  std::shared_ptr<std::vector<uint8_t>> data;  // in memory: the concatenated bytes
  bool complete = false;
  uint64_t created_unix_ns = 0;
  std::atomic<uint64_t> last_used_unix_ns{0};
};

// What the checkpoints of one instance (or, shared, of one namespace) are. Its mutex guards it.
struct CheckpointStore {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<Stored>> index;
  uint64_t used_bytes = 0;
  uint64_t reserved_bytes = 0;
};

std::mutex g_shared_mutex;
// guarded by g_shared_mutex; an object, not a leaked pointer: the library may be loaded and
// unloaded more than once
std::map<std::string, std::weak_ptr<CheckpointStore>> g_shared_stores;

// The namespace's store in this process (shared) or a store of its own.
std::shared_ptr<CheckpointStore> StoreFor(const std::string& ns, bool shared) {
#if defined(REFERENCE_DEFECT_SHARED_PRIVATE_STORE)
  shared = false;  // the defect: claims TIER_CAP_SHARED, keeps a private store
#endif
  if (!shared) return std::make_shared<CheckpointStore>();
  std::lock_guard lock(g_shared_mutex);
  std::shared_ptr<CheckpointStore> store = g_shared_stores[ns].lock();
  if (!store) {
    store = std::make_shared<CheckpointStore>();
    g_shared_stores[ns] = store;
  }
  return store;
}

struct Job {
  bool spill = true;
  tier_key key{};
  std::vector<tier_segment> segments;
  tier_done_fn done = nullptr;
  void* user_data = nullptr;
  Clock::time_point accepted;
  std::shared_ptr<Stored> entry;  // restore: what it reads
  int fd = -1;                    // restore, persistent: opened at acceptance
};

uint64_t UnixNowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

void Append(std::string* out, const void* bytes, size_t n) {
  out->append(static_cast<const char*>(bytes), n);
}

// Header: magic, namespace, key, segments (kind, index, length, checksum), then its own checksum.
std::string EncodeHeader(const std::string& ns, const Stored& s) {
  std::string h(kMagic, sizeof(kMagic));
  const auto ns_bytes = static_cast<uint32_t>(ns.size());
  Append(&h, &ns_bytes, 4);
  h += ns;
  Append(&h, s.key.bytes, TIER_KEY_BYTES);
  const auto count = static_cast<uint32_t>(s.segments.size());
  Append(&h, &count, 4);
  for (const SegmentRecord& r : s.segments) {
    Append(&h, &r.info.kind, 4);
    Append(&h, &r.info.index, 4);
    Append(&h, &r.info.length_bytes, 8);
    Append(&h, &r.checksum, 8);
  }
  const uint64_t sum = Checksum(h.data(), h.size());
  Append(&h, &sum, 8);
  return h;
}

class Reader {
 public:
  Reader(const std::string& bytes) : bytes_(bytes) {}
  bool Take(void* out, size_t n) {
    if (bytes_.size() - at_ < n) return false;
    std::memcpy(out, bytes_.data() + at_, n);
    at_ += n;
    return true;
  }
  size_t at() const { return at_; }

 private:
  const std::string& bytes_;
  size_t at_ = 0;
};

// Parses a header read from the start of a file; false when it does not verify.
bool DecodeHeader(const std::string& bytes, std::string* ns, Stored* s, uint64_t* data_offset) {
  Reader r(bytes);
  char magic[8];
  uint32_t ns_bytes = 0, count = 0;
  if (!r.Take(magic, 8) || std::memcmp(magic, kMagic, 8) != 0 || !r.Take(&ns_bytes, 4))
    return false;
  if (ns_bytes > 4096) return false;
  ns->resize(ns_bytes);
  if (!r.Take(ns->data(), ns_bytes) || !r.Take(s->key.bytes, TIER_KEY_BYTES) || !r.Take(&count, 4))
    return false;
  if (count == 0 || count > TIER_MAX_SEGMENTS) return false;
  for (uint32_t i = 0; i < count; ++i) {
    SegmentRecord rec{};
    if (!r.Take(&rec.info.kind, 4) || !r.Take(&rec.info.index, 4) ||
        !r.Take(&rec.info.length_bytes, 8) || !r.Take(&rec.checksum, 8)) {
      return false;
    }
    s->segments.push_back(rec);
  }
  const uint64_t want = Checksum(bytes.data(), r.at());
  uint64_t got = 0;
  if (!r.Take(&got, 8) || got != want) return false;
  *data_offset = r.at();
  return true;
}

std::string Hex(const tier_key& key) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : key.bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

void Complete(tier_done_fn done, void* user_data, const Status& status, uint64_t logical,
              uint64_t stored, Clock::time_point accepted) {
  tier_completion c{};
  c.struct_size = sizeof(c);
  c.status = status.code();
#if defined(REFERENCE_DEFECT_NULL_MESSAGE)
  c.message = nullptr;
#else
  c.message = status.message().c_str();
#endif
  c.logical_bytes = status.ok() ? logical : 0;
  c.stored_bytes = status.ok() ? stored : 0;
  c.duration_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - accepted).count());
  done(user_data, &c);
}

class Instance {
 public:
  Instance(std::string ns, std::string dir, uint64_t capacity_bytes, int op_delay_ms, bool shared)
      : namespace_(std::move(ns)),
        dir_(std::move(dir)),
        capacity_bytes_(capacity_bytes),
        op_delay_(std::chrono::milliseconds(op_delay_ms)),
        shared_(shared),
        store_(StoreFor(namespace_, shared)) {}

  // Adopts the checkpoints of this namespace under dir_, then starts the workers. Opening thread.
  Status Start() {
    if (!dir_.empty()) TIER_RETURN_IF_ERROR(Scan());
    for (uint32_t i = 0; i < kWorkers; ++i) workers_.emplace_back([this] { Work(); });
    return Status::Ok();
  }

  // Drains the queue with CANCELLED, lets running work finish, joins. Owner thread, once.
  ~Instance() {
    {
      std::lock_guard lock(mu_);
      closing_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  // The CLOSE_RETURNS_EARLY defect's close: completes the queue CANCELLED and returns without
  // waiting for the workers (which keep the instance: it is never freed).
  void Abandon() {
    std::deque<Job> queued;
    {
      std::lock_guard lock(mu_);
      closing_ = true;
      queued.swap(queue_);
      inflight_ops_ -= queued.size();
    }
    cv_.notify_all();
    for (Job& job : queued) {
      if (job.fd >= 0) ::close(job.fd);
      Complete(job.done, job.user_data, Status::Cancelled(std::string(REFERENCE_NAME) + ": closed"),
               0, 0, job.accepted);
    }
    for (std::thread& t : workers_) t.detach();
    static std::mutex kept_mutex;
    static auto* const kept = new std::vector<Instance*>;  // never freed: reachable for LSan
    std::lock_guard lock(kept_mutex);
    kept->push_back(this);
  }

  bool persistent() const { return !dir_.empty(); }
  bool shared() const { return shared_; }

  // The ABI operations as plugins/kit's ProviderAdapter calls them (defined below the class):
  // arguments exactly as the host passed them, the instance never NULL. Open hands out a raw
  // pointer and CloseInstance ends it: the OPEN_REUSES_INSTANCE and CLOSE_RETURNS_EARLY defects
  // decide themselves what an instance's life is.
  static Result<Instance*> Open(const tier_host_services* host, const char* namespace_id,
                                std::span<const tier_option> options);
  static void CloseInstance(Instance* self);
  Status Info(tier_info* out);
  Status Stats(tier_stats* out);
  Status Stat(const tier_key* key, tier_stat_result* out, tier_segment_info* segments,
              uint32_t capacity);
  Status Spill(const tier_key* key, const tier_segment* segments, uint32_t count, tier_done_fn done,
               void* user_data);
  Status Restore(const tier_key* key, const tier_segment* segments, uint32_t count,
                 tier_done_fn done, void* user_data);
  Status Remove(const tier_key* key);
  Status Enumerate(tier_enumerate_fn fn, void* user_data);
  Status PlanRestore(const tier_key* key, uint64_t prefill_ns, tier_plan* out);
#ifdef TIER_PROVIDER_V1_1_SIZE
  Status Probe(const tier_key* keys, uint32_t key_count, uint8_t* found);
#endif

  Status AcceptSpill(const tier_key& key, const tier_segment* segments, uint32_t count,
                     tier_done_fn done, void* user_data) {
    auto entry = std::make_shared<Stored>();
    entry->key = key;
    uint64_t offset = 0;
    for (uint32_t i = 0; i < count; ++i) {
      entry->segments.push_back(
          {{segments[i].kind, segments[i].index, segments[i].length_bytes}, 0, offset});
      entry->infos.push_back(entry->segments.back().info);
      offset += segments[i].length_bytes;
    }
    entry->logical_bytes = offset;
    for (uint32_t i = 0; i < count; ++i) {
      if (segments[i].length_bytes > capacity_bytes_ || entry->logical_bytes > capacity_bytes_) {
        return Status::NoSpace(std::string(REFERENCE_NAME) + ": segment " + std::to_string(i) +
                               " alone exceeds the capacity of " + std::to_string(capacity_bytes_) +
                               " bytes");
      }
    }
    entry->stored_bytes = offset + EncodeHeader(namespace_, *entry).size();
    std::lock_guard lock(mu_);
    if (index_.count(KeyOf(key)) > 0) {
      return Status::AlreadyExists(std::string(REFERENCE_NAME) + ": key stored or being stored");
    }
#if defined(REFERENCE_DEFECT_REMOVE_NOT_PERSISTED)
    for (const std::string& file : pending_unlinks_) ::unlink((dir_ + "/" + file).c_str());
    pending_unlinks_.clear();
#endif
    TIER_RETURN_IF_ERROR(AdmitLocked());
#if defined(REFERENCE_DEFECT_ADMITS_BY_LOGICAL)
    const uint64_t weighed_bytes = entry->logical_bytes;  // the defect: charged stored_bytes below
#else
    const uint64_t weighed_bytes = entry->stored_bytes;
#endif
    if (weighed_bytes >
        capacity_bytes_ - std::min(capacity_bytes_, used_bytes_ + reserved_bytes_)) {
      return Status::NoSpace(std::string(REFERENCE_NAME) + ": " +
                             std::to_string(entry->stored_bytes) + " bytes do not fit");
    }
    entry->created_unix_ns = UnixNowNs();
#if defined(REFERENCE_DEFECT_ENTRY_TIME_FUTURE)
    entry->created_unix_ns += 3600ull * 1000000000ull;  // the defect: an hour ahead
#endif
#if defined(REFERENCE_DEFECT_TINY_INLINE_LOCKED)
    if (entry->logical_bytes <= 65536 && !persistent()) {
      // The defect: a tiny spill is stored and completed at once, the lock still held.
      const Status stored = Store({segments, segments + count}, entry.get());
      entry->complete = stored.ok();
      if (stored.ok()) {
        entry->last_used_unix_ns.store(UnixNowNs());
        index_[KeyOf(key)] = entry;
        used_bytes_ += entry->stored_bytes;
      }
      Complete(done, user_data, stored, entry->logical_bytes, entry->stored_bytes, Clock::now());
      return Status::Ok();
    }
#endif
    reserved_bytes_ += entry->stored_bytes;
    index_[KeyOf(key)] = entry;  // invisible until complete
    QueueLocked(Job{true, key, {segments, segments + count}, done, user_data, Clock::now(), entry});
    return Status::Ok();
  }

  Status AcceptRestore(const tier_key& key, const tier_segment* segments, uint32_t count,
                       tier_done_fn done, void* user_data) {
    std::lock_guard lock(mu_);
    auto it = index_.find(KeyOf(key));
    if (it == index_.end() || !it->second->complete) {
      return Status::NotFound(std::string(REFERENCE_NAME) + ": not stored");
    }
    const std::shared_ptr<Stored> entry = it->second;
    if (count != entry->segments.size()) {  // before the caller's table is read
      return Status::InvalidArgument(std::string(REFERENCE_NAME) + ": " + std::to_string(count) +
                                     " segments given, " + std::to_string(entry->segments.size()) +
                                     " stored");
    }
    tier_error invalid{};
    if (tier_validate_segments(REFERENCE_NAME, segments, count, &invalid) != TIER_OK) {
      return Status::InvalidArgument(invalid.message);
    }
    TIER_RETURN_IF_ERROR(MatchTable(*entry, segments, count));
    TIER_RETURN_IF_ERROR(AdmitLocked());
    Job job{false, key, {segments, segments + count}, done, user_data, Clock::now(), entry};
    if (persistent()) {
      job.fd = ::open((dir_ + "/" + entry->file).c_str(), O_RDONLY | O_CLOEXEC);
      if (job.fd < 0) return Status::FromErrno(errno, "open '" + entry->file + "'");
    }
    QueueLocked(std::move(job));
    return Status::Ok();
  }

  Status RemoveKey(const tier_key& key) {
    std::lock_guard lock(mu_);
    auto it = index_.find(KeyOf(key));
    if (it == index_.end() || !it->second->complete) {
      return Status::NotFound(std::string(REFERENCE_NAME) + ": not stored");
    }
    DropLocked(it);  // an accepted restore keeps reading its open file or its memory copy
    return Status::Ok();
  }

  void Touch(const std::shared_ptr<Stored>& entry) {
    entry->last_used_unix_ns.store(UnixNowNs());
  }

  // found[i] for each key (probe): complete entries only.
  void ProbeKeys(const tier_key* keys, uint32_t count, uint8_t* found) {
    std::lock_guard lock(mu_);
#if defined(REFERENCE_DEFECT_PROBE_HASH_HEAD_ONLY)
    // The defect: a hash table over the first 8 key bytes whose lookup compares the chain's head.
    std::map<uint64_t, KeyString> heads;
    for (const auto& [k, e] : index_) {
      uint64_t h = 0;
      std::memcpy(&h, k.data(), 8);
      if (e->complete && heads.count(h % 61) == 0) heads[h % 61] = k;
    }
#endif
    for (uint32_t i = 0; i < count; ++i) {
#if defined(REFERENCE_DEFECT_PROBE_FIRST_KEY_ONLY)
      if (i > 0) {
        found[i] = 0;  // the defect: only the first key is looked up
        continue;
      }
#endif
      auto it = index_.find(KeyOf(keys[i]));
#if defined(REFERENCE_DEFECT_PROBE_HASH_HEAD_ONLY)
      uint64_t h = 0;
      std::memcpy(&h, keys[i].bytes, 8);
      const bool hit = heads.count(h % 61) > 0 && heads[h % 61] == KeyOf(keys[i]);
      (void)it;
#elif defined(REFERENCE_DEFECT_PROBE_SEES_INFLIGHT)
      const bool hit = it != index_.end();  // the defect: a spill in flight counts
#else
      const bool hit = it != index_.end() && it->second->complete;
#endif
#if defined(REFERENCE_DEFECT_PROBE_MISS_UNWRITTEN)
      if (hit) found[i] = 1;  // the defect: a miss is left as it was
#else
      found[i] = hit ? 1 : 0;
#endif
    }
  }

  // NULL out when not found (or, in the defect, still being spilled).
  std::shared_ptr<Stored> Find(const tier_key& key) {
    std::lock_guard lock(mu_);
    auto it = index_.find(KeyOf(key));
    if (it == index_.end()) return nullptr;
#if defined(REFERENCE_DEFECT_STAT_SEES_INFLIGHT)
    return it->second;
#else
    return it->second->complete ? it->second : nullptr;
#endif
  }

  void FillStats(tier_stats* out) {
    std::lock_guard lock(mu_);
    uint64_t entries = 0;
    for (const auto& entry : index_) {
      const bool in_flight = !entry.second->complete;
#if defined(REFERENCE_DEFECT_ENTRIES_COUNT_INFLIGHT)
      entries += in_flight ? 1 : 1;  // the defect: a spill in flight counts as an entry
#else
      entries += in_flight ? 0 : 1;
#endif
    }
    if (TIER_HAS_FIELD(out, tier_stats, reserved)) out->reserved = 0;
    if (TIER_HAS_FIELD(out, tier_stats, capacity_bytes)) out->capacity_bytes = capacity_bytes_;
    if (TIER_HAS_FIELD(out, tier_stats, used_bytes)) out->used_bytes = used_bytes_;
    if (TIER_HAS_FIELD(out, tier_stats, entries)) out->entries = entries;
    if (TIER_HAS_FIELD(out, tier_stats, inflight_ops)) out->inflight_ops = inflight_ops_;
  }

  std::vector<std::shared_ptr<Stored>> Snapshot() {
    std::lock_guard lock(mu_);
    std::vector<std::shared_ptr<Stored>> out;
    for (const auto& [k, e] : index_) {
      if (e->complete) out.push_back(e);
    }
    return out;
  }

 private:
  Status AdmitLocked() {
#if !defined(REFERENCE_DEFECT_IGNORES_MAX_INFLIGHT)
    if (inflight_ops_ >= kMaxInflightOps) {
      return Status::Busy(std::string(REFERENCE_NAME) + ": " + std::to_string(kMaxInflightOps) +
                          " operations in flight");
    }
#endif
    return Status::Ok();
  }

  void QueueLocked(Job job) {
    ++inflight_ops_;
    queue_.push_back(std::move(job));
    cv_.notify_one();
  }

  // Every given segment is stored with the same length (the counts are equal). Any thread.
  static Status MatchTable(const Stored& entry, const tier_segment* segments, uint32_t count) {
    for (uint32_t i = 0; i < count; ++i) {
      const auto it = std::find_if(entry.segments.begin(), entry.segments.end(), [&](auto& r) {
        return r.info.kind == segments[i].kind && r.info.index == segments[i].index;
      });
      if (it == entry.segments.end() || it->info.length_bytes != segments[i].length_bytes) {
        return Status::InvalidArgument(
            std::string(REFERENCE_NAME) + ": segment kind " + std::to_string(segments[i].kind) +
            " index " + std::to_string(segments[i].index) + " does not match what is stored");
      }
    }
    return Status::Ok();
  }

  template <typename It>
  void DropLocked(It it) {
    used_bytes_ -= it->second->stored_bytes;
#if defined(REFERENCE_DEFECT_REMOVE_NOT_PERSISTED)
    if (persistent()) pending_unlinks_.push_back(it->second->file);  // the defect: unlinked later
#else
    if (persistent()) ::unlink((dir_ + "/" + it->second->file).c_str());
#endif
    index_.erase(it);
  }

  // Worker thread: one job at a time, each no sooner than op_delay_ after its acceptance.
  void Work() {
    for (;;) {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;
      Job job = std::move(queue_.front());
      queue_.pop_front();
      cv_.wait_until(lock, job.accepted + op_delay_, [&] { return closing_; });
      const bool cancelled = closing_;
      lock.unlock();
      if (job.spill) {
        FinishSpill(job, cancelled);
      } else {
        FinishRestore(job, cancelled);
      }
    }
  }

  void FinishSpill(Job& job, bool cancelled) {
    Stored& entry = *job.entry;
    Status status = cancelled ? Status::Cancelled(std::string(REFERENCE_NAME) + ": closed")
                              : Store(job.segments, &entry);
    {
      std::lock_guard lock(mu_);
      reserved_bytes_ -= entry.stored_bytes;
      if (status.ok()) {
        entry.complete = true;
        entry.last_used_unix_ns.store(UnixNowNs());
        used_bytes_ += entry.stored_bytes;
      } else {
        index_.erase(KeyOf(job.key));
      }
      --inflight_ops_;
    }
    Complete(job.done, job.user_data, status, entry.logical_bytes, entry.stored_bytes,
             job.accepted);
  }

  // Checksums the segments and writes them (file or memory). Worker thread.
  Status Store(const std::vector<tier_segment>& segments, Stored* entry) {
    for (size_t i = 0; i < segments.size(); ++i) {
      entry->segments[i].checksum = Checksum(segments[i].data, segments[i].length_bytes);
      if (segments[i].kind == TIER_SEGMENT_MANIFEST) {
        const auto* p = static_cast<const uint8_t*>(segments[i].data);
        entry->manifest.assign(p, p + segments[i].length_bytes);
      }
    }
    std::string bytes = EncodeHeader(namespace_, *entry);
    const uint64_t header_bytes = bytes.size();
    for (auto& r : entry->segments) r.offset += header_bytes;
    for (const tier_segment& s : segments) Append(&bytes, s.data, s.length_bytes);
    if (!persistent()) {
      entry->data = std::make_shared<std::vector<uint8_t>>(bytes.begin(), bytes.end());
      return Status::Ok();
    }
    entry->file = Hex(entry->key) + ".ref";
    const std::string temp = dir_ + "/" + entry->file + ".tmp";
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Status::FromErrno(errno, "create '" + temp + "'");
    const bool written =
        ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
    const int err = errno;
    ::close(fd);
    if (!written || ::rename(temp.c_str(), (dir_ + "/" + entry->file).c_str()) != 0) {
      ::unlink(temp.c_str());
      return Status::FromErrno(written ? errno : err, "write '" + temp + "'");
    }
    return Status::Ok();
  }

  void FinishRestore(Job& job, bool cancelled) {
#if defined(REFERENCE_DEFECT_NEVER_COMPLETES)
    (void)cancelled;
    if (job.fd >= 0) ::close(job.fd);
    return;  // the defect: accepted, never completed
#else
    Status status =
        cancelled ? Status::Cancelled(std::string(REFERENCE_NAME) + ": closed") : Load(job);
#if defined(REFERENCE_DEFECT_RESTORE_BROKEN_BY_REMOVE)
    if (status.ok()) {
      std::lock_guard lock(mu_);
      auto it = index_.find(KeyOf(job.key));
      if (it == index_.end() || it->second != job.entry) {
        status = Status::NotFound(std::string(REFERENCE_NAME) + ": removed during the restore");
      }
    }
#endif
#if !defined(REFERENCE_DEFECT_LAST_USED_NOT_MOVED)
    if (status.ok()) job.entry->last_used_unix_ns.store(UnixNowNs());
#endif
    if (job.fd >= 0) ::close(job.fd);
    {
      std::lock_guard lock(mu_);
      if (status.code() == TIER_DATA_LOSS) {
        auto it = index_.find(KeyOf(job.key));
        if (it != index_.end() && it->second == job.entry) DropLocked(it);
      }
      --inflight_ops_;
    }
#if defined(REFERENCE_DEFECT_RESTORE_LOGICAL_IS_STORED)
    Complete(job.done, job.user_data, status, job.entry->stored_bytes, job.entry->stored_bytes,
             job.accepted);
#else
    Complete(job.done, job.user_data, status, job.entry->logical_bytes, job.entry->stored_bytes,
             job.accepted);
#endif
#endif
  }

  // Reads every segment into the caller's buffers and verifies it. Worker thread.
  Status Load(Job& job) {
    for (const tier_segment& s : job.segments) {
      const SegmentRecord& r = *std::find_if(
          job.entry->segments.begin(), job.entry->segments.end(),
          [&](const SegmentRecord& x) { return x.info.kind == s.kind && x.info.index == s.index; });
      if (s.length_bytes == 0) continue;
      if (job.fd >= 0) {
        const ssize_t n = ::pread(job.fd, s.data, s.length_bytes, static_cast<off_t>(r.offset));
        if (n != static_cast<ssize_t>(s.length_bytes)) {
          return Status::DataLoss(std::string(REFERENCE_NAME) + ": file shorter than its header");
        }
      } else {
        std::memcpy(s.data, job.entry->data->data() + r.offset, s.length_bytes);
      }
#if !defined(REFERENCE_DEFECT_UNVERIFIED_CHECKSUMS)
      if (Checksum(s.data, s.length_bytes) != r.checksum) {
        return Status::DataLoss(std::string(REFERENCE_NAME) + ": segment kind " +
                                std::to_string(s.kind) + " index " + std::to_string(s.index) +
                                " failed its checksum; the checkpoint was dropped");
      }
#endif
#if defined(REFERENCE_DEFECT_RESTORE_OVERRUNS)
      // The defect: copies whole 8-byte words, so up to 7 bytes land past the segment.
      std::memset(static_cast<char*>(s.data) + s.length_bytes, 0, (8 - s.length_bytes % 8) % 8);
#endif
#if defined(REFERENCE_DEFECT_RESTORE_WRONG_PAST_32MIB)
      if (s.length_bytes > (32u << 20)) static_cast<uint8_t*>(s.data)[32u << 20] ^= 1;
#endif
    }
    return Status::Ok();
  }

  // Adopts every file of this namespace whose header verifies. Opening thread.
  Status Scan() {
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) return Status::FromErrno(errno, "open directory '" + dir_ + "'");
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() < 4 || name.compare(name.size() - 4, 4, ".ref") != 0) continue;
      Adopt(name);
    }
    ::closedir(d);
    return Status::Ok();
  }

  void Adopt(const std::string& name) {
    std::FILE* f = std::fopen((dir_ + "/" + name).c_str(), "rb");
    if (f == nullptr) return;
    std::string bytes;
    char buffer[65536];
    for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), f)) > 0;) bytes.append(buffer, n);
    std::fclose(f);
    auto entry = std::make_shared<Stored>();
    std::string ns;
    uint64_t offset = 0;
    if (!DecodeHeader(bytes, &ns, entry.get(), &offset) || ns != namespace_) return;
    for (SegmentRecord& r : entry->segments) {
      r.offset = offset;
      offset += r.info.length_bytes;
      entry->logical_bytes += r.info.length_bytes;
      entry->infos.push_back(r.info);
      if (r.info.kind == TIER_SEGMENT_MANIFEST && r.offset + r.info.length_bytes <= bytes.size()) {
        entry->manifest.assign(bytes.begin() + r.offset,
                               bytes.begin() + r.offset + r.info.length_bytes);
      }
    }
    entry->stored_bytes = bytes.size();
    entry->file = name;
    entry->complete = true;
    struct stat st {};
    if (::stat((dir_ + "/" + name).c_str(), &st) == 0) {
      entry->created_unix_ns = static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000ull +
                               static_cast<uint64_t>(st.st_mtim.tv_nsec);
      entry->last_used_unix_ns.store(entry->created_unix_ns);
    }
    used_bytes_ += entry->stored_bytes;
    index_[KeyOf(entry->key)] = entry;
  }

  const std::string namespace_;
  const std::string dir_;
  const uint64_t capacity_bytes_;
  const Clock::duration op_delay_;
  const bool shared_;
  const std::shared_ptr<CheckpointStore> store_;
  std::mutex& mu_ = store_->mu;  // everything below; never held across a callback
  std::condition_variable cv_;
  std::map<KeyString, std::shared_ptr<Stored>>& index_ = store_->index;
  std::deque<Job> queue_;
  uint64_t inflight_ops_ = 0;
  uint64_t& used_bytes_ = store_->used_bytes;
  uint64_t& reserved_bytes_ = store_->reserved_bytes;
  std::vector<std::string> pending_unlinks_;  // REMOVE_NOT_PERSISTED only
  bool closing_ = false;
  std::vector<std::thread> workers_;
};

#if defined(REFERENCE_DEFECT_OPEN_REUSES_INSTANCE)
std::map<std::string, std::pair<Instance*, int>> g_open_instances;  // guarded by g_shared_mutex
#endif

Status NullInstance() {
  return Status::InvalidArgument(std::string(REFERENCE_NAME) + ": NULL instance");
}

// Parses "N" as a whole number; false on anything else.
bool ParseNumber(const char* text, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  *out = std::strtoull(text, &end, 10);
  return end != text && *end == '\0' && errno == 0 && text[0] != '-';
}

Result<Instance*> Instance::Open(const tier_host_services* /*host*/, const char* namespace_id,
                                 std::span<const tier_option> options) {
  std::string dir;
  uint64_t capacity_bytes = 256ull << 20, delay_ms = 20, shared = 0;
  for (const tier_option& option : options) {
    const std::string key = option.key != nullptr ? option.key : "";
    const char* value = option.value != nullptr ? option.value : "";
    const bool ok = key == "dir"              ? (dir = value, !dir.empty())
                    : key == "capacity_bytes" ? ParseNumber(value, &capacity_bytes)
                    : key == "op_delay_ms"    ? ParseNumber(value, &delay_ms) && delay_ms <= 10000
                    : key == "shared"         ? ParseNumber(value, &shared) && shared <= 1
                                              : false;
    if (!ok) {
      return Status::InvalidArgument(std::string(REFERENCE_NAME) + ": option '" + key +
                                     "' with value '" + value +
                                     "' is not known or malformed (known: dir, "
                                     "capacity_bytes, op_delay_ms <= 10000, shared=0|1)");
    }
  }
  if (shared != 0 && !dir.empty()) {
    return Status::InvalidArgument(std::string(REFERENCE_NAME) +
                                   ": option 'shared' works without 'dir' only");
  }
#if defined(REFERENCE_DEFECT_OPEN_REUSES_INSTANCE)
  {  // the defect: the instance already open over this dir is handed out again, any namespace
    std::lock_guard lock(g_shared_mutex);
    auto it = g_open_instances.find(dir);
    if (it != g_open_instances.end()) {
      ++it->second.second;
      return it->second.first;
    }
  }
#endif
  auto self = std::make_unique<Instance>(namespace_id, dir, capacity_bytes,
                                         static_cast<int>(delay_ms), shared != 0);
  TIER_RETURN_IF_ERROR(self->Start());
#if defined(REFERENCE_DEFECT_OPEN_REUSES_INSTANCE)
  {
    std::lock_guard lock(g_shared_mutex);
    g_open_instances[dir] = {self.get(), 1};
  }
#endif
  return self.release();
}

void Instance::CloseInstance(Instance* self) {
#if defined(REFERENCE_DEFECT_OPEN_REUSES_INSTANCE)
  {
    std::lock_guard lock(g_shared_mutex);
    for (auto it = g_open_instances.begin(); it != g_open_instances.end(); ++it) {
      if (it->second.first != self) continue;
      if (--it->second.second > 0) return;
      g_open_instances.erase(it);
      break;
    }
  }
#endif
#if defined(REFERENCE_DEFECT_CLOSE_RETURNS_EARLY)
  self->Abandon();  // the defect: never waits for (nor frees after) its workers
#else
  delete self;
#endif
}

Status Instance::Info(tier_info* out) {
  if (out == nullptr) return NullInstance();
  if (TIER_HAS_FIELD(out, tier_info, capabilities)) {
    out->capabilities = TIER_CAP_CHECKSUMS | (persistent() ? uint32_t{TIER_CAP_PERSISTENT} : 0u);
#ifdef TIER_PROVIDER_V1_1_SIZE
    if (shared()) out->capabilities |= TIER_CAP_SHARED;
#endif
  }
  if (TIER_HAS_FIELD(out, tier_info, name)) out->name = REFERENCE_NAME;
  if (TIER_HAS_FIELD(out, tier_info, version)) out->version = "1.0.0";
  if (TIER_HAS_FIELD(out, tier_info, io_path)) out->io_path = "posix";
  if (TIER_HAS_FIELD(out, tier_info, buffer_alignment)) out->buffer_alignment = 1;
  if (TIER_HAS_FIELD(out, tier_info, max_inflight_ops)) out->max_inflight_ops = kMaxInflightOps;
  if (TIER_HAS_FIELD(out, tier_info, reserved)) out->reserved = 0;
  return Status::Ok();
}

Status Instance::Stats(tier_stats* out) {
  if (out == nullptr) return NullInstance();
  FillStats(out);
  return Status::Ok();
}

Status Instance::Stat(const tier_key* key, tier_stat_result* out, tier_segment_info* segments,
                      uint32_t capacity) {
  if (key == nullptr || out == nullptr || (capacity > 0 && segments == nullptr)) {
    return Status::InvalidArgument(std::string(REFERENCE_NAME) + ": stat needs key and out");
  }
  const std::shared_ptr<Stored> e = Find(*key);
  if (!e) return Status::NotFound(std::string(REFERENCE_NAME) + ": not stored");
  if (TIER_HAS_FIELD(out, tier_stat_result, segment_count)) {
    out->segment_count = static_cast<uint32_t>(e->infos.size());
  }
  if (TIER_HAS_FIELD(out, tier_stat_result, logical_bytes)) out->logical_bytes = e->logical_bytes;
#if defined(REFERENCE_DEFECT_STAT_STORED_WITHOUT_OVERHEAD)
  if (TIER_HAS_FIELD(out, tier_stat_result, stored_bytes)) out->stored_bytes = e->logical_bytes;
#else
  if (TIER_HAS_FIELD(out, tier_stat_result, stored_bytes)) out->stored_bytes = e->stored_bytes;
#endif
#if defined(REFERENCE_DEFECT_LAST_USED_MOVED_BY_STAT)
  Touch(e);  // the defect: a stat is not a use
#endif
  if (TIER_HAS_FIELD(out, tier_stat_result, estimated_restore_ns)) {
    out->estimated_restore_ns = e->stored_bytes / 2 + 1000;  // ~2 GB/s and a fixed cost
  }
  for (uint32_t i = 0; i < e->infos.size() && i < capacity; ++i) segments[i] = e->infos[i];
  return Status::Ok();
}

Status Instance::Spill(const tier_key* key, const tier_segment* segments, uint32_t count,
                       tier_done_fn done, void* user_data) {
  if (key == nullptr || done == nullptr) {
    return Status::InvalidArgument(std::string(REFERENCE_NAME) +
                                   ": spill needs instance, key and callback");
  }
  tier_error invalid{};
  const tier_status valid = tier_validate_segments(REFERENCE_NAME, segments, count, &invalid);
  if (valid != TIER_OK) return Status(valid, invalid.message);
  return AcceptSpill(*key, segments, count, done, user_data);
}

Status Instance::Restore(const tier_key* key, const tier_segment* segments, uint32_t count,
                         tier_done_fn done, void* user_data) {
  if (key == nullptr || done == nullptr) {
    return Status::InvalidArgument(std::string(REFERENCE_NAME) +
                                   ": restore needs instance, key and callback");
  }
  // The segment table is checked once its count is known to be the stored one.
  return AcceptRestore(*key, segments, count, done, user_data);
}

Status Instance::Remove(const tier_key* key) {
  if (key == nullptr) return NullInstance();
  return RemoveKey(*key);
}

Status Instance::Enumerate(tier_enumerate_fn fn, void* user_data) {
  if (fn == nullptr) return NullInstance();
  for (const std::shared_ptr<Stored>& e : Snapshot()) {
    tier_entry out{};
    out.struct_size = sizeof(out);
    out.segment_count = static_cast<uint32_t>(e->infos.size());
    out.key = e->key;
    out.logical_bytes = e->logical_bytes;
    out.stored_bytes = e->stored_bytes;
    out.segments = e->infos.data();
    const bool has_manifest = std::any_of(e->infos.begin(), e->infos.end(),
                                          [](auto& s) { return s.kind == TIER_SEGMENT_MANIFEST; });
    static const uint8_t kEmpty = 0;
    out.manifest = has_manifest ? (e->manifest.empty() ? &kEmpty : e->manifest.data()) : nullptr;
    out.manifest_bytes = has_manifest ? e->manifest.size() : 0;
#ifdef TIER_ENTRY_V1_0_SIZE  // 1.1: the times
    out.created_unix_ns = e->created_unix_ns;
    out.last_used_unix_ns = e->last_used_unix_ns.load();
#endif
    if (fn(user_data, &out) != 0) break;
  }
  return Status::Ok();
}

Status Instance::PlanRestore(const tier_key* key, uint64_t prefill_ns, tier_plan* out) {
  if (key == nullptr || out == nullptr) return NullInstance();
  const std::shared_ptr<Stored> e = Find(*key);
  // ~2 GB/s and a fixed cost; never busy here: a restore beyond the bound is refused BUSY instead
  provider::WritePlan(e ? provider::PlanStored(e->stored_bytes, e->stored_bytes / 2 + 1000,
                                               prefill_ns, /*busy=*/false)
                        : provider::PlanSkip(TIER_REASON_MISS),
                      out);
  return Status::Ok();
}

#ifdef TIER_PROVIDER_V1_1_SIZE  // 1.1: probe
Status Instance::Probe(const tier_key* keys, uint32_t key_count, uint8_t* found) {
  if (keys == nullptr || found == nullptr) {
    return Status::InvalidArgument(std::string(REFERENCE_NAME) +
                                   ": probe needs instance, keys and found");
  }
#if defined(REFERENCE_DEFECT_PROBE_READS_PAST_KEYS)
  if (key_count == 0) {  // the defect: no upper bound
#else
  if (key_count == 0 || key_count > TIER_PROBE_MAX_KEYS) {
#endif
    return Status::InvalidArgument(std::string(REFERENCE_NAME) + ": probe takes 1 to " +
                                   std::to_string(TIER_PROBE_MAX_KEYS) + " keys, got " +
                                   std::to_string(key_count));
  }
  ProbeKeys(keys, key_count, found);
  return Status::Ok();
}
#endif

}  // namespace
}  // namespace tier::reference

TIER_PROVIDER_ENTRY(tier::reference::Instance, REFERENCE_NAME, "1.0.0")
