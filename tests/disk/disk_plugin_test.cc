// DiskPlugin: behaviour of the disk provider through its C++ core (seams available).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <thread>

#include "codec.h"
#include "disk_test_util.h"
#include "format.h"
#include "test_seams.h"

namespace tier::disk::test {
namespace {

constexpr const char* kNs = "qwen3.8-27b/int8-g64/layout-7";

std::unique_ptr<DiskProvider> MustOpen(FakeHost& host, const Options& o, Seams seams = {},
                                       const std::string& ns = kNs) {
  auto r = OpenDisk(host, ns, o, std::move(seams));
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r.take() : nullptr;
}

Status RemoveKey(DiskProvider& p, uint64_t seed) {
  const tier_key key = MakeKey(seed);
  return p.Remove(&key);
}

tier_plan PlanFor(DiskProvider& p, uint64_t seed, uint64_t predicted_prefill_ns) {
  const tier_key key = MakeKey(seed);
  tier_plan plan{};
  plan.struct_size = sizeof(plan);
  EXPECT_TRUE(p.PlanRestore(&key, predicted_prefill_ns, &plan).ok());
  return plan;
}

tier_stats StatsOf(DiskProvider& p) {
  tier_stats s{};
  s.struct_size = sizeof(s);
  EXPECT_TRUE(p.Stats(&s).ok());
  return s;
}

std::string CheckpointPath(const std::string& dir) {
  for (const std::string& n : ListDir(dir)) {
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".ckpt") == 0) return dir + "/" + n;
  }
  return "";
}

TEST(DiskPlugin, RoundTripAlignedAndUnaligned) {
  TempDir tmp;
  FakeHost host;
  auto p = MustOpen(host, BaseOptions(tmp.Sub("tier")));
  ASSERT_TRUE(p);
  Checkpoint cp = StandardCheckpoint(1);
  cp.Add(TIER_SEGMENT_OTHER, 9, {});  // an empty segment round-trips too
  const tier_key key = MakeKey(1);
  Done spilled = SpillSync(*p, key, cp);
  ASSERT_EQ(spilled.status, TIER_OK) << spilled.message;
  EXPECT_EQ(spilled.logical_bytes, cp.logical_bytes());
  EXPECT_EQ(spilled.stored_bytes, FileBytes(CheckpointPath(tmp.Sub("tier"))));
  for (uint64_t misalign : {0, 1, 512, 4095}) {
    RestoreTarget target = MakeTarget(cp, misalign);
    Done restored = RestoreSync(*p, key, target);
    ASSERT_EQ(restored.status, TIER_OK) << restored.message;
    EXPECT_TRUE(target.Equals(cp)) << "misalign " << misalign;
    EXPECT_EQ(restored.logical_bytes, cp.logical_bytes());
  }
  tier_stat_result st{};
  st.struct_size = sizeof(st);
  std::vector<tier_segment_info> infos(2);
  ASSERT_TRUE(p->Stat(&key, &st, infos.data(), 2).ok());
  EXPECT_EQ(st.segment_count, cp.infos.size());
  EXPECT_EQ(st.logical_bytes, cp.logical_bytes());
  EXPECT_EQ(infos[1].kind, cp.infos[1].kind);
  EXPECT_EQ(infos[1].length_bytes, cp.infos[1].length_bytes);
  EXPECT_GT(st.estimated_restore_ns, 0u);
}

TEST(DiskPlugin, SegmentTableMustMatchExactly) {
  TempDir tmp;
  FakeHost host;
  auto p = MustOpen(host, BaseOptions(tmp.Sub("tier")));
  Checkpoint cp = StandardCheckpoint(2, 1);
  const tier_key key = MakeKey(2);
  ASSERT_EQ(SpillSync(*p, key, cp).status, TIER_OK);
  RestoreTarget shorter = MakeTarget(cp);
  shorter.segments[1].length_bytes -= 1;
  EXPECT_EQ(RestoreSync(*p, key, shorter).status, TIER_INVALID_ARGUMENT);
  RestoreTarget fewer = MakeTarget(cp);
  fewer.segments.pop_back();
  EXPECT_EQ(RestoreSync(*p, key, fewer).status, TIER_INVALID_ARGUMENT);
  RestoreTarget dup = MakeTarget(cp);
  dup.segments[2].index = dup.segments[1].index;
  dup.segments[2].length_bytes = dup.segments[1].length_bytes;
  EXPECT_EQ(RestoreSync(*p, key, dup).status, TIER_INVALID_ARGUMENT);
  RestoreTarget reordered = MakeTarget(cp);  // any order is fine
  std::swap(reordered.segments[0], reordered.segments[3]);
  ASSERT_EQ(RestoreSync(*p, key, reordered).status, TIER_OK);
  std::swap(reordered.segments[0], reordered.segments[3]);
  EXPECT_TRUE(reordered.Equals(cp));
  EXPECT_EQ(RestoreSync(*p, MakeKey(99), reordered).status, TIER_NOT_FOUND);
  EXPECT_EQ(SpillSync(*p, key, cp).status, TIER_ALREADY_EXISTS);
}

TEST(DiskPlugin, RestartPersistence) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  Checkpoint a = StandardCheckpoint(10), b = StandardCheckpoint(11, 2);
  {
    FakeHost host;
    auto p = MustOpen(host, BaseOptions(dir).Set("durability", "fdatasync"));
    ASSERT_EQ(SpillSync(*p, MakeKey(10), a).status, TIER_OK);
    ASSERT_EQ(SpillSync(*p, MakeKey(11), b).status, TIER_OK);
    p->Close();
  }
  FakeHost host;
  auto p = MustOpen(host, BaseOptions(dir));
  EXPECT_EQ(StatsOf(*p).entries, 2u);
  EXPECT_EQ(StatsOf(*p).used_bytes, SumCheckpointFileBytes(dir));
  struct Seen {
    int count = 0;
    bool manifest_ok = true;
    const Checkpoint* a;
    const Checkpoint* b;
  } seen{0, true, &a, &b};
  ASSERT_TRUE(p->Enumerate(
                   [](void* u, const tier_entry* e) -> int32_t {
                     auto* s = static_cast<Seen*>(u);
                     ++s->count;
                     const Checkpoint* cp =
                         std::memcmp(e->key.bytes, MakeKey(10).bytes, TIER_KEY_BYTES) == 0 ? s->a
                                                                                           : s->b;
                     s->manifest_ok &=
                         e->manifest_bytes == cp->data[0].size() &&
                         std::memcmp(e->manifest, cp->data[0].data(), e->manifest_bytes) == 0 &&
                         e->segment_count == cp->infos.size() &&
                         e->logical_bytes == cp->logical_bytes();
                     return 0;
                   },
                   &seen)
                  .ok());
  EXPECT_EQ(seen.count, 2);
  EXPECT_TRUE(seen.manifest_ok);
  RestoreTarget ta = MakeTarget(a), tb = MakeTarget(b, 3);
  ASSERT_EQ(RestoreSync(*p, MakeKey(10), ta).status, TIER_OK);
  ASSERT_EQ(RestoreSync(*p, MakeKey(11), tb).status, TIER_OK);
  EXPECT_TRUE(ta.Equals(a));
  EXPECT_TRUE(tb.Equals(b));
}

// `chunk_kib` is an open option, not a property of the directory: a file keeps the chunk size it
// was written with. Reopened with smaller chunks (so smaller staging buffers), its chunks still
// restore byte-exact through staging (misaligned targets, compressed chunks), never past a buffer.
TEST(DiskPlugin, ChunksLargerThanTodaysChunkSizeRestoreAfterReopen) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  Checkpoint cp = StandardCheckpoint(21, 16);
  {
    FakeHost host;
    auto p = MustOpen(host, BaseOptions(dir).Set("chunk_kib", "4096").Set("compression", "zstd"));
    ASSERT_TRUE(p);
    ASSERT_EQ(SpillSync(*p, MakeKey(21), cp).status, TIER_OK);
    p->Close();
  }
  FakeHost host;
  auto p = MustOpen(host, BaseOptions(dir).Set("chunk_kib", "64").Set("staging_mib", "1"));
  ASSERT_TRUE(p);
  for (uint64_t misalign : {0, 1}) {
    RestoreTarget target = MakeTarget(cp, misalign);
    Done restored = RestoreSync(*p, MakeKey(21), target);
    ASSERT_EQ(restored.status, TIER_OK) << restored.message << " (misalign " << misalign << ")";
    EXPECT_TRUE(target.Equals(cp)) << "misalign " << misalign;
  }
}

// `direct_io` is an open option too: files written through the page cache restore with O_DIRECT
// after a reopen and the other way round, aligned or not.
TEST(DiskPlugin, FilesRestoreAfterReopenWithTheOtherIoPath) {
  for (const char* written_with : {"off", "on"}) {
    TempDir tmp;
    const std::string dir = tmp.Sub("tier");
    Checkpoint cp = StandardCheckpoint(22, 4);
    cp.Add(TIER_SEGMENT_OTHER, 7, RandomBytes(5000, 3));  // not a multiple of 4 KiB
    {
      FakeHost host;
      auto p = MustOpen(host, BaseOptions(dir).Set("direct_io", written_with));
      ASSERT_TRUE(p);
      ASSERT_EQ(SpillSync(*p, MakeKey(22), cp).status, TIER_OK);
      p->Close();
    }
    FakeHost host;
    const bool was_on = std::string(written_with) == "on";
    auto p = MustOpen(host, BaseOptions(dir).Set("direct_io", was_on ? "off" : "on"));
    ASSERT_TRUE(p);
    for (uint64_t misalign : {0, 1}) {
      RestoreTarget target = MakeTarget(cp, misalign);
      Done restored = RestoreSync(*p, MakeKey(22), target);
      ASSERT_EQ(restored.status, TIER_OK)
          << restored.message << " (written with direct_io=" << written_with << ", misalign "
          << misalign << ")";
      EXPECT_TRUE(target.Equals(cp)) << written_with << " " << misalign;
    }
  }
}

TEST(DiskPlugin, BudgetIsExactAndNeverEvicts) {
  TempDir tmp;
  Checkpoint cp = StandardCheckpoint(20, 1);
  uint64_t exact = 0;
  {
    FakeHost host;
    auto p = MustOpen(host, BaseOptions(tmp.Sub("probe")).Set("compression", "off"));
    ASSERT_EQ(SpillSync(*p, MakeKey(20), cp).status, TIER_OK);
    exact = StatsOf(*p).used_bytes;
    EXPECT_EQ(exact, SumCheckpointFileBytes(tmp.Sub("probe")));
  }
  {
    FakeHost host;  // one byte short: refused synchronously, nothing written
    auto p = MustOpen(host, BaseOptions(tmp.Sub("short"), exact - 1).Set("compression", "off"));
    Status sync;
    EXPECT_EQ(SpillSync(*p, MakeKey(20), cp, &sync).status, TIER_NO_SPACE);
    EXPECT_NE(sync.message().find("capacity"), std::string::npos);
    EXPECT_EQ(SumCheckpointFileBytes(tmp.Sub("short")), 0u);
    EXPECT_EQ(host.Value("tier_cold_spills_total", "disk,no_space"), 1);
  }
  FakeHost host;  // exactly enough: accepted; a second one is refused; the first is not evicted
  auto p = MustOpen(host, BaseOptions(tmp.Sub("exact"), exact).Set("compression", "off"));
  ASSERT_EQ(SpillSync(*p, MakeKey(20), cp).status, TIER_OK);
  EXPECT_EQ(StatsOf(*p).used_bytes, exact);
  EXPECT_EQ(StatsOf(*p).capacity_bytes, exact);
  Checkpoint tiny;
  tiny.Add(TIER_SEGMENT_HIDDEN_STATE, 0, RandomBytes(10, 1));
  EXPECT_EQ(SpillSync(*p, MakeKey(21), tiny).status, TIER_NO_SPACE);
  EXPECT_EQ(StatsOf(*p).entries, 1u);
  ASSERT_TRUE(RemoveKey(*p, 20).ok());
  EXPECT_EQ(StatsOf(*p).used_bytes, 0u);
  EXPECT_EQ(SumCheckpointFileBytes(tmp.Sub("exact")), 0u);
  EXPECT_EQ(SpillSync(*p, MakeKey(21), tiny).status, TIER_OK);
  EXPECT_EQ(RemoveKey(*p, 20).code(), TIER_NOT_FOUND);
}

struct CompressionCase {
  const char* mode;
  const char* data;
};

void PrintTo(const CompressionCase& c, std::ostream* os) {
  *os << c.mode << "/" << c.data;
}

class DiskPluginCompression : public ::testing::TestWithParam<CompressionCase> {};

TEST_P(DiskPluginCompression, RoundTripsAndReportsStoredBytes) {
  const CompressionCase c = GetParam();
  TempDir tmp;
  FakeHost host;
  // auto compresses only when decompressing keeps up with reading raw, judged against the raw
  // read bandwidth the open probe measured: a device reading 10 MB/s here, so that the decision
  // does not depend on how fast this machine's disk and CPUs happen to be.
  auto options = BaseOptions(tmp.Sub("tier")).Set("compression", c.mode).Set("chunk_kib", "256");
  Seams seams;
  seams.probe_read_bytes_per_second = 10e6;
  auto p = MustOpen(host, options, seams);
  const uint64_t bytes = (3u << 20) + 777;
  std::vector<uint8_t> data = std::string(c.data) == "random" ? RandomBytes(bytes, 5)
                              : std::string(c.data) == "bf16" ? Bf16Like(bytes, 5)
                                                              : Fp32StateLike(bytes, 5);
  Checkpoint cp;
  cp.Add(TIER_SEGMENT_MAIN_KV, 0, data);
  Done d = SpillSync(*p, MakeKey(30), cp);
  ASSERT_EQ(d.status, TIER_OK) << d.message;
  const uint64_t raw_stored = 4096 + AlignUp(bytes, 4096);
  const bool compressible = std::string(c.data) != "random";
  if (std::string(c.mode) == "off" || !compressible) {
    EXPECT_EQ(d.stored_bytes, raw_stored) << c.mode << "/" << c.data;
  } else {
    EXPECT_LT(d.stored_bytes, raw_stored * 9 / 10) << c.mode << "/" << c.data;
  }
  EXPECT_EQ(host.Value("tier_cold_spill_bytes_total", "disk,stored"),
            static_cast<double>(d.stored_bytes));
  EXPECT_EQ(host.Value("tier_cold_spill_bytes_total", "disk,logical"), static_cast<double>(bytes));
  RestoreTarget t = MakeTarget(cp, 0);
  ASSERT_EQ(RestoreSync(*p, MakeKey(30), t).status, TIER_OK);
  EXPECT_TRUE(t.Equals(cp));
  RestoreTarget u = MakeTarget(cp, 100);
  ASSERT_EQ(RestoreSync(*p, MakeKey(30), u).status, TIER_OK);
  EXPECT_TRUE(u.Equals(cp));
}

// auto weighs decompression on this machine against the device's read rate: a device that reads
// faster than any core decompresses gets raw segments, a slow one compressed segments; each
// segment's decision is counted in tier_cold_codec_decisions_total{decision}. Restores are exact.
TEST(DiskPluginCompressionAuto, StoresRawOnAFastDeviceAndCompressesOnASlowOne) {
  const uint64_t bytes = (2u << 20) + 4096;
  const std::vector<uint8_t> data = Bf16Like(bytes, 9);
  const uint64_t raw_stored = 4096 + AlignUp(bytes, 4096);
  for (const double device_bytes_per_second : {1e15, 10e6}) {
    const bool fast = device_bytes_per_second > 1e12;
    TempDir tmp;
    FakeHost host;
    Seams seams;
    seams.probe_read_bytes_per_second = device_bytes_per_second;
    auto p = MustOpen(host, BaseOptions(tmp.Sub("tier")).Set("chunk_kib", "256"), seams);
    ASSERT_NE(p, nullptr);
    Checkpoint cp;
    cp.Add(TIER_SEGMENT_MAIN_KV, 0, data);
    cp.Add(TIER_SEGMENT_MAIN_KV, 1, data);
    Done d = SpillSync(*p, MakeKey(31), cp);
    ASSERT_EQ(d.status, TIER_OK) << d.message;
    if (fast) {
      EXPECT_EQ(d.stored_bytes, 4096 + 2 * AlignUp(bytes, 4096));
      EXPECT_EQ(
          host.Value("tier_cold_codec_decisions_total", "disk,raw_decompress_slower_than_reads"),
          2.0);
      EXPECT_EQ(host.Value("tier_cold_codec_decisions_total", "disk,compressed"), 0.0);
    } else {
      EXPECT_LT(d.stored_bytes, raw_stored * 2 * 9 / 10);
      EXPECT_EQ(host.Value("tier_cold_codec_decisions_total", "disk,compressed"), 2.0);
      EXPECT_EQ(
          host.Value("tier_cold_codec_decisions_total", "disk,raw_decompress_slower_than_reads"),
          0.0);
    }
    RestoreTarget t = MakeTarget(cp, 0);
    ASSERT_EQ(RestoreSync(*p, MakeKey(31), t).status, TIER_OK);
    EXPECT_TRUE(t.Equals(cp)) << (fast ? "fast" : "slow") << " device";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, DiskPluginCompression,
    ::testing::Values(CompressionCase{"off", "random"}, CompressionCase{"off", "bf16"},
                      CompressionCase{"zstd", "random"}, CompressionCase{"zstd", "bf16"},
                      CompressionCase{"zstd", "fp32"}, CompressionCase{"auto", "random"},
                      CompressionCase{"auto", "bf16"}, CompressionCase{"auto", "fp32"}),
    [](const auto& info) { return std::string(info.param.mode) + "_" + info.param.data; });

// Does this kernel's tmpfs accept O_DIRECT? (tmpfs gained O_DIRECT in Linux 6.6.)
bool TmpfsTakesODirect(const std::string& dir) {
  const std::string path = dir + "/odirect-check";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_DIRECT, 0600);
  if (fd >= 0) ::close(fd);
  ::unlink(path.c_str());
  return fd >= 0;
}

TEST(DiskPlugin, DirectIoProbeOnDevShm) {
  struct stat st {};
  if (::stat("/dev/shm", &st) != 0) GTEST_SKIP() << "/dev/shm is absent on this machine";
  TempDir tmp("/dev/shm");
  const bool tmpfs_direct = TmpfsTakesODirect(tmp.path());
  FakeHost host;
  auto p = MustOpen(host, BaseOptions(tmp.Sub("tier")));
  ASSERT_TRUE(p);
  // The probe must agree with what the filesystem does: buffered where O_DIRECT is refused.
  EXPECT_EQ(p->io_path().direct, tmpfs_direct);
  const std::string label = p->io_path().label;
  EXPECT_EQ(host.Value("tier_cold_io_path", "disk," + label), 1);
  EXPECT_TRUE(host.LogContains("io_path=" + label));
  tier_info info{};
  info.struct_size = sizeof(info);
  ASSERT_TRUE(p->Info(&info).ok());
  EXPECT_STREQ(info.io_path, label.c_str());
  Checkpoint cp = StandardCheckpoint(40, 2);
  ASSERT_EQ(SpillSync(*p, MakeKey(40), cp).status, TIER_OK);
  RestoreTarget t = MakeTarget(cp, 1);
  ASSERT_EQ(RestoreSync(*p, MakeKey(40), t).status, TIER_OK);
  EXPECT_TRUE(t.Equals(cp));
  p.reset();
  FakeHost host2;
  auto forced = OpenDisk(host2, kNs, BaseOptions(tmp.Sub("tier2")).Set("direct_io", "on"));
  if (tmpfs_direct) {
    EXPECT_TRUE(forced.ok()) << forced.status().message();
  } else {
    EXPECT_EQ(forced.status().code(), TIER_UNSUPPORTED);
    EXPECT_NE(forced.status().message().find("direct_io"), std::string::npos);
  }
}

// A FileOps that refuses O_DIRECT opens with EINVAL, as tmpfs (before 6.6), overlayfs and some
// network filesystems do.
class NoDirectFileOps final : public PosixFileOps {
 public:
  int OpenAt(int dirfd, const char* name, int flags, mode_t mode) override {
    if (flags & O_DIRECT) return -EINVAL;
    return PosixFileOps::OpenAt(dirfd, name, flags, mode);
  }
};

TEST(DiskPlugin, DirectIoRefusedFallsBackToBuffered) {
  TempDir tmp;
  for (bool threads : {false, true}) {
    SCOPED_TRACE(threads ? "threads" : "io_uring");
    FakeHost host;
    Seams seams;
    seams.file_ops = std::make_shared<NoDirectFileOps>();
    seams.disable_io_uring = threads;
    auto p = MustOpen(host, BaseOptions(tmp.Sub(threads ? "t" : "u")), seams);
    ASSERT_TRUE(p);
    EXPECT_FALSE(p->io_path().direct);
    EXPECT_STREQ(p->io_path().label,
                 threads ? TIER_IO_PATH_THREADS_BUFFERED : TIER_IO_PATH_IO_URING_BUFFERED);
    EXPECT_EQ(host.Value("tier_cold_io_path", std::string("disk,") + p->io_path().label), 1);
    EXPECT_EQ(host.Value("tier_cold_io_path", "disk,io_uring_direct"), 0);
    EXPECT_TRUE(host.LogContains("fell back to"));
    Checkpoint cp = StandardCheckpoint(42, 2);
    ASSERT_EQ(SpillSync(*p, MakeKey(42), cp).status, TIER_OK);
    RestoreTarget t = MakeTarget(cp, 3);
    ASSERT_EQ(RestoreSync(*p, MakeKey(42), t).status, TIER_OK);
    EXPECT_TRUE(t.Equals(cp));
  }
  FakeHost host;
  Seams seams;
  seams.file_ops = std::make_shared<NoDirectFileOps>();
  auto forced = OpenDisk(host, kNs, BaseOptions(tmp.Sub("on")).Set("direct_io", "on"), seams);
  EXPECT_EQ(forced.status().code(), TIER_UNSUPPORTED);
  EXPECT_NE(forced.status().message().find("direct_io"), std::string::npos);
}

TEST(DiskPlugin, RealDiskUsesDirectIo) {
  TempDir tmp;
  FakeHost host;
  auto p = MustOpen(host, BaseOptions(tmp.Sub("tier")));
  ASSERT_TRUE(p);
  // The build tree is on the machine's real disk, where O_DIRECT works.
  EXPECT_TRUE(p->io_path().direct) << p->io_path().label;
  FakeHost host2;
  Seams seams;
  seams.disable_io_uring = true;  // as under a seccomp profile that blocks io_uring
  auto q = MustOpen(host2, BaseOptions(tmp.Sub("tier2")), seams);
  EXPECT_FALSE(q->io_path().io_uring);
  EXPECT_TRUE(host2.LogContains("io_uring unavailable"));
  Checkpoint cp = StandardCheckpoint(41, 2);
  ASSERT_EQ(SpillSync(*q, MakeKey(41), cp).status, TIER_OK);
  RestoreTarget t = MakeTarget(cp);
  ASSERT_EQ(RestoreSync(*q, MakeKey(41), t).status, TIER_OK);
  EXPECT_TRUE(t.Equals(cp));
}

TEST(DiskPlugin, ManyConcurrentSpillsAndRestores) {
  TempDir tmp;
  FakeHost host;
  auto p =
      MustOpen(host, BaseOptions(tmp.Sub("tier")).Set("staging_mib", "4").Set("chunk_kib", "256"));
  constexpr int kCount = 24;
  std::vector<Checkpoint> cps;
  for (int i = 0; i < kCount; ++i) cps.push_back(StandardCheckpoint(100 + i, 1));
  std::vector<Waiter> spills(kCount);
  std::vector<std::thread> threads;
  std::atomic<int> accepted{0};
  std::vector<std::vector<tier_segment>> segs(kCount);
  for (int i = 0; i < kCount; ++i) segs[i] = cps[i].Segments();
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kCount; i += 4) {
        const tier_key key = MakeKey(100 + i);
        if (p->Spill(&key, segs[i].data(), segs[i].size(), Waiter::Callback, &spills[i]).ok())
          ++accepted;
      }
    });
  }
  for (auto& th : threads) th.join();
  threads.clear();
  ASSERT_EQ(accepted.load(), kCount);
  for (auto& w : spills) ASSERT_EQ(w.Wait().status, TIER_OK) << w.Wait().message;
  std::vector<RestoreTarget> targets;
  for (int i = 0; i < kCount; ++i) targets.push_back(MakeTarget(cps[i], i % 3));
  std::vector<Waiter> restores(kCount);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kCount; i += 4) {
        const tier_key key = MakeKey(100 + i);
        EXPECT_TRUE(p->Restore(&key, targets[i].segments.data(), targets[i].segments.size(),
                               Waiter::Callback, &restores[i])
                        .ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < kCount; ++i) {
    ASSERT_EQ(restores[i].Wait().status, TIER_OK);
    EXPECT_TRUE(targets[i].Equals(cps[i])) << i;
  }
  p->Close();
  for (int i = 0; i < kCount; ++i) {
    EXPECT_EQ(spills[i].calls(), 1);
    EXPECT_EQ(restores[i].calls(), 1);
  }
  EXPECT_EQ(host.Value("tier_cold_restores_total", "disk,ok"), kCount);
  EXPECT_EQ(host.Value("tier_cold_restore_duration_seconds", "disk"), kCount);
}

TEST(DiskPlugin, RemoveRacingRestoreDoesNotBreakIt) {
  TempDir tmp;
  FakeHost host;
  std::shared_ptr<FaultyBackend> gate;
  Seams seams;
  seams.wrap_backend = WrapWith(&gate);
  // Staging for the held restore and the concurrent spill at once.
  auto p = MustOpen(host, BaseOptions(tmp.Sub("tier")).Set("staging_mib", "64"), seams);
  Checkpoint cp = StandardCheckpoint(50, 2);
  const tier_key key = MakeKey(50);
  ASSERT_EQ(SpillSync(*p, key, cp).status, TIER_OK);
  const uint64_t used = StatsOf(*p).used_bytes;
  gate->CloseGate();
  RestoreTarget t = MakeTarget(cp);
  Waiter w;
  ASSERT_TRUE(p->Restore(&key, t.segments.data(), t.segments.size(), Waiter::Callback, &w).ok());
  while (gate->held_reads() == 0) std::this_thread::yield();  // the restore is reading
  ASSERT_TRUE(p->Remove(&key).ok());
  EXPECT_EQ(StatsOf(*p).entries, 0u);
  EXPECT_EQ(StatsOf(*p).used_bytes, used);  // still pinned by the restore
  tier_plan plan{};
  plan.struct_size = sizeof(plan);
  ASSERT_TRUE(p->PlanRestore(&key, UINT64_MAX, &plan).ok());
  EXPECT_EQ(plan.reason, static_cast<tier_reason>(TIER_REASON_MISS));
  // A new spill of the same key while the old file is still being read.
  Checkpoint cp2 = StandardCheckpoint(51, 1);
  ASSERT_EQ(SpillSync(*p, key, cp2).status, TIER_OK);
  gate->OpenGate();
  Done d = w.Wait();
  ASSERT_EQ(d.status, TIER_OK) << d.message;
  EXPECT_TRUE(t.Equals(cp));
  RestoreTarget t2 = MakeTarget(cp2);
  ASSERT_EQ(RestoreSync(*p, key, t2).status, TIER_OK);
  EXPECT_TRUE(t2.Equals(cp2));
  ASSERT_TRUE(p->Remove(&key).ok());
  EXPECT_EQ(StatsOf(*p).used_bytes, 0u);
}

TEST(DiskPlugin, CloseCancelsInflightExactlyOnce) {
  TempDir tmp;
  FakeHost host;
  std::shared_ptr<FaultyBackend> gate;
  Seams seams;
  seams.wrap_backend = WrapWith(&gate);
  auto p = MustOpen(host, BaseOptions(tmp.Sub("tier")), seams);
  Checkpoint cp = StandardCheckpoint(52, 2);
  const tier_key key = MakeKey(52);
  ASSERT_EQ(SpillSync(*p, key, cp).status, TIER_OK);
  gate->CloseGate();
  RestoreTarget t = MakeTarget(cp);
  Waiter w;
  ASSERT_TRUE(p->Restore(&key, t.segments.data(), t.segments.size(), Waiter::Callback, &w).ok());
  while (gate->held_reads() == 0) std::this_thread::yield();
  std::thread opener([&] {
    // Close waits for the held read; release it once close has begun cancelling.
    while (w.calls() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      gate->OpenGate();
    }
  });
  p->Close();
  opener.join();
  Done d = w.Wait();
  EXPECT_TRUE(d.status == TIER_CANCELLED || d.status == TIER_OK) << d.message;
  EXPECT_EQ(w.calls(), 1);
  // Whatever happened, the checkpoint is still there for the next process.
  FakeHost host2;
  auto q = MustOpen(host2, BaseOptions(tmp.Sub("tier")));
  RestoreTarget t2 = MakeTarget(cp);
  ASSERT_EQ(RestoreSync(*q, key, t2).status, TIER_OK);
  EXPECT_TRUE(t2.Equals(cp));
}

// Byte ranges of each region of a checkpoint file, from its own header.
struct Region {
  std::string name;
  uint64_t offset;
  uint64_t length;
};

std::vector<Region> Regions(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  Header h;
  ParseError e;
  EXPECT_TRUE(ParseHeader(bytes, &h, &e)) << e.message;
  const uint64_t ns = AlignUp(h.namespace_id.size(), 8);
  const uint64_t seg_at = kFixedHeaderBytes + ns;
  const uint64_t chunk_at = seg_at + h.segments.size() * kSegmentRecordBytes;
  const uint64_t manifest_at = chunk_at + h.chunks.size() * kChunkRecordBytes;
  std::vector<Region> out = {{"fixed header (key)", 40, 1},
                             {"fixed header (lengths)", 90, 1},
                             {"namespace", kFixedHeaderBytes, h.namespace_id.size()},
                             {"segment table", seg_at, h.segments.size() * kSegmentRecordBytes},
                             {"chunk table", chunk_at, h.chunks.size() * kChunkRecordBytes},
                             {"manifest", manifest_at, h.manifest.size()}};
  for (const SegmentRecord& s : h.segments) {
    for (uint32_t c = 0; c < s.chunk_count; ++c) {
      const ChunkRecord& ch = h.chunks[s.first_chunk + c];
      out.push_back({"segment kind " + std::to_string(s.kind) + " index " +
                         std::to_string(s.index) + " chunk " + std::to_string(c),
                     ch.file_offset, ch.stored_bytes});
    }
  }
  return out;
}

void FlipByte(const std::string& path, uint64_t offset) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, offset), 1);
  b ^= 0x40;
  ASSERT_EQ(::pwrite(fd, &b, 1, offset), 1);
  ::close(fd);
}

TEST(DiskPlugin, FlippedByteInEveryRegionIsDataLossNeverWrongBytes) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  Checkpoint cp = StandardCheckpoint(60, 1);
  const tier_key key = MakeKey(60);
  std::string path;
  std::vector<Region> regions;
  {
    FakeHost host;
    auto p = MustOpen(host, BaseOptions(dir).Set("chunk_kib", "256"));
    ASSERT_EQ(SpillSync(*p, key, cp).status, TIER_OK);
    path = CheckpointPath(dir);
    regions = Regions(path);
  }
  ASSERT_GT(regions.size(), 8u);
  const std::string pristine = tmp.Sub("pristine");
  ASSERT_EQ(::link(path.c_str(), pristine.c_str()), 0);  // keep a copy: we rewrite `path` below
  std::vector<uint8_t> good;
  {
    std::ifstream in(pristine, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    ::unlink(pristine.c_str());
  }
  auto restore_file = [&] {  // as the provider wrote it: the bytes, and mode 0600
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(good.data()), good.size());
    }
    ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  };
  int region_index = 0;
  for (const Region& r : regions) {
    if (r.length == 0) continue;
    SCOPED_TRACE(r.name);
    const uint64_t offset = r.offset + (r.length * 7 / 13);
    // (a) While the provider is open: the restore re-reads and verifies everything.
    {
      restore_file();
      FakeHost host;
      auto p = MustOpen(host, BaseOptions(dir));
      ASSERT_EQ(StatsOf(*p).entries, 1u);
      FlipByte(path, offset);
      RestoreTarget t = MakeTarget(cp, region_index % 2);
      Done d = RestoreSync(*p, key, t);
      EXPECT_EQ(d.status, TIER_DATA_LOSS) << d.message;
      EXPECT_EQ(StatsOf(*p).entries, 0u);
      EXPECT_EQ(StatsOf(*p).used_bytes, 0u);
      EXPECT_EQ(host.Value("tier_cold_data_loss_total", "disk,restore"), 1);
      tier_plan plan{};
      plan.struct_size = sizeof(plan);
      ASSERT_TRUE(p->PlanRestore(&key, UINT64_MAX, &plan).ok());
      EXPECT_EQ(plan.decision, static_cast<tier_decision>(TIER_DECISION_SKIP_TO_ROOT));
      EXPECT_EQ(plan.reason, static_cast<tier_reason>(TIER_REASON_CORRUPT));
      EXPECT_EQ(FileBytes(path), static_cast<uint64_t>(-1));  // moved aside
      EXPECT_FALSE(ListDir(dir + "/quarantine").empty());
      EXPECT_EQ(RestoreSync(*p, key, t).status, TIER_NOT_FOUND);
    }
    // (b) At the next open: header regions are quarantined; data regions are found on restore.
    {
      restore_file();
      FlipByte(path, offset);
      FakeHost host;
      auto p = MustOpen(host, BaseOptions(dir));
      RestoreTarget t = MakeTarget(cp);
      Done d = RestoreSync(*p, key, t);
      if (StatsOf(*p).entries == 0 && d.status == TIER_NOT_FOUND) {
        EXPECT_EQ(host.Value("tier_cold_data_loss_total", "disk,open"), 1);
        EXPECT_EQ(p->quarantined_at_open(), 1u);
        EXPECT_TRUE(host.LogContains("is corrupt"));
      } else {
        EXPECT_EQ(d.status, TIER_DATA_LOSS) << d.message;
      }
      EXPECT_NE(d.status, TIER_OK);
    }
    ++region_index;
  }
  // Truncation: the file loses its last block.
  restore_file();
  ASSERT_EQ(::truncate(path.c_str(), good.size() - 4096), 0);
  FakeHost host;
  auto p = MustOpen(host, BaseOptions(dir));
  EXPECT_EQ(StatsOf(*p).entries, 0u);
  EXPECT_EQ(p->quarantined_at_open(), 1u);
}

TEST(DiskPlugin, SecondInstanceIsLockedOut) {
  TempDir tmp;
  FakeHost host;
  auto p = MustOpen(host, BaseOptions(tmp.Sub("tier")));
  FakeHost host2;
  auto second = OpenDisk(host2, kNs, BaseOptions(tmp.Sub("tier")));
  EXPECT_EQ(second.status().code(), TIER_BUSY);
  EXPECT_NE(second.status().message().find("pid=" + std::to_string(::getpid())), std::string::npos)
      << second.status().message();
  p.reset();
  auto third = OpenDisk(host2, kNs, BaseOptions(tmp.Sub("tier")));
  EXPECT_TRUE(third.ok()) << third.status().message();
}

TEST(DiskPlugin, PermissionsAndSymlinkRefusal) {
  TempDir tmp;
  const std::string dir = tmp.Sub("a/b/tier");
  {
    FakeHost host;
    auto p = MustOpen(host, BaseOptions(dir));
    Checkpoint cp = StandardCheckpoint(70, 1);
    ASSERT_EQ(SpillSync(*p, MakeKey(70), cp).status, TIER_OK);
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700u);
    ASSERT_EQ(::stat(CheckpointPath(dir).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    ASSERT_EQ(::stat((dir + "/LOCK").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
  }
  const std::string link = tmp.Sub("link");
  ASSERT_EQ(::symlink(dir.c_str(), link.c_str()), 0);
  FakeHost host;
  auto via_link = OpenDisk(host, kNs, BaseOptions(link));
  EXPECT_EQ(via_link.status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(via_link.status().message().find("symbolic link"), std::string::npos);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  auto open_dir = OpenDisk(host, kNs, BaseOptions(dir));
  EXPECT_EQ(open_dir.status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(open_dir.status().message().find("writable by other users"), std::string::npos);
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  // A checkpoint file replaced by a symlink is not followed.
  const std::string file = CheckpointPath(dir);
  ASSERT_EQ(::rename(file.c_str(), (dir + "/real").c_str()), 0);
  ASSERT_EQ(::symlink((dir + "/real").c_str(), file.c_str()), 0);
  auto p = MustOpen(host, BaseOptions(dir));
  EXPECT_EQ(StatsOf(*p).entries, 0u);
}

TEST(DiskPlugin, ForeignNamespaceIsIgnoredAndKept) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  Checkpoint cp = StandardCheckpoint(80, 1);
  {
    FakeHost host;
    auto p = MustOpen(host, BaseOptions(dir), {}, "model-A");
    ASSERT_EQ(SpillSync(*p, MakeKey(80), cp).status, TIER_OK);
  }
  {
    FakeHost host;
    auto p = MustOpen(host, BaseOptions(dir), {}, "model-B");
    EXPECT_EQ(StatsOf(*p).entries, 0u);
    EXPECT_EQ(StatsOf(*p).used_bytes, 0u);
    EXPECT_EQ(p->foreign_at_open(), 1u);
    RestoreTarget t = MakeTarget(cp);
    EXPECT_EQ(RestoreSync(*p, MakeKey(80), t).status, TIER_NOT_FOUND);
    int count = 0;
    EXPECT_TRUE(p->Enumerate(
                     [](void* u, const tier_entry*) -> int32_t {
                       ++*static_cast<int*>(u);
                       return 0;
                     },
                     &count)
                    .ok());
    EXPECT_EQ(count, 0);
    // The same key in namespace B is a different checkpoint.
    Checkpoint other = StandardCheckpoint(81, 1);
    ASSERT_EQ(SpillSync(*p, MakeKey(80), other).status, TIER_OK);
  }
  FakeHost host;
  auto p = MustOpen(host, BaseOptions(dir), {}, "model-A");
  EXPECT_EQ(StatsOf(*p).entries, 1u);
  RestoreTarget t = MakeTarget(cp);
  ASSERT_EQ(RestoreSync(*p, MakeKey(80), t).status, TIER_OK);
  EXPECT_TRUE(t.Equals(cp));
}

TEST(DiskPlugin, TemporaryLeftoversAreRemovedAtOpen) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  {
    FakeHost host;
    MustOpen(host, BaseOptions(dir));
  }
  const std::string leftover = dir + "/0123456789abcdef-" + std::string(64, 'a') + ".7.tmp";
  { std::ofstream(leftover) << "half a checkpoint"; }
  { std::ofstream(dir + "/notes.txt") << "not ours"; }
  FakeHost host;
  auto p = MustOpen(host, BaseOptions(dir));
  EXPECT_EQ(p->temps_removed_at_open(), 1u);
  EXPECT_EQ(FileBytes(leftover), static_cast<uint64_t>(-1));
  EXPECT_NE(FileBytes(dir + "/notes.txt"), static_cast<uint64_t>(-1));
  EXPECT_TRUE(host.LogContains("removed unfinished temporary file"));
}

TEST(DiskPlugin, PlanRestoreDecisionsAreCounted) {
  TempDir tmp;
  FakeHost host;
  auto p = MustOpen(host, BaseOptions(tmp.Sub("tier")));
  Checkpoint cp = StandardCheckpoint(90, 2);
  const tier_key key = MakeKey(90);
  ASSERT_EQ(SpillSync(*p, key, cp).status, TIER_OK);
  tier_plan plan{};
  plan.struct_size = sizeof(plan);
  plan = PlanFor(*p, 91, 1'000'000'000);
  EXPECT_EQ(plan.decision, static_cast<tier_decision>(TIER_DECISION_SKIP_TO_ROOT));
  EXPECT_EQ(plan.reason, static_cast<tier_reason>(TIER_REASON_MISS));
  EXPECT_EQ(plan.estimated_restore_ns, 0u);
  ASSERT_TRUE(p->PlanRestore(&key, 60'000'000'000ull, &plan).ok());
  EXPECT_EQ(plan.decision, static_cast<tier_decision>(TIER_DECISION_RESTORE));
  EXPECT_EQ(plan.reason, static_cast<tier_reason>(TIER_REASON_CHEAPER));
  EXPECT_GT(plan.estimated_restore_ns, 0u);
  EXPECT_LT(plan.estimated_restore_ns, 60'000'000'000ull);
  EXPECT_EQ(plan.stored_bytes, StatsOf(*p).used_bytes);
  ASSERT_TRUE(p->PlanRestore(&key, plan.estimated_restore_ns, &plan).ok());  // a tie is not cheaper
  EXPECT_EQ(plan.reason, static_cast<tier_reason>(TIER_REASON_COST));
  ASSERT_TRUE(p->PlanRestore(&key, 1, &plan).ok());
  EXPECT_EQ(plan.reason, static_cast<tier_reason>(TIER_REASON_COST));
  EXPECT_EQ(host.Value("tier_cold_restore_decisions_total", "disk,skip_to_root,miss"), 1);
  EXPECT_EQ(host.Value("tier_cold_restore_decisions_total", "disk,restore,cheaper"), 1);
  EXPECT_EQ(host.Value("tier_cold_restore_decisions_total", "disk,skip_to_root,cost"), 2);
  // Estimate scales with stored bytes: a 100 MB checkpoint at the probed bandwidth.
  const double bps = p->estimator().read_bytes_per_second();
  EXPECT_GT(bps, 1e6);
  EXPECT_NEAR(static_cast<double>(p->estimator().EstimateNs(100'000'000, 0)),
              100'000'000 / bps * 1e9 + RestoreEstimator::kFixedOverheadNs, 1e3);
}

TEST(DiskPlugin, MetricsCoverSpillsRestoresUsage) {
  TempDir tmp;
  FakeHost host;
  auto p = MustOpen(host, BaseOptions(tmp.Sub("tier"), 1ull << 30));
  EXPECT_EQ(host.Value("tier_cold_capacity_bytes", "disk"), 1ull << 30);
  EXPECT_EQ(host.Value("tier_cold_io_path", std::string("disk,") + p->io_path().label), 1);
  Checkpoint cp = StandardCheckpoint(95, 1);
  ASSERT_EQ(SpillSync(*p, MakeKey(95), cp).status, TIER_OK);
  EXPECT_EQ(host.Value("tier_cold_spills_total", "disk,ok"), 1);
  EXPECT_EQ(host.Value("tier_cold_spill_duration_seconds", "disk"), 1);
  EXPECT_EQ(host.Value("tier_cold_entries", "disk"), 1);
  EXPECT_EQ(host.Value("tier_cold_used_bytes", "disk"),
            static_cast<double>(StatsOf(*p).used_bytes));
  EXPECT_EQ(SpillSync(*p, MakeKey(95), cp).status, TIER_ALREADY_EXISTS);
  EXPECT_EQ(host.Value("tier_cold_spills_total", "disk,already_exists"), 1);
  RestoreTarget t = MakeTarget(cp);
  ASSERT_EQ(RestoreSync(*p, MakeKey(95), t).status, TIER_OK);
  EXPECT_EQ(host.Value("tier_cold_restore_bytes_total", "disk,logical"), cp.logical_bytes());
  EXPECT_EQ(RestoreSync(*p, MakeKey(96), t).status, TIER_NOT_FOUND);
  EXPECT_EQ(host.Value("tier_cold_restores_total", "disk,not_found"), 1);
  ASSERT_TRUE(RemoveKey(*p, 95).ok());
  EXPECT_EQ(host.Value("tier_cold_removes_total", "disk,ok"), 1);
  EXPECT_EQ(host.Value("tier_cold_entries", "disk"), 0);
  EXPECT_EQ(host.Value("tier_cold_used_bytes", "disk"), 0);
}

TEST(DiskPlugin, LargeCheckpointStreamsThroughSmallStaging) {
  TempDir tmp;
  FakeHost host;
  // 2 staging buffers of 512 KiB for a 48 MiB checkpoint, compressed and raw, unaligned buffers.
  auto p = MustOpen(host, BaseOptions(tmp.Sub("tier"))
                              .Set("staging_mib", "1")
                              .Set("chunk_kib", "512")
                              .Set("compression", "zstd")
                              .Set("queue_depth", "4"));
  Checkpoint cp;
  cp.Add(TIER_SEGMENT_MAIN_KV, 0, RandomBytes(32u << 20, 3));
  cp.Add(TIER_SEGMENT_STATE_IMAGE, 0, Fp32StateLike(16u << 20, 4));
  ASSERT_EQ(SpillSync(*p, MakeKey(97), cp).status, TIER_OK);
  RestoreTarget t = MakeTarget(cp, 8);
  ASSERT_EQ(RestoreSync(*p, MakeKey(97), t).status, TIER_OK);
  EXPECT_TRUE(t.Equals(cp));
}

TEST(DiskPlugin, ForeignFilesystemDecision) {
  bool foreign = false;
  EXPECT_STREQ(FilesystemName(0x6969, &foreign), "nfs");
  EXPECT_TRUE(foreign);
  FilesystemName(0x01021997, &foreign);  // 9p: WSL2's /mnt/c
  EXPECT_TRUE(foreign);
  FilesystemName(0x65735546, &foreign);  // FUSE
  EXPECT_TRUE(foreign);
  FilesystemName(0xEF53, &foreign);
  EXPECT_FALSE(foreign);
  FilesystemName(0x01021994, &foreign);  // tmpfs is local
  EXPECT_FALSE(foreign);
}

}  // namespace
}  // namespace tier::disk::test

namespace tier::disk::test {
namespace {

TEST(DiskPlugin, BusyWhenTheInflightBoundIsReached) {
  TempDir tmp;
  FakeHost host;
  std::shared_ptr<FaultyBackend> gate;
  Seams seams;
  seams.wrap_backend = WrapWith(&gate);
  auto p = MustOpen(host, BaseOptions(tmp.Sub("tier")), seams);
  Checkpoint cp;
  cp.Add(TIER_SEGMENT_HIDDEN_STATE, 0, RandomBytes(4096, 9));
  const tier_key key = MakeKey(300);
  ASSERT_EQ(SpillSync(*p, key, cp).status, TIER_OK);
  gate->CloseGate();
  constexpr uint32_t kMax = DiskProvider::kMaxInflightOps;
  std::vector<RestoreTarget> targets;
  for (uint32_t i = 0; i < kMax + 1; ++i) targets.push_back(MakeTarget(cp));
  std::vector<Waiter> waiters(kMax + 1);
  for (uint32_t i = 0; i < kMax; ++i) {
    ASSERT_TRUE(
        p->Restore(&key, targets[i].segments.data(), 1, Waiter::Callback, &waiters[i]).ok());
  }
  EXPECT_EQ(StatsOf(*p).inflight_ops, kMax);
  const Status busy =
      p->Restore(&key, targets[kMax].segments.data(), 1, Waiter::Callback, &waiters[kMax]);
  EXPECT_EQ(busy.code(), TIER_BUSY);
  Checkpoint other = StandardCheckpoint(301, 1);
  EXPECT_EQ(SpillSync(*p, MakeKey(301), other).status, TIER_BUSY);
  const tier_plan plan = PlanFor(*p, 300, UINT64_MAX);
  EXPECT_EQ(plan.decision, static_cast<tier_decision>(TIER_DECISION_SKIP_TO_ROOT));
  EXPECT_EQ(plan.reason, static_cast<tier_reason>(TIER_REASON_BUSY));
  EXPECT_EQ(host.Value("tier_cold_restore_decisions_total", "disk,skip_to_root,busy"), 1);
  gate->OpenGate();
  for (uint32_t i = 0; i < kMax; ++i) {
    ASSERT_EQ(waiters[i].Wait().status, TIER_OK);
    EXPECT_TRUE(targets[i].Equals(cp));
  }
  EXPECT_EQ(waiters[kMax].calls(), 0);  // refused: its callback never runs
}

}  // namespace
}  // namespace tier::disk::test

namespace tier::disk::test {
namespace {

std::vector<uint8_t> ReadAllBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteAllBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

// What can stand under a checkpoint's name without being a checkpoint this tier adopted.
enum class Stuck { kSymlink, kFifo, kEmptyDirectory, kDirectoryWithFiles, kStrayFile, kForeign };

const char* StuckName(Stuck s) {
  switch (s) {
    case Stuck::kSymlink:
      return "a symbolic link";
    case Stuck::kFifo:
      return "a FIFO";
    case Stuck::kEmptyDirectory:
    case Stuck::kDirectoryWithFiles:
      return "a directory";
    case Stuck::kStrayFile:
    case Stuck::kForeign:
      return "a file this server has not adopted";
  }
  return "?";
}

// Puts `what` under `name` (the checkpoint's file name); `victim` is a file outside the tier a
// symbolic link points at.
void Plant(Stuck what, const std::string& name, const std::string& victim,
           const std::string& foreign_file) {
  switch (what) {
    case Stuck::kSymlink:
      ASSERT_EQ(::symlink(victim.c_str(), name.c_str()), 0);
      break;
    case Stuck::kFifo:
      ASSERT_EQ(::mkfifo(name.c_str(), 0600), 0);
      break;
    case Stuck::kEmptyDirectory:
      ASSERT_EQ(::mkdir(name.c_str(), 0700), 0);
      break;
    case Stuck::kDirectoryWithFiles:
      ASSERT_EQ(::mkdir(name.c_str(), 0700), 0);
      { std::ofstream(name + "/inside") << "not a checkpoint"; }
      break;
    case Stuck::kStrayFile: {
      {
        std::ofstream(name) << "a stray file under a checkpoint's name";
      }
      ASSERT_EQ(::chmod(name.c_str(), 0600), 0);
      break;
    }
    case Stuck::kForeign:  // another namespace's checkpoint of the same key
      ASSERT_EQ(::rename(foreign_file.c_str(), name.c_str()), 0);
      break;
  }
}

TEST(DiskPlugin, StuckNameOfEveryKindIsMovedAsideAndTheSpillSucceeds) {
  for (Stuck what : {Stuck::kSymlink, Stuck::kFifo, Stuck::kEmptyDirectory,
                     Stuck::kDirectoryWithFiles, Stuck::kStrayFile, Stuck::kForeign}) {
    SCOPED_TRACE(StuckName(what));
    TempDir tmp;
    const std::string dir = tmp.Sub("tier");
    const tier_key key = MakeKey(410);
    Checkpoint cp = StandardCheckpoint(410, 1);
    std::string foreign_file;
    {
      FakeHost host;  // another namespace's checkpoint of the same key, in a directory of its own
      auto other = MustOpen(host, BaseOptions(tmp.Sub("other")), {}, "model-B");
      Checkpoint theirs = StandardCheckpoint(411, 1);
      ASSERT_EQ(SpillSync(*other, key, theirs).status, TIER_OK);
      foreign_file = CheckpointPath(tmp.Sub("other"));
    }
    FakeHost host;
    auto p = MustOpen(host, BaseOptions(dir));
    ASSERT_EQ(SpillSync(*p, key, cp).status, TIER_OK);  // learn the checkpoint's file name
    const std::string name = CheckpointPath(dir);
    ASSERT_TRUE(p->Remove(&key).ok());
    const std::string victim = tmp.Sub("victim");
    { std::ofstream(victim) << "precious"; }
    Plant(what, name, victim, foreign_file);

    const Done spilled = SpillSync(*p, key, cp);
    ASSERT_EQ(spilled.status, TIER_OK) << "the stuck name blocked the spill: " << spilled.message;
    RestoreTarget t = MakeTarget(cp, 1);
    ASSERT_EQ(RestoreSync(*p, key, t).status, TIER_OK);
    EXPECT_TRUE(t.Equals(cp));
    EXPECT_EQ(ListDir(dir + "/quarantine").size(), 1u) << "moved aside, not deleted";
    EXPECT_EQ(host.Value(TIER_METRIC_COLD_QUARANTINED, "disk,stuck_name"), 1);
    EXPECT_EQ(host.CountLogs("blocked a spill of its key"), 1u);
    EXPECT_TRUE(host.LogContains(StuckName(what)));
    EXPECT_EQ(ReadAllBytes(victim), std::vector<uint8_t>({'p', 'r', 'e', 'c', 'i', 'o', 'u', 's'}))
        << "a symbolic link's target is never touched";
    p.reset();
    FakeHost host2;  // what the next process finds: the new checkpoint, whole
    auto q = MustOpen(host2, BaseOptions(dir));
    EXPECT_EQ(StatsOf(*q).entries, 1u);
    RestoreTarget t2 = MakeTarget(cp);
    ASSERT_EQ(RestoreSync(*q, key, t2).status, TIER_OK);
    EXPECT_TRUE(t2.Equals(cp));
  }
}

struct Times {
  uint64_t created_unix_ns = 0;
  uint64_t last_used_unix_ns = 0;
  int count = 0;
};

Times TimesOf(DiskProvider& p) {
  Times times;
  EXPECT_TRUE(p.Enumerate(
                   [](void* u, const tier_entry* e) -> int32_t {
                     auto* t = static_cast<Times*>(u);
                     EXPECT_TRUE(TIER_HAS_FIELD(e, tier_entry, last_used_unix_ns));
                     t->created_unix_ns = e->created_unix_ns;
                     t->last_used_unix_ns = e->last_used_unix_ns;
                     ++t->count;
                     return 0;
                   },
                   &times)
                  .ok());
  return times;
}

uint64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

TEST(DiskPlugin, EnumerateReportsCreationAndLastUseAndARestartKeepsThem) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  Checkpoint cp = StandardCheckpoint(420, 1);
  const tier_key key = MakeKey(420);
  // File times come from the kernel's coarse clock (a tick behind CLOCK_REALTIME at most).
  constexpr uint64_t kTickNs = 1'000'000'000;
  Times spilled;
  const uint64_t before_spill_ns = RealtimeNs();
  {
    FakeHost host;
    auto p = MustOpen(host, BaseOptions(dir));
    ASSERT_EQ(SpillSync(*p, key, cp).status, TIER_OK);
    const uint64_t after_spill_ns = RealtimeNs();
    spilled = TimesOf(*p);
    ASSERT_EQ(spilled.count, 1);
    EXPECT_GE(spilled.created_unix_ns, before_spill_ns);
    EXPECT_LE(spilled.created_unix_ns, after_spill_ns);
    EXPECT_GE(spilled.last_used_unix_ns + kTickNs, spilled.created_unix_ns);
    EXPECT_LE(spilled.last_used_unix_ns, after_spill_ns + kTickNs);
  }
  // The last use is the file's modification time: put it far in the past, then restart.
  const uint64_t old_ns = 978307200ull * 1'000'000'000ull;  // 2001-01-01
  const timespec old_times[2] = {{978307200, 0}, {978307200, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, CheckpointPath(dir).c_str(), old_times, 0), 0);
  Times restored;
  {
    FakeHost host;
    auto p = MustOpen(host, BaseOptions(dir));
    const Times reopened = TimesOf(*p);
    EXPECT_EQ(reopened.created_unix_ns, spilled.created_unix_ns) << "from the header";
    EXPECT_EQ(reopened.last_used_unix_ns, old_ns) << "from the file";
    const uint64_t before_restore_ns = RealtimeNs();
    RestoreTarget t = MakeTarget(cp);
    ASSERT_EQ(RestoreSync(*p, key, t).status, TIER_OK);
    restored = TimesOf(*p);
    EXPECT_EQ(restored.created_unix_ns, spilled.created_unix_ns);
    EXPECT_GE(restored.last_used_unix_ns + kTickNs, before_restore_ns) << "a restore is a use";
  }
  FakeHost host;
  auto p = MustOpen(host, BaseOptions(dir));
  EXPECT_EQ(TimesOf(*p).last_used_unix_ns, restored.last_used_unix_ns) << "kept across a restart";
}

// Rewrites a format 2 checkpoint of raw chunks as format 1: unseeded chunk checksums, version 1,
// every other checksum resealed. What an older build would have written.
void RewriteAsFormatOne(const std::string& path) {
  std::vector<uint8_t> file = ReadAllBytes(path);
  Header h;
  ParseError error;
  ASSERT_TRUE(ParseHeader(file, &h, &error)) << error.message;
  ASSERT_EQ(h.format_version, 2u);
  for (ChunkRecord& c : h.chunks) {
    ASSERT_EQ(c.codec, kCodecRaw);
    c.checksum = Checksum({file.data() + c.file_offset, c.stored_bytes});
  }
  h.format_version = 1;
  EncodeHeader(h, {file.data(), h.data_offset});
  WriteAllBytes(path, file);
}

TEST(DiskPlugin, FormatOneCheckpointsAreStillReadAndVerified) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  const Options options = BaseOptions(dir).Set("compression", "off").Set("chunk_kib", "64");
  Checkpoint cp = StandardCheckpoint(430, 1);
  const tier_key key = MakeKey(430);
  {
    FakeHost host;
    auto p = MustOpen(host, options);
    ASSERT_EQ(SpillSync(*p, key, cp).status, TIER_OK);
  }
  const std::string path = CheckpointPath(dir);
  RewriteAsFormatOne(path);
  {
    FakeHost host;
    auto p = MustOpen(host, options);
    EXPECT_EQ(StatsOf(*p).entries, 1u) << "a format 1 file is adopted";
    RestoreTarget t = MakeTarget(cp, 3);
    ASSERT_EQ(RestoreSync(*p, key, t).status, TIER_OK);
    EXPECT_TRUE(t.Equals(cp));
  }
  // Its chunk checksums still verify the bytes.
  Header h;
  ParseError error;
  ASSERT_TRUE(ParseHeader(ReadAllBytes(path), &h, &error)) << error.message;
  FlipByte(path, h.chunks[1].file_offset + 100);
  FakeHost host;
  auto p = MustOpen(host, options);
  RestoreTarget t = MakeTarget(cp);
  EXPECT_EQ(RestoreSync(*p, key, t).status, TIER_DATA_LOSS);
}

}  // namespace
}  // namespace tier::disk::test
