// DiskDurability: what the disk provider syncs when it creates its directory. A directory just
// created survives a power loss only once the directory holding it is synced (fsync(2)); the
// power-loss loop found the provider never synced it (a completed spill vanished with the new
// directory). Checked here call by call, through the provider's file-system seam.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <mutex>
#include <string>
#include <vector>

#include "disk_test_util.h"
#include "powerloss_util.h"

namespace tier::powerloss::test {
namespace {

std::string PathOf(int fd) {
  char link[PATH_MAX] = {};
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(proc.c_str(), link, sizeof(link) - 1);
  return n > 0 ? std::string(link, static_cast<size_t>(n)) : "?";
}

// Records every mkdir ("mkdir <parent>/<name>") and directory sync ("sync <dir>"), in order.
class RecordingFileOps final : public disk::PosixFileOps {
 public:
  std::vector<std::string> calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }
  int FSyncDir(int dirfd) override {
    Record("sync " + PathOf(dirfd));
    return PosixFileOps::FSyncDir(dirfd);
  }
  int MkdirAt(int dirfd, const char* name, mode_t mode) override {
    const int rc = PosixFileOps::MkdirAt(dirfd, name, mode);
    if (rc == 0) Record("mkdir " + PathOf(dirfd) + "/" + name);
    return rc;
  }

 private:
  void Record(std::string call) {
    std::lock_guard lock(mu_);
    calls_.push_back(std::move(call));
  }
  std::mutex mu_;
  std::vector<std::string> calls_;
};

std::vector<std::string> OpenAndRecord(const std::string& dir) {
  auto ops = std::make_shared<RecordingFileOps>();
  disk::Seams seams;
  seams.file_ops = ops;
  disk::test::FakeHost host;
  auto opened = disk::test::OpenDisk(host, "durability",
                                     disk::test::BaseOptions(dir, 64u << 20)
                                         .Set("direct_io", "off")
                                         .Set("durability", "fdatasync"),
                                     seams);
  EXPECT_TRUE(opened.ok()) << opened.status().message();
  return ops->calls();
}

TEST(DiskDurability, CreatingTheTierDirectorySyncsTheDirectoryHoldingEachNewOne) {
  ScratchDir scratch("dirsync");
  const std::string base = scratch.path();
  const std::vector<std::string> calls = OpenAndRecord(base + "/a/b/tier");
  const std::vector<std::string> want = {"mkdir " + base + "/a",
                                         "sync " + base,
                                         "mkdir " + base + "/a/b",
                                         "sync " + base + "/a",
                                         "mkdir " + base + "/a/b/tier",
                                         "sync " + base + "/a/b",
                                         "mkdir " + base + "/a/b/tier/quarantine",
                                         "sync " + base + "/a/b/tier"};
  EXPECT_EQ(calls, want);
}

TEST(DiskDurability, OpeningAnExistingDirectoryCreatesAndSyncsNothing) {
  ScratchDir scratch("dirsync");
  const std::string dir = scratch.path() + "/tier";
  OpenAndRecord(dir);
  EXPECT_EQ(OpenAndRecord(dir), std::vector<std::string>{});
}

}  // namespace
}  // namespace tier::powerloss::test
