// PowerLossEnumeration: every crash state of one operation. The operation runs once on the fault
// filesystem from a durable start; the filesystem's log of it is then replayed to every prefix
// (every point the power could fail), and at each prefix every subset of the operations not yet
// durable is kept (all of them up to 2^10 subsets, a seeded sample of 1,024 beyond), plus torn
// variants of the last writes. Keeping a subset in log order reaches every state any reordering of
// unsynced operations could (README.md, "The model"). Each distinct state is checked as the loop
// checks a cut (checker.h). Operations: the first spill into a directory the open creates, a
// spill, a remove, a quarantine (a restore that finds a damaged chunk) and a recovery pass (an open
// over leftovers, a torn header and a file of the wrong mode); each under durability=fdatasync and
// durability=none.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <set>

#include "checker.h"
#include "derived_checkpoint.h"
#include "disk_test_util.h"
#include "fault_fs.h"
#include "powerloss_util.h"

namespace tier::powerloss::test {
namespace {

using disk::test::Checkpoint;
using disk::test::DerivedCheckpoint;
using disk::test::DerivedKey;

constexpr uint64_t kCapacity = 4u << 20;
constexpr uint64_t kMaxSegmentBytes = 96u << 10;
// Pending operations: all 2^p subsets up to p = this (TIER_POWERLOSS_EXHAUSTIVE, default 10; the
// sanitizer run sets 8), a seeded sample of TIER_POWERLOSS_SAMPLED (default 1,024) beyond.
const size_t kExhaustiveUpTo = EnvOr("TIER_POWERLOSS_EXHAUSTIVE", 10);
const uint64_t kSampledSubsets = EnvOr("TIER_POWERLOSS_SAMPLED", 1024);

// Seeds whose DerivedCheckpoint has data in more than one chunk (64 KiB) and at most ~200 KiB, so
// a spill is a few writes: found once, deterministic.
uint64_t MultiChunkSeed(uint64_t from) {
  for (uint64_t seed = from;; ++seed) {
    const Checkpoint cp = DerivedCheckpoint(seed, kMaxSegmentBytes);
    uint64_t chunks = 0;
    for (const auto& d : cp.data) chunks += (d.size() + (64u << 10) - 1) / (64u << 10);
    if (chunks >= 2 && cp.logical_bytes() < (200u << 10)) return seed;
  }
}

struct Enumerated {
  uint64_t prefixes = 0, states = 0, distinct = 0, torn_found = 0;
  std::string failure;
};

// The recording: a fault filesystem, and the provider on it (threads, one of each worker, so the
// operation's calls come in one order).
class Recorder {
 public:
  explicit Recorder(const std::string& durability) : durability_(durability) {
    std::string error;
    fs_ = FaultFs::Mount(scratch_.Sub("backing"), scratch_.Sub("mnt"), &error);
    if (!fs_) ADD_FAILURE() << error;
  }
  ~Recorder() {
    provider_.reset();  // closes before the filesystem unmounts
    fs_.reset();
  }
  FaultFs& fs() { return *fs_; }
  std::string tier() const { return fs_->mountpoint() + "/tier"; }
  disk::DiskProvider* Open() {
    provider_.reset();  // one instance at a time holds the directory
    disk::test::Options o = disk::test::BaseOptions(tier(), kCapacity);
    o.Set("durability", durability_).Set("compression", "off").Set("chunk_kib", "64");
    o.Set("staging_mib", "1").Set("queue_depth", "1").Set("io_threads", "1");
    o.Set("codec_threads", "1").Set("allow_foreign_fs", "1");
    disk::Seams seams;
    seams.disable_io_uring = true;
    auto opened = disk::test::OpenDisk(host_, "powerloss", o, seams);
    EXPECT_TRUE(opened.ok()) << opened.status().message();
    provider_ = opened.ok() ? opened.take() : nullptr;
    return provider_.get();
  }
  void Close() { provider_.reset(); }
  void Spill(uint64_t seed) {
    Checkpoint cp = DerivedCheckpoint(seed, kMaxSegmentBytes);
    const disk::test::Done d = disk::test::SpillSync(*provider_, DerivedKey(seed), cp);
    EXPECT_EQ(d.status, TIER_OK) << d.message;
  }
  bool synced() const { return durability_ == "fdatasync"; }
  const std::string& scratch() const { return scratch_.path(); }

 private:
  ScratchDir scratch_{"enum"};
  const std::string durability_;
  std::unique_ptr<FaultFs> fs_;
  disk::test::FakeHost host_;
  std::unique_ptr<disk::DiskProvider> provider_;
};

// Two crash states are the same check when their trees and what the client was told agree.
std::string StateKey(const FsImage& image, const std::map<uint64_t, SeedFacts>& facts) {
  std::string key;
  for (const auto& [path, data] : image.Files()) {
    key += path + '\0' + std::to_string(image.nodes.at(image.Resolve(path)).mode) + '\0' +
           std::to_string(std::hash<std::string>()(data)) + '\n';
  }
  for (const auto& [seed, f] : facts) {
    key += std::to_string(seed) + ':' + std::to_string(f.spilled) + std::to_string(f.removed) + ';';
  }
  return key;
}

// The fates to try at one prefix: subsets of the pending operations, and torn last writes.
std::vector<std::map<size_t, Fate>> FatesToTry(const std::vector<Op>& log, size_t cut) {
  const std::vector<size_t> pending = PendingOps(log, cut);
  std::vector<std::map<size_t, Fate>> out;
  auto subset = [&](uint64_t mask) {
    std::map<size_t, Fate> f;
    for (size_t i = 0; i < pending.size(); ++i) {
      f[pending[i]].kind = (mask >> (i % 64)) & 1 ? Fate::kKept : Fate::kDropped;
    }
    out.push_back(std::move(f));
  };
  if (pending.size() <= kExhaustiveUpTo) {
    for (uint64_t mask = 0; mask < (1ull << pending.size()); ++mask) subset(mask);
  } else {
    std::mt19937_64 rng(cut);
    subset(0);
    subset(~0ull);
    for (uint64_t i = 0; i < kSampledSubsets; ++i) subset(rng());
  }
  std::vector<size_t> writes;
  for (size_t i : pending) {
    if (log[i].kind == OpKind::kWrite && !log[i].data.empty()) writes.push_back(i);
  }
  for (size_t w = writes.size() > 3 ? writes.size() - 3 : 0; w < writes.size(); ++w) {
    const Op& op = log[writes[w]];
    for (uint32_t sector : {512u, 4096u}) {
      const uint64_t n = (op.offset + op.data.size() - 1) / sector - op.offset / sector + 1;
      for (int pattern = 0; pattern < 3; ++pattern) {
        Fate torn;
        torn.kind = Fate::kTorn;
        torn.sector_bytes = sector;
        for (uint64_t s = 0; s < n; ++s) {
          torn.sectors.push_back(pattern == 0 ? s == 0 : pattern == 1 ? s != 0 : s % 2 == 0);
        }
        out.push_back({{writes[w], torn}});
      }
    }
  }
  return out;
}

// Replays every prefix of `log` from `base` with every fate FatesToTry gives, checking each
// distinct state with the facts `facts_at(prefix)` returns.
Enumerated Enumerate(const FsImage& base, const std::vector<Op>& log, const std::string& check_dir,
                     const std::function<std::map<uint64_t, SeedFacts>(size_t)>& facts_at) {
  Enumerated e;
  std::set<std::string> seen;
  CheckConfig config;
  config.capacity_bytes = kCapacity;
  config.max_segment_bytes = kMaxSegmentBytes;
  for (size_t cut = 0; cut <= log.size(); ++cut) {
    ++e.prefixes;
    const std::map<uint64_t, SeedFacts> facts = facts_at(cut);
    for (const std::map<size_t, Fate>& fates : FatesToTry(log, cut)) {
      ++e.states;
      const FsImage image = CrashState(base, log, cut, fates);
      if (!seen.insert(StateKey(image, facts)).second) continue;
      ++e.distinct;
      if (std::string why = Materialize(image, check_dir); !why.empty()) {
        e.failure = why;
        return e;
      }
      const CheckResult c = CheckCrashState(check_dir + "/tier", facts, config);
      e.torn_found += c.torn;
      if (!c.failure.empty()) {
        e.failure = "after " + std::to_string(cut) + " of " + std::to_string(log.size()) +
                    " calls (" + DescribeFates(log, cut, fates) + "): " + c.failure +
                    "\nnot durable:\n" + ListPending(log, cut, fates);
        return e;
      }
    }
  }
  return e;
}

size_t MarkAt(const std::vector<Op>& log, const std::string& text) {
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i].kind == OpKind::kMark && log[i].text == text) return i;
  }
  ADD_FAILURE() << "no mark '" << text << "' in the log";
  return log.size();
}

void Report(const std::string& what, const std::string& durability, const Enumerated& e,
            size_t calls) {
  std::printf(
      "enumeration: %s (durability=%s): %zu calls, %llu prefixes, %llu states, %llu "
      "distinct checked, %llu torn checkpoints found DATA_LOSS\n",
      what.c_str(), durability.c_str(), calls, static_cast<unsigned long long>(e.prefixes),
      static_cast<unsigned long long>(e.states), static_cast<unsigned long long>(e.distinct),
      static_cast<unsigned long long>(e.torn_found));
  EXPECT_EQ(e.failure, "") << what;
  EXPECT_GT(e.distinct, 1u) << what << ": one state only: nothing was enumerated";
}

class PowerLossEnumeration : public ::testing::TestWithParam<std::string> {
 protected:
  // Runs `op` between marks on a durable start and enumerates it.
  void Run(const std::string& what, Recorder& r, const std::function<void()>& op,
           const std::function<std::map<uint64_t, SeedFacts>(bool done)>& facts) {
    ASSERT_EQ(r.fs().SyncAll(), "");
    op();
    r.fs().Mark("done");
    const std::vector<Op> log = r.fs().Log();
    const size_t done_at = MarkAt(log, "done");
    const std::string check = r.scratch() + "/check";
    ::mkdir(check.c_str(), 0700);
    const Enumerated e =
        Enumerate(r.fs().Base(), log, check, [&](size_t cut) { return facts(cut > done_at); });
    Report(what, GetParam(), e, log.size() - 1);
  }
};

SeedFacts Whole() {
  SeedFacts f;
  f.began = f.spilled = f.spill_synced = f.confirmed = true;
  return f;
}

TEST_P(PowerLossEnumeration, FirstSpillIntoADirectoryTheOpenCreates) {
  Recorder r(GetParam());
  const uint64_t a = MultiChunkSeed(100);
  Run(
      "open creating the directory, then one spill", r,
      [&] {
        ASSERT_NE(r.Open(), nullptr);
        r.Spill(a);
      },
      [&](bool done) {
        SeedFacts f;
        f.began = true;
        f.spill_synced = r.synced();
        f.spilled = done;
        return std::map<uint64_t, SeedFacts>{{a, f}};
      });
}

TEST_P(PowerLossEnumeration, OneSpill) {
  Recorder r(GetParam());
  const uint64_t a = MultiChunkSeed(200), b = MultiChunkSeed(a + 1);
  ASSERT_NE(r.Open(), nullptr);
  r.Spill(a);
  Run(
      "one spill", r, [&] { r.Spill(b); },
      [&](bool done) {
        SeedFacts f;
        f.began = true;
        f.spill_synced = r.synced();
        f.spilled = done;
        return std::map<uint64_t, SeedFacts>{{a, Whole()}, {b, f}};
      });
}

TEST_P(PowerLossEnumeration, OneRemove) {
  Recorder r(GetParam());
  const uint64_t a = MultiChunkSeed(300), b = MultiChunkSeed(a + 1);
  disk::DiskProvider* p = r.Open();
  ASSERT_NE(p, nullptr);
  r.Spill(a);
  r.Spill(b);
  Run(
      "one remove", r,
      [&] {
        const tier_key key = DerivedKey(b);
        EXPECT_TRUE(p->Remove(&key).ok());
      },
      [&](bool done) {
        SeedFacts f = Whole();
        f.confirmed = false;  // a remove was called: it may be gone
        f.removing = true;
        f.removed = done;
        f.remove_synced = r.synced();
        f.remove_under_fdatasync = r.synced();
        return std::map<uint64_t, SeedFacts>{{a, Whole()}, {b, f}};
      });
}

// Damages one byte of `seed`'s first chunk through the mount (the header still verifies).
void DamageFirstChunk(Recorder& r, uint64_t seed) {
  for (const std::string& name : disk::test::ListDir(r.tier())) {
    if (name.find(disk::Hex({DerivedKey(seed).bytes, TIER_KEY_BYTES})) == std::string::npos)
      continue;
    const int fd = ::open((r.tier() + "/" + name).c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    uint8_t header[128] = {};
    ASSERT_EQ(::pread(fd, header, sizeof(header), 0), 128);
    uint64_t data_offset = 0;
    std::memcpy(&data_offset, header + 96, 8);
    uint8_t byte = 0;
    ASSERT_EQ(::pread(fd, &byte, 1, static_cast<off_t>(data_offset)), 1);
    byte ^= 0x5a;
    ASSERT_EQ(::pwrite(fd, &byte, 1, static_cast<off_t>(data_offset)), 1);
    ::close(fd);
    return;
  }
  ADD_FAILURE() << "no file for seed " << seed;
}

TEST_P(PowerLossEnumeration, OneQuarantine) {
  Recorder r(GetParam());
  const uint64_t a = MultiChunkSeed(400), c = MultiChunkSeed(a + 1);
  ASSERT_NE(r.Open(), nullptr);
  r.Spill(a);
  r.Spill(c);
  r.Close();
  DamageFirstChunk(r, c);
  disk::DiskProvider* p = r.Open();
  ASSERT_NE(p, nullptr);
  Run(
      "one quarantine (a restore finds a damaged chunk)", r,
      [&] {
        Checkpoint cp = DerivedCheckpoint(c, kMaxSegmentBytes);
        disk::test::RestoreTarget target = disk::test::MakeTarget(cp);
        EXPECT_EQ(disk::test::RestoreSync(*p, DerivedKey(c), target).status, TIER_DATA_LOSS);
      },
      [&](bool) {
        SeedFacts damaged;
        damaged.began = true;  // may be visible: only ever DATA_LOSS
        return std::map<uint64_t, SeedFacts>{{a, Whole()}, {c, damaged}};
      });
}

TEST_P(PowerLossEnumeration, OneRecoveryPass) {
  Recorder r(GetParam());
  const uint64_t a = MultiChunkSeed(500), d = MultiChunkSeed(a + 1), m = MultiChunkSeed(d + 1);
  ASSERT_NE(r.Open(), nullptr);
  r.Spill(a);
  r.Spill(d);
  r.Spill(m);
  r.Close();
  // What a crash leaves for recovery: a temporary file, a checkpoint whose header is torn, one
  // whose mode this server never writes.
  std::string d_name, m_name;
  for (const std::string& n : disk::test::ListDir(r.tier())) {
    if (n.find(disk::Hex({DerivedKey(d).bytes, TIER_KEY_BYTES})) != std::string::npos) d_name = n;
    if (n.find(disk::Hex({DerivedKey(m).bytes, TIER_KEY_BYTES})) != std::string::npos) m_name = n;
  }
  ASSERT_FALSE(d_name.empty() || m_name.empty());
  ASSERT_EQ(::truncate((r.tier() + "/" + d_name).c_str(), 512), 0);
  ASSERT_EQ(::chmod((r.tier() + "/" + m_name).c_str(), 0644), 0);
  const int fd = ::open((r.tier() + "/" + d_name + ".7.tmp").c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "leftover", 8), 8);
  ::close(fd);
  Run(
      "one recovery pass (open over a leftover, a torn header, a wrong mode)", r,
      [&] {
        disk::DiskProvider* p = r.Open();
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(p->quarantined_at_open(), 1u);
        EXPECT_EQ(p->not_owned_at_open(), 1u);
        EXPECT_EQ(p->temps_removed_at_open(), 1u);
        r.Close();
      },
      [&](bool) {
        SeedFacts set_aside;
        set_aside.began = true;  // never served whole; the mode-0644 one is never served at all
        return std::map<uint64_t, SeedFacts>{{a, Whole()}, {d, set_aside}, {m, set_aside}};
      });
}

INSTANTIATE_TEST_SUITE_P(Durability, PowerLossEnumeration,
                         ::testing::Values(std::string("fdatasync"), std::string("none")),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace tier::powerloss::test
