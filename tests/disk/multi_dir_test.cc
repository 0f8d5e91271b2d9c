// DiskDirs: the disk provider over several directories (dirs=A,B,...; README "Several
// directories"). Each checkpoint lives whole in one directory; every directory has its own lock
// and is scanned at open; a directory missing or unusable at open costs only its own checkpoints
// (misses, counted, logged once); refusals still refuse, naming the directory; one budget spans
// them all. Written from the README's promises; small checkpoints, a few seconds in all.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "disk_test_util.h"
#include "fake_host.h"
#include "file_ops.h"

namespace tier::disk::test {
namespace {

constexpr uint64_t kScaleMib = 1;  // each StandardCheckpoint is about 1 MiB

std::string Join(const std::vector<std::string>& dirs) {
  std::string out;
  for (const std::string& d : dirs) out += (out.empty() ? "" : ",") + d;
  return out;
}

Options DirsOptions(const std::vector<std::string>& dirs, uint64_t capacity_bytes = 1ull << 30) {
  Options o;
  o.Set("dirs", Join(dirs)).Set("capacity_bytes", std::to_string(capacity_bytes));
  o.Set("durability", "none").Set("staging_mib", "8");
  return o;
}

bool IsCheckpointFile(const std::string& name) {
  return name.size() > 5 && name.compare(name.size() - 5, 5, ".ckpt") == 0;
}

// The directory (index into `dirs`) whose checkpoint file holds `key`, or -1.
int DirHolding(const std::vector<std::string>& dirs, const tier_key& key) {
  const std::string suffix = "-" + Hex(KeyOf(key)) + ".ckpt";
  for (size_t i = 0; i < dirs.size(); ++i) {
    for (const std::string& name : ListDir(dirs[i])) {
      if (name.size() > suffix.size() &&
          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        return static_cast<int>(i);
      }
    }
  }
  return -1;
}

std::string FileHolding(const std::vector<std::string>& dirs, const tier_key& key) {
  const int d = DirHolding(dirs, key);
  if (d < 0) return "";
  for (const std::string& name : ListDir(dirs[d])) {
    if (name.find(Hex(KeyOf(key))) != std::string::npos) return dirs[d] + "/" + name;
  }
  return "";
}

uint64_t CheckpointFilesIn(const std::string& dir) {
  uint64_t n = 0;
  for (const std::string& name : ListDir(dir)) n += IsCheckpointFile(name) ? 1 : 0;
  return n;
}

uint64_t Entries(DiskProvider& p) {
  tier_stats st{};
  st.struct_size = sizeof(st);
  EXPECT_TRUE(p.Stats(&st).ok());
  return st.entries;
}

uint64_t UsedBytes(DiskProvider& p) {
  tier_stats st{};
  st.struct_size = sizeof(st);
  EXPECT_TRUE(p.Stats(&st).ok());
  return st.used_bytes;
}

struct Rig {
  TempDir root;
  std::vector<std::string> dirs;
  std::vector<Checkpoint> cps;
  std::vector<tier_key> keys;

  explicit Rig(int n) {
    for (int i = 0; i < n; ++i) dirs.push_back(root.Sub("dev" + std::to_string(i)));
  }
  std::unique_ptr<DiskProvider> Open(FakeHost& host, Options options) {
    auto p = OpenDisk(host, "ns", options);
    EXPECT_TRUE(p.ok()) << p.status().message();
    return p.ok() ? p.take() : nullptr;
  }
  std::unique_ptr<DiskProvider> Open(FakeHost& host) { return Open(host, DirsOptions(dirs)); }
  void SpillAll(DiskProvider& p, int count) {
    for (int i = 0; i < count; ++i) {
      cps.push_back(StandardCheckpoint(100 + i, kScaleMib));
      keys.push_back(MakeKey(100 + i));
    }
    for (int i = 0; i < count; ++i) {
      ASSERT_EQ(SpillSync(p, keys[i], cps[i]).status, TIER_OK) << i;
    }
  }
  // A first run: opens `options` (default: every directory), spills `count`, closes.
  void FirstRun(int count, const Options* options = nullptr) {
    FakeHost host;
    auto p = options ? Open(host, *options) : Open(host);
    ASSERT_TRUE(p);
    SpillAll(*p, count);
  }
  // Checkpoints 0..count-1 all restore byte-exact.
  void ExpectAllExact(DiskProvider& p, int count) {
    for (int i = 0; i < count; ++i) {
      bool exact = false;
      EXPECT_EQ(Restore(p, i, &exact), TIER_OK) << i;
      EXPECT_TRUE(exact) << i;
    }
  }
  tier_status Restore(DiskProvider& p, int i, bool* exact) {
    RestoreTarget target = MakeTarget(cps[i]);
    const Done d = RestoreSync(p, keys[i], target);
    *exact = d.status == TIER_OK && target.Equals(cps[i]);
    return d.status;
  }
};

TEST(DiskDirs, RoundTripSpreadsCheckpointsOverEveryDirectoryByteExact) {
  FakeHost host;
  Rig rig(3);
  auto p = rig.Open(host);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->dir_count(), 3u);
  rig.SpillAll(*p, 6);
  for (const std::string& d : rig.dirs) {
    EXPECT_GE(CheckpointFilesIn(d), 1u) << d << " holds none of 6 checkpoints";
    EXPECT_TRUE(std::filesystem::exists(d + "/LOCK")) << d;
  }
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(DirHolding(rig.dirs, rig.keys[i]) >= 0, true) << i;
    bool exact = false;
    EXPECT_EQ(rig.Restore(*p, i, &exact), TIER_OK) << i;
    EXPECT_TRUE(exact) << i;
  }
}

TEST(DiskDirs, EveryDirectoryIsLockedAgainstASecondInstance) {
  FakeHost host;
  Rig rig(2);
  auto p = rig.Open(host);
  ASSERT_TRUE(p);
  FakeHost other;
  auto second = OpenDisk(other, "ns", BaseOptions(rig.dirs[1]));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), TIER_BUSY);
  EXPECT_NE(second.status().message().find(rig.dirs[1]), std::string::npos)
      << second.status().message();
}

TEST(DiskDirs, RestartReadoptsFromEveryDirectory) {
  Rig rig(3);
  rig.FirstRun(6);
  FakeHost host;
  auto p = rig.Open(host);
  ASSERT_TRUE(p);
  EXPECT_EQ(Entries(*p), 6u);
  uint64_t file_bytes = 0;
  for (const std::string& d : rig.dirs) file_bytes += SumCheckpointFileBytes(d);
  EXPECT_EQ(UsedBytes(*p), file_bytes);
  rig.ExpectAllExact(*p, 6);
}

TEST(DiskDirs, DirectoryRemovedBetweenRunsCostsOnlyItsCheckpoints) {
  Rig rig(3);
  rig.FirstRun(6);
  const uint64_t gone = CheckpointFilesIn(rig.dirs[1]);
  ASSERT_GE(gone, 1u);
  ASSERT_EQ(::rename(rig.dirs[1].c_str(), (rig.dirs[1] + ".unmounted").c_str()), 0);
  FakeHost host;
  auto p = rig.Open(host);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->dirs_missing_at_open(), 1u);
  EXPECT_EQ(host.Value("tier_cold_dirs_unavailable_total", "disk,missing"), 1);
  EXPECT_EQ(host.CountLogs("'" + rig.dirs[1] + "' did not exist"), 1u);
  EXPECT_EQ(Entries(*p), 6u - gone);
  for (int i = 0; i < 6; ++i) {
    bool exact = false;
    const tier_status status = rig.Restore(*p, i, &exact);
    if (std::filesystem::exists(FileHolding(rig.dirs, rig.keys[i]))) {
      EXPECT_EQ(status, TIER_OK) << i;
      EXPECT_TRUE(exact) << i;
    } else {
      EXPECT_EQ(status, TIER_NOT_FOUND) << i << ": a checkpoint of the missing directory";
    }
  }
  EXPECT_EQ(host.Value("tier_cold_restores_total", "disk,not_found"), static_cast<double>(gone));
}

TEST(DiskDirs, UnusableDirectoryIsSkippedAndCountedTheOthersServe) {
  Rig rig(3);
  rig.FirstRun(6);
  const uint64_t gone = CheckpointFilesIn(rig.dirs[2]);
  ASSERT_GE(gone, 1u);
  // The device's directory is now a plain file (what an open fails on like a dead mount).
  ASSERT_EQ(::rename(rig.dirs[2].c_str(), (rig.dirs[2] + ".away").c_str()), 0);
  {
    std::FILE* f = std::fopen(rig.dirs[2].c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  FakeHost host;
  auto p = rig.Open(host);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->dir_count(), 2u);
  EXPECT_EQ(p->dirs_unusable_at_open(), 1u);
  EXPECT_EQ(host.Value("tier_cold_dirs_unavailable_total", "disk,unusable"), 1);
  EXPECT_EQ(host.CountLogs("skipping cold-tier directory '" + rig.dirs[2] + "'"), 1u);
  EXPECT_EQ(Entries(*p), 6u - gone);
  int served = 0;
  for (int i = 0; i < 6; ++i) {
    bool exact = false;
    const tier_status status = rig.Restore(*p, i, &exact);
    EXPECT_TRUE(status == TIER_OK || status == TIER_NOT_FOUND) << status;
    if (status == TIER_OK) {
      EXPECT_TRUE(exact) << i;
      ++served;
    }
  }
  EXPECT_EQ(served, static_cast<int>(6 - gone));
  // New spills go to the usable directories and come back.
  Checkpoint cp = StandardCheckpoint(7, kScaleMib);
  EXPECT_EQ(SpillSync(*p, MakeKey(7), cp).status, TIER_OK);
  RestoreTarget target = MakeTarget(cp);
  EXPECT_EQ(RestoreSync(*p, MakeKey(7), target).status, TIER_OK);
  EXPECT_TRUE(target.Equals(cp));
}

// The real file system, except that once armed, creating a file in one directory (by inode)
// fails EIO: a device that started failing while the provider runs.
class FailCreatesInOneDir final : public PosixFileOps {
 public:
  void Arm(const std::string& dir) {
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    bad_ino_.store(st.st_ino);
  }
  int OpenAt(int dirfd, const char* name, int flags, mode_t mode) override {
    struct stat st {};
    if ((flags & O_CREAT) != 0 && bad_ino_.load() != 0 && ::fstat(dirfd, &st) == 0 &&
        st.st_ino == bad_ino_.load()) {
      return -EIO;
    }
    return PosixFileOps::OpenAt(dirfd, name, flags, mode);
  }

 private:
  std::atomic<ino_t> bad_ino_{0};
};

// Spills in a row into `dirs` with dirs[1] failing; returns each spill's status.
std::vector<tier_status> SpillsWithTheSecondDirFailing(FakeHost& host, Rig& rig, int count) {
  auto fs = std::make_shared<FailCreatesInOneDir>();
  Seams seams;
  seams.file_ops = fs;
  auto opened = OpenDisk(host, "ns", DirsOptions(rig.dirs), seams);
  EXPECT_TRUE(opened.ok()) << opened.status().message();
  std::vector<tier_status> statuses;
  if (!opened.ok()) return statuses;
  std::unique_ptr<DiskProvider> p = opened.take();
  fs->Arm(rig.dirs.size() > 1 ? rig.dirs[1] : rig.dirs[0]);
  for (int i = 0; i < count; ++i) {
    rig.cps.push_back(StandardCheckpoint(200 + i, kScaleMib));
    rig.keys.push_back(MakeKey(200 + i));
    statuses.push_back(SpillSync(*p, rig.keys.back(), rig.cps.back()).status);
  }
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (statuses[i] != TIER_OK) continue;
    bool exact = false;
    EXPECT_EQ(rig.Restore(*p, static_cast<int>(i), &exact), TIER_OK) << i;
    EXPECT_TRUE(exact) << i;
  }
  return statuses;
}

TEST(DiskDirs, ADirectoryFailingSpillsIsSetAsideAndTheOthersTakeThem) {
  FakeHost host;
  Rig rig(2);
  const std::vector<tier_status> statuses = SpillsWithTheSecondDirFailing(host, rig, 12);
  ASSERT_EQ(statuses.size(), 12u);
  int failed = 0, last_failure = -1;
  for (int i = 0; i < 12; ++i) {
    if (statuses[i] == TIER_OK) continue;
    EXPECT_EQ(statuses[i], TIER_IO_ERROR) << i;
    ++failed;
    last_failure = i;
  }
  EXPECT_EQ(failed, 3) << "three I/O errors in a row set the directory aside, no more";
  EXPECT_LT(last_failure, 8) << "the spills after it all went to the healthy directory";
  EXPECT_EQ(host.Value("tier_cold_dirs_unavailable_total", "disk,failing"), 1);
  EXPECT_EQ(host.CountLogs("disk: directory '" + rig.dirs[1] + "' failed 3 spills in a row"), 1u);
  EXPECT_EQ(CheckpointFilesIn(rig.dirs[1]), 0u);
  EXPECT_EQ(CheckpointFilesIn(rig.dirs[0]), static_cast<uint64_t>(12 - failed));
}

TEST(DiskDirs, ASingleFailingDirectoryIsNeverSetAside) {
  // With nowhere else to go, every spill still tries the one directory (and fails, counted).
  FakeHost host;
  Rig rig(1);
  const std::vector<tier_status> statuses = SpillsWithTheSecondDirFailing(host, rig, 5);
  ASSERT_EQ(statuses.size(), 5u);
  for (tier_status s : statuses) EXPECT_EQ(s, TIER_IO_ERROR);
  EXPECT_EQ(host.Value("tier_cold_dirs_unavailable_total", "disk,failing"), 0);
}

TEST(DiskDirs, NoUsableDirectoryRefusesTheOpenNamingEach) {
  TempDir root;
  const std::vector<std::string> dirs = {root.Sub("f0"), root.Sub("f1")};
  for (const std::string& d : dirs) {
    std::FILE* f = std::fopen(d.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  FakeHost host;
  auto p = OpenDisk(host, "ns", DirsOptions(dirs));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), TIER_IO_ERROR);
  for (const std::string& d : dirs) {
    EXPECT_NE(p.status().message().find(d), std::string::npos) << p.status().message();
  }
}

TEST(DiskDirs, RefusedDirectoriesStillRefuseTheOpenNamingThem) {
  {  // writable by others
    Rig rig(2);
    ASSERT_EQ(::mkdir(rig.dirs[1].c_str(), 0700), 0);
    ASSERT_EQ(::chmod(rig.dirs[1].c_str(), 0777), 0);
    FakeHost host;
    auto p = OpenDisk(host, "ns", DirsOptions(rig.dirs));
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), TIER_INVALID_ARGUMENT);
    EXPECT_NE(p.status().message().find("'" + rig.dirs[1] + "'"), std::string::npos)
        << p.status().message();
  }
  {  // a symbolic link
    Rig rig(2);
    ASSERT_EQ(::mkdir((rig.dirs[1] + ".real").c_str(), 0700), 0);
    ASSERT_EQ(::symlink((rig.dirs[1] + ".real").c_str(), rig.dirs[1].c_str()), 0);
    FakeHost host;
    auto p = OpenDisk(host, "ns", DirsOptions(rig.dirs));
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find("symbolic link"), std::string::npos)
        << p.status().message();
    EXPECT_NE(p.status().message().find(rig.dirs[1]), std::string::npos);
  }
  {  // one directory under two names (a symlinked parent)
    Rig rig(1);
    ASSERT_EQ(::mkdir(rig.dirs[0].c_str(), 0700), 0);
    const std::string alias_parent = rig.root.Sub("alias");
    ASSERT_EQ(::symlink(rig.root.path().c_str(), alias_parent.c_str()), 0);
    const std::string alias = alias_parent + "/dev0";
    FakeHost host;
    auto p = OpenDisk(host, "ns", DirsOptions({rig.dirs[0], alias}));
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), TIER_INVALID_ARGUMENT);
    EXPECT_NE(p.status().message().find("same directory"), std::string::npos)
        << p.status().message();
  }
}

TEST(DiskDirs, CorruptOrTornFileInOneDirectoryIsDataLossNeverWrongBytes) {
  FakeHost host;
  Rig rig(2);
  auto p = rig.Open(host);
  ASSERT_TRUE(p);
  rig.SpillAll(*p, 4);
  // One checkpoint in each directory: a flipped data byte in one, a torn tail in the other.
  int flipped = -1, torn = -1;
  for (int i = 0; i < 4; ++i) {
    const int d = DirHolding(rig.dirs, rig.keys[i]);
    if (d == 0 && flipped < 0) flipped = i;
    if (d == 1 && torn < 0) torn = i;
  }
  ASSERT_GE(flipped, 0);
  ASSERT_GE(torn, 0);
  {
    const std::string path = FileHolding(rig.dirs, rig.keys[flipped]);
    const int fd = ::open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    const uint64_t at = FileBytes(path) - 4096 - 100;  // inside the last chunk's data
    uint8_t b = 0;
    ASSERT_EQ(::pread(fd, &b, 1, at), 1);
    b ^= 0x5a;
    ASSERT_EQ(::pwrite(fd, &b, 1, at), 1);
    ::close(fd);
  }
  {
    const std::string path = FileHolding(rig.dirs, rig.keys[torn]);
    ASSERT_EQ(::truncate(path.c_str(), FileBytes(path) / 2), 0);
  }
  for (int i = 0; i < 4; ++i) {
    bool exact = false;
    const tier_status status = rig.Restore(*p, i, &exact);
    if (i == flipped || i == torn) {
      EXPECT_EQ(status, TIER_DATA_LOSS) << i;
    } else {
      EXPECT_EQ(status, TIER_OK) << i;
      EXPECT_TRUE(exact) << i;
    }
  }
  EXPECT_EQ(Entries(*p), 2u);
  EXPECT_EQ(host.Value("tier_cold_data_loss_total", "disk,restore"), 2);
  EXPECT_EQ(ListDir(rig.dirs[0] + "/quarantine").size(), 1u);
  EXPECT_EQ(ListDir(rig.dirs[1] + "/quarantine").size(), 1u);
}

TEST(DiskDirs, OneBudgetSpansEveryDirectory) {
  FakeHost host;
  Rig rig(2);
  Checkpoint probe = StandardCheckpoint(1, kScaleMib);
  // Room for three checkpoints in all (each its logical bytes plus headers and 4 KiB padding).
  const uint64_t capacity = 3 * (probe.logical_bytes() + (64u << 10));
  auto p = rig.Open(host, DirsOptions(rig.dirs, capacity));
  ASSERT_TRUE(p);
  int stored = 0;
  tier_status last = TIER_OK;
  for (int i = 0; i < 8 && last == TIER_OK; ++i) {
    rig.cps.push_back(StandardCheckpoint(200 + i, kScaleMib));
    rig.keys.push_back(MakeKey(200 + i));
    last = SpillSync(*p, rig.keys[i], rig.cps[i]).status;
    stored += last == TIER_OK ? 1 : 0;
  }
  EXPECT_EQ(last, TIER_NO_SPACE);
  EXPECT_EQ(stored, 3);
  const uint64_t files = SumCheckpointFileBytes(rig.dirs[0]) + SumCheckpointFileBytes(rig.dirs[1]);
  EXPECT_EQ(UsedBytes(*p), files);
  EXPECT_LE(UsedBytes(*p), capacity);
  EXPECT_GE(CheckpointFilesIn(rig.dirs[0]), 1u);
  EXPECT_GE(CheckpointFilesIn(rig.dirs[1]), 1u);
  // A remove in either directory gives its bytes back to the one budget.
  ASSERT_TRUE(p->Remove(&rig.keys[0]).ok());
  EXPECT_EQ(UsedBytes(*p),
            SumCheckpointFileBytes(rig.dirs[0]) + SumCheckpointFileBytes(rig.dirs[1]));
  Checkpoint again = StandardCheckpoint(300, kScaleMib);
  EXPECT_EQ(SpillSync(*p, MakeKey(300), again).status, TIER_OK);
}

TEST(DiskDirs, ASingleDirectoryWrittenByDirIsReadAsTheFirstOfDirs) {
  Rig rig(2);
  const Options single = BaseOptions(rig.dirs[0]);
  rig.FirstRun(3, &single);
  FakeHost host;
  auto p = rig.Open(host);
  ASSERT_TRUE(p);
  EXPECT_EQ(Entries(*p), 3u);
  rig.ExpectAllExact(*p, 3);
}

TEST(DiskDirs, TheSameKeyInTwoDirectoriesKeepsOneCopy) {
  Rig rig(2);
  rig.FirstRun(1);
  const std::string path = FileHolding(rig.dirs, rig.keys[0]);
  const int d = DirHolding(rig.dirs, rig.keys[0]);
  const std::string copy = rig.dirs[1 - d] + path.substr(path.rfind('/'));
  std::filesystem::copy_file(path, copy);
  ASSERT_EQ(::chmod(copy.c_str(), 0600), 0);
  FakeHost host;
  auto p = rig.Open(host);
  ASSERT_TRUE(p);
  EXPECT_EQ(Entries(*p), 1u);
  EXPECT_EQ(CheckpointFilesIn(rig.dirs[0]) + CheckpointFilesIn(rig.dirs[1]), 1u);
  bool exact = false;
  EXPECT_EQ(rig.Restore(*p, 0, &exact), TIER_OK);
  EXPECT_TRUE(exact);
}

// Option values: refused at open, the message naming what is wrong.
TEST(DiskDirs, BadDirsValuesAreRefusedNamingTheProblem) {
  auto refusal = [](const Options& o) {
    Result<DiskOptions> r = ParseOptions(o.View());
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.ok() ? TIER_OK : r.status().code(), TIER_INVALID_ARGUMENT);
    return r.ok() ? std::string() : r.status().message();
  };
  auto dirs = [](const std::string& value) {
    Options o;
    return o.Set("dirs", value).Set("capacity_gib", "1");
  };
  EXPECT_NE(refusal(dirs("")).find("'dirs' is empty"), std::string::npos);
  EXPECT_NE(refusal(dirs("/a,,/b")).find("directory 2 is empty"), std::string::npos);
  EXPECT_NE(refusal(dirs("/a,")).find("directory 2 is empty"), std::string::npos);
  EXPECT_NE(refusal(dirs("/a,/b,/a/")).find("'/a/' is given twice"), std::string::npos);
  EXPECT_NE(refusal(dirs("/a//x,/a/x")).find("given twice"), std::string::npos);
  std::vector<std::string> many;
  for (int i = 0; i <= 64; ++i) many.push_back("/d" + std::to_string(i));
  EXPECT_NE(refusal(dirs(Join(many))).find("more than 64 directories"), std::string::npos);
  Options both;
  both.Set("dir", "/a").Set("dirs", "/b,/c").Set("capacity_gib", "1");
  EXPECT_NE(refusal(both).find("give one of dir and dirs"), std::string::npos);
  Options none;
  none.Set("capacity_gib", "1");
  EXPECT_NE(refusal(none).find("'dirs'"), std::string::npos);

  Result<DiskOptions> ok = ParseOptions(dirs("/a,/b").View());
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok.value().dirs, (std::vector<std::string>{"/a", "/b"}));
  EXPECT_EQ(ok.value().dir, "/a");
}

}  // namespace
}  // namespace tier::disk::test
