// FaultFs: the FUSE filesystem itself: it passes calls through, logs what they change, stops at a
// cut and rebuilds its backing as a power loss leaves it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "fault_fs.h"
#include "powerloss_util.h"

namespace tier::powerloss::test {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Exists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

// Creates `path` with `data`; fsyncs the file when `sync_file`.
void Put(const std::string& path, const std::string& data, bool sync_file) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  if (sync_file) {
    ASSERT_EQ(::fdatasync(fd), 0);
  }
  ::close(fd);
}

void SyncDir(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fsync(fd), 0);
  ::close(fd);
}

struct Mounted {
  ScratchDir scratch{"faultfs"};
  std::string backing = scratch.Sub("backing"), mnt = scratch.Sub("mnt");
  std::unique_ptr<FaultFs> fs;
  Mounted() {
    std::string error;
    fs = FaultFs::Mount(backing, mnt, &error);
    if (!fs) ADD_FAILURE() << error;
  }
};

TEST(FaultFs, PassesCallsThroughAndLogsWhatTheyChanged) {
  Mounted m;
  ASSERT_TRUE(m.fs);
  Put(m.mnt + "/a", "hello", true);
  ASSERT_EQ(::mkdir((m.mnt + "/d").c_str(), 0700), 0);
  ASSERT_EQ(::rename((m.mnt + "/a").c_str(), (m.mnt + "/d/b").c_str()), 0);
  EXPECT_EQ(Slurp(m.mnt + "/d/b"), "hello");
  EXPECT_EQ(Slurp(m.backing + "/d/b"), "hello");
  EXPECT_FALSE(Exists(m.backing + "/a"));
  std::vector<OpKind> kinds;
  for (const Op& op : m.fs->Log()) kinds.push_back(op.kind);
  const std::vector<OpKind> want = {OpKind::kLink, OpKind::kWrite, OpKind::kSyncFile, OpKind::kLink,
                                    OpKind::kRename};
  EXPECT_EQ(kinds, want);
}

TEST(FaultFs, RefusesODirectSoCallersFallBackToBufferedIo) {
  Mounted m;
  ASSERT_TRUE(m.fs);
  const int fd = ::open((m.mnt + "/x").c_str(), O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(errno, EINVAL);
  if (fd >= 0) ::close(fd);
}

TEST(FaultFs, PowerLossKeepsWhatWasSyncedAndLosesTheRest) {
  Mounted m;
  ASSERT_TRUE(m.fs);
  Put(m.mnt + "/durable", "kept", true);
  SyncDir(m.mnt);
  Put(m.mnt + "/unsynced", "lost", false);
  m.fs->CutNow();
  m.fs->Drain();
  CutOptions lose_all;
  lose_all.keep_probability = 0;
  lose_all.torn_tail = 0;
  const FaultFs::PowerLossResult r = m.fs->PowerLoss(1, lose_all);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.pending_ops, 2u) << r.description;  // the create and the write of "unsynced"
  EXPECT_EQ(Slurp(m.mnt + "/durable"), "kept");
  EXPECT_EQ(Slurp(m.backing + "/durable"), "kept");
  EXPECT_FALSE(Exists(m.mnt + "/unsynced"));
  EXPECT_FALSE(Exists(m.backing + "/unsynced"));
  // A new epoch: the filesystem works again and its log starts empty.
  EXPECT_TRUE(m.fs->Log().empty());
  Put(m.mnt + "/after", "x", false);
  EXPECT_EQ(Slurp(m.backing + "/after"), "x");
}

TEST(FaultFs, ArmedCutStopsTheNthMutationAndEveryRequestAfterIt) {
  Mounted m;
  ASSERT_TRUE(m.fs);
  m.fs->ArmCut(3);  // create, write: applied; the second write: stopped
  const std::string path = m.mnt + "/f";
  // The writer is this binary in its --faultfs-writer mode (create, write, write), started with
  // exec: a plain fork() of this threaded process (the filesystem's threads, ASan's) can deadlock.
  const std::string self = "/proc/self/exe";
  char* const argv[] = {const_cast<char*>(self.c_str()), const_cast<char*>("--faultfs-writer"),
                        const_cast<char*>(path.c_str()), nullptr};
  pid_t child = -1;
  ASSERT_EQ(::posix_spawn(&child, self.c_str(), nullptr, nullptr, argv, environ), 0);
  ASSERT_GT(child, 0);
  const bool cut = m.fs->WaitForCut(std::chrono::seconds(30));
  ::kill(child, SIGKILL);
  m.fs->Drain();
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(cut) << "the third mutation never came";
  EXPECT_TRUE(WIFSIGNALED(status)) << "the stopped write returned";
  CutOptions keep_all;
  keep_all.keep_probability = 1;
  keep_all.torn_tail = 0;
  const FaultFs::PowerLossResult r = m.fs->PowerLoss(2, keep_all);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.cut_ops, 2u);
  EXPECT_EQ(Slurp(m.backing + "/f"), "1111");
}

TEST(FaultFs, SyncAllMakesTheLiveStateTheDurableBase) {
  Mounted m;
  ASSERT_TRUE(m.fs);
  Put(m.mnt + "/a", "abc", false);
  ASSERT_EQ(m.fs->SyncAll(), "");
  EXPECT_TRUE(m.fs->Log().empty());
  FsImage backing;
  ASSERT_EQ(LoadImage(m.backing, &backing), "");
  EXPECT_EQ(m.fs->Base().Files(), backing.Files());
  m.fs->CutNow();
  m.fs->Drain();
  CutOptions lose_all;
  lose_all.keep_probability = 0;
  EXPECT_EQ(m.fs->PowerLoss(3, lose_all).error, "");
  EXPECT_EQ(Slurp(m.backing + "/a"), "abc");
}

}  // namespace
}  // namespace tier::powerloss::test
