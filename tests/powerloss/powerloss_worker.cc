// The power-loss worker: opens the disk provider on the fault filesystem and spills (one to three
// at once, sometimes with a remove racing them), restores and removes DerivedCheckpoints until it
// is killed, journaling around every operation. Each journal line is one O_APPEND write(2) to a
// file outside the fault filesystem, so it is whole or absent:
//   O 0          the provider opened (recovery done)
//   B <seed> <d> a spill is about to be submitted (d: 1 under durability=fdatasync, else 0)
//   S <seed>     it completed OK              F <seed>   it was refused or failed
//   R <seed> <d> a remove is about to be called
//   X <seed> <d> the remove returned OK       D <seed>   a restore found it DATA_LOSS
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "derived_checkpoint.h"
#include "disk_test_util.h"
#include "powerloss_loop.h"

namespace tier::powerloss::test {
namespace {

using disk::test::Checkpoint;
using disk::test::DerivedCheckpoint;
using disk::test::DerivedKey;
using disk::test::Done;
using disk::test::Waiter;

[[noreturn]] void Die(int code, const std::string& why) {
  std::fprintf(stderr, "powerloss worker: %s\n", why.c_str());
  std::fflush(stderr);
  ::_exit(code);
}

class Worker {
 public:
  Worker(disk::DiskProvider* p, int journal, uint64_t next_seed, uint64_t rng_seed, bool synced,
         uint64_t max_segment_bytes)
      : p_(p),
        journal_(journal),
        next_seed_(next_seed),
        rng_(rng_seed),
        synced_(synced),
        max_segment_bytes_(max_segment_bytes) {}

  [[noreturn]] void Run();

 private:
  void Journal(char what, uint64_t seed, int flag = -1);
  void FindLive();
  void RemoveAt(size_t at);
  void RestoreOne();
  void SpillBatch();

  disk::DiskProvider* p_;
  const int journal_;
  uint64_t next_seed_;
  std::mt19937_64 rng_;
  const bool synced_;
  const uint64_t max_segment_bytes_;
  std::vector<uint64_t> live_;  // seeds stored now, oldest first
};

void Worker::Journal(char what, uint64_t seed, int flag) {
  char line[48];
  const int n = flag < 0 ? std::snprintf(line, sizeof(line), "%c %llu\n", what,
                                         static_cast<unsigned long long>(seed))
                         : std::snprintf(line, sizeof(line), "%c %llu %d\n", what,
                                         static_cast<unsigned long long>(seed), flag);
  if (::write(journal_, line, static_cast<size_t>(n)) != n) Die(4, "journal write failed");
}

void Worker::FindLive() {
  if (!p_->Enumerate(
             [](void* user, const tier_entry* e) -> int32_t {
               uint64_t seed = 0;
               if (disk::test::SeedOfKey(e->key, &seed)) {
                 static_cast<std::vector<uint64_t>*>(user)->push_back(seed);
               }
               return 0;
             },
             &live_)
           .ok()) {
    Die(2, "enumerate failed");
  }
}

void Worker::RemoveAt(size_t at) {
  const uint64_t seed = live_[at];
  live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(at));
  Journal('R', seed, synced_ ? 1 : 0);
  const tier_key key = DerivedKey(seed);
  const Status removed = p_->Remove(&key);
  if (!removed.ok() && removed.code() != TIER_NOT_FOUND) Die(3, "remove: " + removed.message());
  Journal('X', seed, synced_ ? 1 : 0);
}

void Worker::RestoreOne() {
  const size_t at = rng_() % live_.size();
  const uint64_t seed = live_[at];
  const Checkpoint cp = DerivedCheckpoint(seed, max_segment_bytes_);
  disk::test::RestoreTarget target = disk::test::MakeTarget(cp, seed % 5);
  const tier_key key = DerivedKey(seed);
  Waiter w;
  const Status s = p_->Restore(&key, target.segments.data(),
                               static_cast<uint32_t>(target.segments.size()), Waiter::Callback, &w);
  if (!s.ok()) Die(3, "restore refused: " + s.message());
  const Done d = w.Wait();
  if (d.status == TIER_DATA_LOSS) {  // torn by an earlier power loss; the entry is dropped
    Journal('D', seed);
    live_.erase(live_.begin() + static_cast<std::ptrdiff_t>(at));
    return;
  }
  if (d.status != TIER_OK) Die(3, std::string("restore: ") + d.message);
  if (!target.Equals(cp)) Die(5, "restore of seed " + std::to_string(seed) + ": WRONG BYTES");
}

void Worker::SpillBatch() {
  struct Op {
    uint64_t seed;
    Checkpoint cp;
    std::vector<tier_segment> segments;
    Waiter waiter;
    bool accepted = false;
  };
  std::vector<std::unique_ptr<Op>> batch;
  const int n = 1 + static_cast<int>(rng_() % 3);
  for (int i = 0; i < n; ++i) {
    auto op = std::make_unique<Op>();
    op->seed = next_seed_++;
    op->cp = DerivedCheckpoint(op->seed, max_segment_bytes_);
    op->segments = op->cp.Segments();
    const tier_key key = DerivedKey(op->seed);
    Journal('B', op->seed, synced_ ? 1 : 0);
    const Status s =
        p_->Spill(&key, op->segments.data(), static_cast<uint32_t>(op->segments.size()),
                  Waiter::Callback, &op->waiter);
    op->accepted = s.ok();
    if (!s.ok()) {
      Journal('F', op->seed);
      if (s.code() != TIER_NO_SPACE) Die(3, "spill refused: " + s.message());
    }
    batch.push_back(std::move(op));
  }
  // A remove racing the spills: the budget it frees may be what they use.
  if (!live_.empty() && rng_() % 4 == 0) RemoveAt(rng_() % live_.size());
  bool full = false;
  for (auto& op : batch) {
    if (!op->accepted) {
      full = true;
      continue;
    }
    const Done d = op->waiter.Wait();
    if (d.status == TIER_OK) {
      Journal('S', op->seed);
      live_.push_back(op->seed);
    } else {
      Journal('F', op->seed);
      if (d.status != TIER_NO_SPACE) Die(3, "spill failed: " + d.message);
      full = true;
    }
  }
  if (full && !live_.empty()) RemoveAt(0);  // make room: the oldest
}

void Worker::Run() {
  FindLive();
  Journal('O', 0);
  for (;;) {
    const uint64_t r = rng_() % 10;
    if (!live_.empty() && (live_.size() >= 8 || r < 2)) {
      RemoveAt(rng_() % live_.size());
    } else if (!live_.empty() && r < 4) {
      RestoreOne();
    } else {
      SpillBatch();
    }
  }
}

}  // namespace

// argv: DIR JOURNAL SEED_BASE RNG_SEED DURABILITY COMPRESSION BACKEND CAPACITY MAX_SEGMENT_BYTES
int PowerLossWorkerMain(int argc, char** argv) {
  if (argc != 9) {
    Die(2,
        "usage: --powerloss-worker DIR JOURNAL SEED_BASE RNG_SEED none|fdatasync COMPRESSION "
        "io_uring|threads CAPACITY_BYTES MAX_SEGMENT_BYTES");
  }
  const std::string dir = argv[0], durability = argv[4], backend = argv[6];
  const int journal = ::open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (journal < 0) Die(2, "cannot open the journal");
  disk::test::FakeHost host;
  disk::test::Options options = disk::test::BaseOptions(dir, std::stoull(argv[7]));
  options.Set("durability", durability).Set("compression", argv[5]);
  options.Set("chunk_kib", "64").Set("staging_mib", "1").Set("queue_depth", "4");
  options.Set("io_threads", "2").Set("codec_threads", "1").Set("allow_foreign_fs", "1");
  disk::Seams seams;
  seams.disable_io_uring = backend == "threads";
  auto opened = disk::test::OpenDisk(host, "powerloss", options, seams);
  if (!opened.ok()) Die(2, "open: " + opened.status().message());
  const bool uring = opened.value()->io_path().io_uring;
  if (uring != (backend == "io_uring") || opened.value()->io_path().direct) {
    Die(2, std::string("open chose io path ") + opened.value()->io_path().label + ", asked " +
               backend + " buffered");
  }
  Worker worker(opened.value().get(), journal, std::stoull(argv[2]), std::stoull(argv[3]),
                durability == "fdatasync", std::stoull(argv[8]));
  worker.Run();
}

}  // namespace tier::powerloss::test
