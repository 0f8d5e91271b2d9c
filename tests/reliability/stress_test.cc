// Stress: several threads mix spill, restore, remove, stat, plan_restore and enumerate over a
// small shared key space (so they collide on keys: duplicate spills, removes racing restores,
// re-spills of removed keys) under capacity pressure, for a bounded time (TIER_STRESS_SECONDS,
// default 4). Every restore that answers OK is compared byte for byte; afterwards the index, the
// budget and the files agree, before and after a reopen; a close with operations in flight
// completes each exactly once. LeakSanitizer (the ASan build) checks for leaks at exit; a watchdog
// turns a deadlock into a failure with a message.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>

#include "derived_checkpoint.h"

namespace tier::disk::test {
namespace {

constexpr uint64_t kSeeds = 48;  // shared key space
constexpr uint64_t kMaxSegmentBytes = 384u << 10;

// Aborts the process with a message if not disarmed within `limit` (a hang, not a slow run).
class Watchdog {
 public:
  Watchdog(std::chrono::seconds limit, std::string what)
      : thread_([this, limit, what] {
          std::unique_lock lock(mu_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "watchdog: %s did not finish in %lld s: deadlock\n", what.c_str(),
                         static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

struct Tally {
  std::atomic<uint64_t> spills_ok{0}, spills_no_space{0}, restores_ok{0}, restores_missing{0},
      removes_ok{0}, stats_ok{0}, wrong{0}, unexpected{0};
  std::mutex mu;
  std::string first_problem;
  void Problem(const std::string& what) {
    ++unexpected;
    std::lock_guard lock(mu);
    if (first_problem.empty()) first_problem = what;
  }
};

void Worker(DiskProvider& p, uint64_t thread_seed, std::chrono::steady_clock::time_point until,
            Tally* tally) {
  std::mt19937_64 rng(thread_seed);
  while (std::chrono::steady_clock::now() < until) {
    const uint64_t seed = rng() % kSeeds;
    const tier_key key = DerivedKey(seed);
    switch (rng() % 8) {
      case 0:
      case 1:
      case 2: {
        Checkpoint cp = DerivedCheckpoint(seed, kMaxSegmentBytes);
        const Done d = SpillSync(p, key, cp);
        if (d.status == TIER_OK) {
          ++tally->spills_ok;
        } else if (d.status == TIER_NO_SPACE) {
          ++tally->spills_no_space;
        } else if (d.status != TIER_ALREADY_EXISTS && d.status != TIER_BUSY) {
          tally->Problem("spill: " + d.message);
        }
        break;
      }
      case 3:
      case 4: {
        const std::string bad = RestoreAndCompare(p, seed, kMaxSegmentBytes, rng() % 3);
        if (bad.empty()) {
          ++tally->restores_ok;
        } else if (bad.find("not_found") != std::string::npos) {
          ++tally->restores_missing;  // removed (or never stored) meanwhile
        } else {
          if (bad.find("WRONG") != std::string::npos) ++tally->wrong;
          tally->Problem(bad);
        }
        break;
      }
      case 5: {
        const Status s = p.Remove(&key);
        if (s.ok()) {
          ++tally->removes_ok;
        } else if (s.code() != TIER_NOT_FOUND) {
          tally->Problem("remove: " + s.message());
        }
        break;
      }
      case 6: {
        tier_stat_result st{};
        st.struct_size = sizeof(st);
        tier_segment_info infos[8];
        const Status s = p.Stat(&key, &st, infos, 8);
        if (s.ok()) {
          ++tally->stats_ok;
          const Checkpoint cp = DerivedCheckpoint(seed, kMaxSegmentBytes);
          if (!LayoutMatches(cp, infos, st.segment_count) ||
              st.logical_bytes != cp.logical_bytes()) {
            tally->Problem("stat of seed " + std::to_string(seed) + " describes another layout");
          }
        } else if (s.code() != TIER_NOT_FOUND) {
          tally->Problem("stat: " + s.message());
        }
        break;
      }
      default: {
        tier_plan plan{};
        plan.struct_size = sizeof(plan);
        if (!p.PlanRestore(&key, 1'000'000'000, &plan).ok()) tally->Problem("plan_restore");
        tier_stats stats{};
        stats.struct_size = sizeof(stats);
        if (!p.Stats(&stats).ok()) tally->Problem("stats");
        if (stats.used_bytes > stats.capacity_bytes) tally->Problem("used bytes over capacity");
        int entries = 0;
        if (!p.Enumerate(
                  [](void* u, const tier_entry*) -> int32_t {
                    ++*static_cast<int*>(u);
                    return 0;
                  },
                  &entries)
                 .ok())
          tally->Problem("enumerate");
        break;
      }
    }
  }
}

// Index, budget and files agree, and every stored checkpoint restores exact.
void ExpectConsistent(DiskProvider& p, const std::string& dir, uint64_t seeds,
                      uint64_t max_segment_bytes) {
  tier_stats st{};
  st.struct_size = sizeof(st);
  EXPECT_TRUE(p.Stats(&st).ok());
  EXPECT_EQ(st.inflight_ops, 0u);
  EXPECT_EQ(st.used_bytes, SumCheckpointFileBytes(dir));
  EXPECT_LE(st.used_bytes, st.capacity_bytes);
  uint64_t files = 0, found = 0;
  for (const std::string& n : ListDir(dir)) {
    EXPECT_EQ(n.find(".tmp"), std::string::npos) << n;
    files += n.size() > 5 && n.compare(n.size() - 5, 5, ".ckpt") == 0;
  }
  EXPECT_EQ(st.entries, files);
  for (uint64_t seed = 0; seed < seeds; ++seed) {
    const std::string bad = RestoreAndCompare(p, seed, max_segment_bytes, seed % 2);
    if (bad.find("not_found") != std::string::npos) continue;
    ++found;
    EXPECT_EQ(bad, "");
  }
  EXPECT_EQ(found, st.entries);
  EXPECT_TRUE(ListDir(dir + "/quarantine").empty());
}

uint64_t StressSeconds() {
  const char* v = std::getenv("TIER_STRESS_SECONDS");
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : 4;
}

TEST(Stress, MixedOperationsUnderCapacityPressure) {
  const uint64_t seconds = StressSeconds();
  Watchdog watchdog(std::chrono::seconds(seconds + 240), "Stress.MixedOperations");
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  // Room for about a third of the key space: spills keep running into the budget.
  const Options options = BaseOptions(dir, 12u << 20)
                              .Set("chunk_kib", "128")
                              .Set("staging_mib", "2")
                              .Set("queue_depth", "8")
                              .Set("compression", "auto");
  FakeHost host;
  auto opened = OpenDisk(host, "stress-ns", options);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  DiskProvider& p = *opened.value();
  Tally tally;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 6; ++t) {
    threads.emplace_back(Worker, std::ref(p), 1000 + t, until, &tally);
  }
  for (std::thread& t : threads) t.join();
  std::printf(
      "stress: %llu spills ok, %llu no_space, %llu restores verified, %llu missing, "
      "%llu removes, %llu stats\n",
      static_cast<unsigned long long>(tally.spills_ok.load()),
      static_cast<unsigned long long>(tally.spills_no_space.load()),
      static_cast<unsigned long long>(tally.restores_ok.load()),
      static_cast<unsigned long long>(tally.restores_missing.load()),
      static_cast<unsigned long long>(tally.removes_ok.load()),
      static_cast<unsigned long long>(tally.stats_ok.load()));
  EXPECT_EQ(tally.wrong.load(), 0u) << "a restore reported OK with wrong bytes";
  EXPECT_EQ(tally.unexpected.load(), 0u) << tally.first_problem;
  EXPECT_GT(tally.spills_ok.load(), 0u);
  EXPECT_GT(tally.restores_ok.load(), 0u);
  EXPECT_EQ(host.Value("tier_cold_data_loss_total", "disk,restore"), 0);
  ExpectConsistent(p, dir, kSeeds, kMaxSegmentBytes);
  p.Close();
  FakeHost host2;
  auto reopened = OpenDisk(host2, "stress-ns", options);
  ASSERT_TRUE(reopened.ok()) << reopened.status().message();
  EXPECT_EQ(reopened.value()->quarantined_at_open(), 0u);
  EXPECT_EQ(reopened.value()->temps_removed_at_open(), 0u) << "a close left a temporary file";
  ExpectConsistent(*reopened.value(), dir, kSeeds, kMaxSegmentBytes);
}

TEST(Stress, CloseWithManyOperationsInFlightCompletesEachOnce) {
  Watchdog watchdog(std::chrono::seconds(240), "Stress.CloseWithManyOperationsInFlight");
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  FakeHost host;
  auto opened = OpenDisk(host, "stress-ns", BaseOptions(dir, 256u << 20).Set("chunk_kib", "64"));
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  std::unique_ptr<DiskProvider> p = opened.take();
  constexpr uint64_t kStored = 8, kSpills = 24;
  for (uint64_t s = 0; s < kStored; ++s) {
    Checkpoint cp = DerivedCheckpoint(s, 1u << 20);
    ASSERT_EQ(SpillSync(*p, DerivedKey(s), cp).status, TIER_OK);
  }
  // Restores of every stored checkpoint (three each) and new spills, all in flight at once.
  std::vector<Checkpoint> spills, restores_of;
  std::vector<RestoreTarget> targets;
  for (uint64_t s = 0; s < kSpills; ++s) spills.push_back(DerivedCheckpoint(100 + s, 1u << 20));
  for (uint64_t i = 0; i < 3 * kStored; ++i) {
    restores_of.push_back(DerivedCheckpoint(i % kStored, 1u << 20));
  }
  for (const Checkpoint& cp : restores_of) targets.push_back(MakeTarget(cp, 1));
  std::vector<std::vector<tier_segment>> segs(kSpills);
  std::vector<Waiter> spill_waiters(kSpills), restore_waiters(targets.size());
  std::vector<bool> spill_accepted(kSpills), restore_accepted(targets.size());
  for (uint64_t i = 0; i < std::max<uint64_t>(kSpills, targets.size()); ++i) {
    if (i < kSpills) {
      segs[i] = spills[i].Segments();
      const tier_key key = DerivedKey(100 + i);
      spill_accepted[i] = p->Spill(&key, segs[i].data(), static_cast<uint32_t>(segs[i].size()),
                                   Waiter::Callback, &spill_waiters[i])
                              .ok();
    }
    if (i < targets.size()) {
      const tier_key key = DerivedKey(i % kStored);
      restore_accepted[i] = p->Restore(&key, targets[i].segments.data(),
                                       static_cast<uint32_t>(targets[i].segments.size()),
                                       Waiter::Callback, &restore_waiters[i])
                                .ok();
    }
  }
  p->Close();  // cancels what has not finished, waits for every completion
  for (uint64_t i = 0; i < kSpills; ++i) {
    EXPECT_EQ(spill_waiters[i].calls(), spill_accepted[i] ? 1 : 0) << "spill " << i;
  }
  for (uint64_t i = 0; i < targets.size(); ++i) {
    ASSERT_EQ(restore_waiters[i].calls(), restore_accepted[i] ? 1 : 0) << "restore " << i;
    if (!restore_accepted[i]) continue;
    const Done d = restore_waiters[i].Wait();
    EXPECT_TRUE(d.status == TIER_OK || d.status == TIER_CANCELLED) << d.message;
    if (d.status == TIER_OK) {
      EXPECT_TRUE(targets[i].Equals(restores_of[i])) << "restore " << i;
    }
  }
  p.reset();
  FakeHost host2;
  auto reopened = OpenDisk(host2, "stress-ns", BaseOptions(dir, 256u << 20));
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(reopened.value()->quarantined_at_open(), 0u);
  // Seeds 100.. are the spills that were in flight: each is whole or absent.
  ExpectConsistent(*reopened.value(), dir, 100 + kSpills, 1u << 20);
}

}  // namespace
}  // namespace tier::disk::test
