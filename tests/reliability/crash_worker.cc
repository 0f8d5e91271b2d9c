// The crash-loop worker: spills derived checkpoints (one to three in flight at once) and removes
// old ones, forever, writing a journal line around every operation. Each journal line is one
// O_APPEND write(2), so it survives SIGKILL whole or not at all:
//   B <seed>   a spill is about to be submitted      S <seed>   it completed OK
//   F <seed>   it was refused or failed              R <seed>   a remove is about to be called
//   X <seed>   the remove returned OK
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "crash_loop.h"
#include "derived_checkpoint.h"

namespace tier::disk::test {
namespace {

[[noreturn]] void Die(int code, const std::string& why) {
  std::fprintf(stderr, "crash worker: %s\n", why.c_str());
  std::fflush(stderr);
  ::_exit(code);
}

void Journal(int fd, char what, uint64_t seed) {
  char line[40];
  const int n =
      std::snprintf(line, sizeof(line), "%c %llu\n", what, static_cast<unsigned long long>(seed));
  if (::write(fd, line, static_cast<size_t>(n)) != n) Die(4, "journal write failed");
}

}  // namespace

// argv: ROOT SEED_BASE RNG_SEED DURABILITY COMPRESSION MAX_SEGMENT_BYTES
int CrashWorkerMain(int argc, char** argv) {
  if (argc != 6)
    Die(2,
        "usage: --crash-worker ROOT SEED_BASE RNG_SEED DURABILITY COMPRESSION "
        "MAX_SEGMENT_BYTES");
  const std::string root = argv[0];
  uint64_t next_seed = std::stoull(argv[1]);
  std::mt19937_64 rng(std::stoull(argv[2]));
  const std::string durability = argv[3], compression = argv[4];
  const uint64_t max_segment_bytes = std::stoull(argv[5]);

  const int journal = ::open((root + "/journal").c_str(), O_WRONLY | O_APPEND | O_CREAT, 0600);
  if (journal < 0) Die(2, "cannot open the journal");
  FakeHost host;
  auto opened = OpenDisk(host, "crash-loop",
                         BaseOptions(root + "/tier", 48ull << 20)
                             .Set("durability", durability)
                             .Set("compression", compression)
                             .Set("chunk_kib", "256"));
  if (!opened.ok()) Die(2, "open: " + opened.status().message());
  DiskProvider& p = *opened.value();

  std::vector<uint64_t> live;  // seeds stored now, oldest first
  if (!p.Enumerate(
            [](void* user, const tier_entry* e) -> int32_t {
              uint64_t seed = 0;
              if (SeedOfKey(e->key, &seed))
                static_cast<std::vector<uint64_t>*>(user)->push_back(seed);
              return 0;
            },
            &live)
           .ok())
    Die(2, "enumerate failed");

  for (;;) {
    if (!live.empty() && (live.size() >= 10 || rng() % 4 == 0)) {
      const size_t at = rng() % live.size();
      const uint64_t seed = live[at];
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
      Journal(journal, 'R', seed);
      const tier_key key = DerivedKey(seed);
      const Status removed = p.Remove(&key);
      if (!removed.ok()) Die(3, "remove of a stored checkpoint: " + removed.message());
      Journal(journal, 'X', seed);
      continue;
    }
    // One to three spills in flight at once, so a kill can land amid several.
    struct Op {
      uint64_t seed;
      Checkpoint cp;
      std::vector<tier_segment> segments;
      Waiter waiter;
      bool accepted = false;
    };
    std::vector<std::unique_ptr<Op>> batch;
    const int n = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < n; ++i) {
      auto op = std::make_unique<Op>();
      op->seed = next_seed++;
      op->cp = DerivedCheckpoint(op->seed, max_segment_bytes);
      op->segments = op->cp.Segments();
      const tier_key key = DerivedKey(op->seed);
      Journal(journal, 'B', op->seed);
      const Status s =
          p.Spill(&key, op->segments.data(), static_cast<uint32_t>(op->segments.size()),
                  Waiter::Callback, &op->waiter);
      op->accepted = s.ok();
      if (!s.ok()) {
        Journal(journal, 'F', op->seed);
        if (s.code() != TIER_NO_SPACE) Die(3, "spill refused: " + s.message());
      }
      batch.push_back(std::move(op));
    }
    bool full = false;
    for (auto& op : batch) {
      if (!op->accepted) {
        full = true;
        continue;
      }
      const Done d = op->waiter.Wait();
      if (d.status == TIER_OK) {
        Journal(journal, 'S', op->seed);
        live.push_back(op->seed);
      } else {
        Journal(journal, 'F', op->seed);
        if (d.status != TIER_NO_SPACE) Die(3, "spill failed: " + d.message);
        full = true;
      }
    }
    if (full && !live.empty()) {  // make room: remove the oldest
      const uint64_t seed = live.front();
      live.erase(live.begin());
      Journal(journal, 'R', seed);
      const tier_key key = DerivedKey(seed);
      if (!p.Remove(&key).ok()) Die(3, "remove to make room failed");
      Journal(journal, 'X', seed);
    }
  }
}

}  // namespace tier::disk::test
