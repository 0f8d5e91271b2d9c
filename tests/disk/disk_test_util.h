// disk_test_util.h -- helpers for the DiskPlugin and FaultInjection suites: temporary directories
// on the real disk (O_DIRECT works there) or on /dev/shm, deterministic data, checkpoints, and
// synchronous wrappers around the asynchronous spill/restore.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "disk_provider.h"
#include "fake_host.h"

namespace tier::disk::test {

// A fresh directory under `root` (default: the build tree, a real ext4-like disk), removed with
// its contents at destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& root = DefaultRoot());
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }
  static std::string DefaultRoot();

 private:
  std::string path_;
};

tier_key MakeKey(uint64_t seed);
KeyBytes KeyOf(const tier_key& key);

// Deterministic data (fixed seeds).
std::vector<uint8_t> RandomBytes(uint64_t bytes, uint64_t seed);
// BF16 KV-like: normally distributed values rounded to bfloat16 (compresses a little).
std::vector<uint8_t> Bf16Like(uint64_t bytes, uint64_t seed);
// FP32 recurrent-state-like: small-magnitude floats with a few mantissa bits and many zeros.
std::vector<uint8_t> Fp32StateLike(uint64_t bytes, uint64_t seed);

// A checkpoint: owned buffers and the segment table pointing at them.
struct Checkpoint {
  std::vector<std::vector<uint8_t>> data;
  std::vector<tier_segment_info> infos;
  void Add(uint32_t kind, uint32_t index, std::vector<uint8_t> bytes);
  std::vector<tier_segment> Segments();  // pointing at `data`
  uint64_t logical_bytes() const;
};

// A standard checkpoint: manifest, two KV layers (one with an odd length), a state image part,
// a hidden state; about `scale` MiB in all.
Checkpoint StandardCheckpoint(uint64_t seed, uint64_t scale_mib = 4);

// Buffers shaped like `cp`, filled with a poison byte, for restores. `misalign` shifts each buffer
// by that many bytes from a 4 KiB boundary.
struct RestoreTarget {
  std::vector<std::unique_ptr<uint8_t[]>> storage;
  std::vector<tier_segment> segments;
  bool Equals(const Checkpoint& cp) const;
};
RestoreTarget MakeTarget(const Checkpoint& cp, uint64_t misalign = 0);

struct Done {
  tier_status status = -1;
  std::string message;
  uint64_t logical_bytes = 0, stored_bytes = 0;
  int calls = 0;
};

// Completion sink: counts calls, keeps the last one. The callback never blocks.
class Waiter {
 public:
  static void Callback(void* user, const tier_completion* c);
  Done Wait();  // until at least one call
  int calls();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  Done done_;
};

struct Options {
  std::vector<std::pair<std::string, std::string>> kv;
  Options& Set(const std::string& k, const std::string& v);
  std::vector<tier_option> View() const;
};
Options BaseOptions(const std::string& dir, uint64_t capacity_bytes = 1ull << 30);

Result<std::unique_ptr<DiskProvider>> OpenDisk(FakeHost& host, const std::string& ns,
                                               const Options& options, Seams seams = {});

// Synchronous wrappers (they also check the callback ran exactly once when it was accepted).
Done SpillSync(DiskProvider& p, const tier_key& key, Checkpoint& cp, Status* sync = nullptr);
Done RestoreSync(DiskProvider& p, const tier_key& key, RestoreTarget& target,
                 Status* sync = nullptr);

uint64_t FileBytes(const std::string& path);                // -1 when absent
std::vector<std::string> ListDir(const std::string& path);  // names, sorted
uint64_t SumCheckpointFileBytes(const std::string& dir);    // sum of *.ckpt sizes

}  // namespace tier::disk::test
