// Security: the disk provider's directory and file permissions (whatever the umask), refusal of
// symlinks wherever it opens or creates something, the exclusive directory lock across processes
// (and its release when the holder dies), and namespaces: a checkpoint of another namespace is
// never served, not even when its file is put under this namespace's name.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "derived_checkpoint.h"
#include "test_seams.h"

namespace tier::disk::test {
namespace {

uint32_t ModeOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0xFFFFFFFF;
  return st.st_mode & 07777;
}

std::string CheckpointFile(const std::string& dir) {
  for (const std::string& n : ListDir(dir)) {
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".ckpt") == 0) return dir + "/" + n;
  }
  return "";
}

tier_stats StatsOf(DiskProvider& p) {
  tier_stats s{};
  s.struct_size = sizeof(s);
  EXPECT_TRUE(p.Stats(&s).ok());
  return s;
}

// Restores the umask on scope exit.
struct UmaskGuard {
  mode_t saved;
  explicit UmaskGuard(mode_t m) : saved(::umask(m)) {}
  ~UmaskGuard() { ::umask(saved); }
};

TEST(Security, EverythingCreatedIsOwnerOnlyWhateverTheUmask) {
  UmaskGuard open_umask(0);  // the most permissive a careless service manager could leave
  TempDir tmp;
  const std::string dir = tmp.Sub("parent/tier");
  FakeHost host;
  std::shared_ptr<FaultyBackend> gate;
  Seams seams;
  seams.wrap_backend = WrapWith(&gate);
  auto opened = OpenDisk(host, "security-ns", BaseOptions(dir), seams);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  DiskProvider& p = *opened.value();
  EXPECT_EQ(ModeOf(tmp.Sub("parent")), 0700u) << "missing parents are created private too";
  EXPECT_EQ(ModeOf(dir), 0700u);
  EXPECT_EQ(ModeOf(dir + "/LOCK"), 0600u);
  EXPECT_EQ(ModeOf(dir + "/quarantine"), 0700u);
  // A spill held mid-write: its temporary file is already private.
  Checkpoint cp = StandardCheckpoint(1, 1);
  std::vector<tier_segment> segs = cp.Segments();
  const tier_key key = MakeKey(1);
  Waiter w;
  gate->CloseGate(/*writes=*/true);
  ASSERT_TRUE(
      p.Spill(&key, segs.data(), static_cast<uint32_t>(segs.size()), Waiter::Callback, &w).ok());
  while (gate->held_reads() == 0) std::this_thread::yield();
  int temps = 0;
  for (const std::string& n : ListDir(dir)) {
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0) {
      ++temps;
      EXPECT_EQ(ModeOf(dir + "/" + n), 0600u) << n;
    }
  }
  EXPECT_EQ(temps, 1);
  gate->OpenGate();
  ASSERT_EQ(w.Wait().status, TIER_OK);
  EXPECT_EQ(ModeOf(CheckpointFile(dir)), 0600u);
}

TEST(Security, DirectoryOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to hand the directory to another user";
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  FakeHost host;
  auto opened = OpenDisk(host, "security-ns", BaseOptions(dir));
  EXPECT_EQ(opened.status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(opened.status().message().find("belongs to uid 65534"), std::string::npos)
      << opened.status().message();
  EXPECT_TRUE(ListDir(dir).empty()) << "nothing was created in it";
}

TEST(Security, DirectoryWritableByGroupOrOthersIsRefused) {
  // Whoever else can write the directory can plant a checkpoint that verifies and gets served.
  for (mode_t mode : {0703, 0770, 0730}) {
    SCOPED_TRACE("mode " + std::to_string(mode));
    TempDir tmp;
    const std::string dir = tmp.Sub("tier");
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(dir.c_str(), mode), 0);
    FakeHost host;
    auto opened = OpenDisk(host, "security-ns", BaseOptions(dir));
    EXPECT_EQ(opened.status().code(), TIER_INVALID_ARGUMENT);
    EXPECT_NE(opened.status().message().find("writable by other users or its group"),
              std::string::npos)
        << opened.status().message();
    EXPECT_TRUE(ListDir(dir).empty()) << "nothing was created in it";
  }
  TempDir tmp;  // read and search bits for the group are fine
  const std::string dir = tmp.Sub("tier");
  ASSERT_EQ(::mkdir(dir.c_str(), 0750), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0750), 0);
  FakeHost host;
  EXPECT_TRUE(OpenDisk(host, "security-ns", BaseOptions(dir)).ok());
}

TEST(Security, SymlinkedLockFileIsNotFollowed) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const std::string victim = tmp.Sub("victim");
  { std::ofstream(victim) << "precious"; }
  ASSERT_EQ(::symlink(victim.c_str(), (dir + "/LOCK").c_str()), 0);
  FakeHost host;
  auto opened = OpenDisk(host, "security-ns", BaseOptions(dir));
  EXPECT_FALSE(opened.ok()) << "opened through a symlinked LOCK";
  std::ifstream in(victim);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "precious") << "the symlink's target was written";
}

TEST(Security, SymlinkedLeftoversAreRemovedNotFollowed) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  {
    FakeHost host;
    ASSERT_TRUE(OpenDisk(host, "security-ns", BaseOptions(dir)).ok());
  }
  const std::string victim = tmp.Sub("victim.tmp");
  { std::ofstream(victim) << "precious"; }
  const std::string link = dir + "/0123456789abcdef-" + std::string(64, 'b') + ".3.tmp";
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  FakeHost host;
  auto opened = OpenDisk(host, "security-ns", BaseOptions(dir));
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  EXPECT_EQ(ModeOf(link), 0xFFFFFFFFu) << "the link is gone";
  EXPECT_NE(FileBytes(victim), static_cast<uint64_t>(-1)) << "its target is untouched";
}

TEST(Security, SymlinkedQuarantineIsNotFollowed) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  Checkpoint cp = StandardCheckpoint(3, 1);
  {
    FakeHost host;
    auto p = OpenDisk(host, "security-ns", BaseOptions(dir));
    ASSERT_TRUE(p.ok());
    ASSERT_EQ(SpillSync(*p.value(), MakeKey(3), cp).status, TIER_OK);
  }
  // quarantine/ replaced by a link to a directory outside the tier.
  const std::string outside = tmp.Sub("outside");
  ASSERT_EQ(::mkdir(outside.c_str(), 0700), 0);
  ASSERT_EQ(::rmdir((dir + "/quarantine").c_str()), 0);
  ASSERT_EQ(::symlink(outside.c_str(), (dir + "/quarantine").c_str()), 0);
  // Damage the checkpoint's header so the open-time scan quarantines it.
  const std::string file = CheckpointFile(dir);
  const int fd = ::open(file.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "X", 1, 40), 1);
  ::close(fd);
  FakeHost host;
  auto p = OpenDisk(host, "security-ns", BaseOptions(dir));
  EXPECT_EQ(p.status().code(), TIER_INVALID_ARGUMENT) << "opened with a symlinked quarantine/";
  EXPECT_NE(p.status().message().find("quarantine"), std::string::npos) << p.status().message();
  EXPECT_TRUE(ListDir(outside).empty()) << "a checkpoint file was moved out through the symlink";
}

TEST(Security, FifoUnderACheckpointNameHangsNeitherOpenNorRestore) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  std::string first, second;
  Checkpoint a = StandardCheckpoint(4, 1), b = StandardCheckpoint(5, 1);
  {
    FakeHost host;
    auto p = OpenDisk(host, "security-ns", BaseOptions(dir));
    ASSERT_TRUE(p.ok());
    ASSERT_EQ(SpillSync(*p.value(), MakeKey(4), a).status, TIER_OK);
    first = CheckpointFile(dir);
    ASSERT_EQ(SpillSync(*p.value(), MakeKey(5), b).status, TIER_OK);
    for (const std::string& n : ListDir(dir)) {
      if (dir + "/" + n != first && n.size() > 5 && n.substr(n.size() - 5) == ".ckpt") {
        second = dir + "/" + n;
      }
    }
  }
  // Opening a FIFO for reading blocks until a writer comes: a FIFO under a checkpoint's name
  // must be refused, not waited on -- at the open-time scan and at a restore.
  ASSERT_EQ(::unlink(first.c_str()), 0);
  ASSERT_EQ(::mkfifo(first.c_str(), 0600), 0);
  // In a child, so a hang is caught (and killed) instead of hanging the suite.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    FakeHost host;
    auto p = OpenDisk(host, "security-ns", BaseOptions(dir));
    if (!p.ok() || StatsOf(*p.value()).entries != 1) ::_exit(1);
    ::unlink(second.c_str());
    if (::mkfifo(second.c_str(), 0600) != 0) ::_exit(2);
    RestoreTarget t = MakeTarget(b);
    const Done d = RestoreSync(*p.value(), MakeKey(5), t);
    ::_exit(d.status == TIER_IO_ERROR || d.status == TIER_DATA_LOSS ? 0 : 3);
  }
  int wstatus = 0;
  pid_t done = 0;
  for (int i = 0; i < 600 && done == 0; ++i) {  // a 60 s hang guard, not a timing check
    done = ::waitpid(child, &wstatus, WNOHANG);
    if (done == 0) ::usleep(100'000);
  }
  if (done == 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &wstatus, 0);
    FAIL() << "the provider hung opening a FIFO named like a checkpoint";
  }
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "status " << wstatus;
}

TEST(Security, LockIsExclusiveAcrossProcessesAndDiesWithItsHolder) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    ::close(ready[0]);
    FakeHost host;
    auto p = OpenDisk(host, "holder-ns", BaseOptions(dir));
    const char c = p.ok() ? 'y' : 'n';
    if (::write(ready[1], &c, 1) != 1) ::_exit(2);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(c, 'y');
  FakeHost host;
  auto second = OpenDisk(host, "other-ns", BaseOptions(dir));
  EXPECT_EQ(second.status().code(), TIER_BUSY);
  EXPECT_NE(second.status().message().find("pid=" + std::to_string(holder)), std::string::npos)
      << "names the holder: " << second.status().message();
  EXPECT_NE(second.status().message().find("holder-ns"), std::string::npos);
  ::kill(holder, SIGKILL);  // a crashed server must not lock the directory forever
  ::waitpid(holder, nullptr, 0);
  auto third = OpenDisk(host, "other-ns", BaseOptions(dir));
  EXPECT_TRUE(third.ok()) << third.status().message();
}

TEST(Security, AnotherNamespacesFileUnderThisNamespacesNameIsNeverServed) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  Checkpoint theirs = StandardCheckpoint(5, 1), ours = StandardCheckpoint(6, 1);
  std::string their_file, our_file;
  {
    FakeHost host;
    auto b = OpenDisk(host, "model-B", BaseOptions(dir));
    ASSERT_TRUE(b.ok());
    ASSERT_EQ(SpillSync(*b.value(), MakeKey(5), theirs).status, TIER_OK);
    their_file = CheckpointFile(dir);
  }
  const std::string a_dir = tmp.Sub("a");
  {
    FakeHost host;
    auto a = OpenDisk(host, "model-A", BaseOptions(a_dir));
    ASSERT_TRUE(a.ok());
    ASSERT_EQ(SpillSync(*a.value(), MakeKey(5), ours).status, TIER_OK);
    our_file = CheckpointFile(a_dir);
  }
  // (1) At open: B's file carries A's name (as a namespace-tag collision would): left alone.
  ASSERT_EQ(::rename(their_file.c_str(), our_file.c_str()), 0);
  {
    FakeHost host;
    auto a = OpenDisk(host, "model-A", BaseOptions(a_dir));
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(StatsOf(*a.value()).entries, 0u);
    EXPECT_EQ(a.value()->foreign_at_open(), 1u);
    RestoreTarget t = MakeTarget(theirs);
    EXPECT_EQ(RestoreSync(*a.value(), MakeKey(5), t).status, TIER_NOT_FOUND);
  }
  // (2) While open: A's adopted file is replaced by B's file of the same key.
  ASSERT_EQ(::rename(our_file.c_str(), tmp.Sub("b-copy").c_str()), 0);
  FakeHost host;
  auto a = OpenDisk(host, "model-A", BaseOptions(a_dir));
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(SpillSync(*a.value(), MakeKey(5), ours).status, TIER_OK);
  ASSERT_EQ(::rename(tmp.Sub("b-copy").c_str(), our_file.c_str()), 0);
  RestoreTarget t = MakeTarget(ours);
  const Done d = RestoreSync(*a.value(), MakeKey(5), t);
  EXPECT_NE(d.status, TIER_OK) << "B's bytes were served to A";
  if (d.status == TIER_DATA_LOSS) {
    EXPECT_NE(d.message.find("namespace"), std::string::npos) << d.message;
  } else {
    EXPECT_EQ(d.status, TIER_INVALID_ARGUMENT) << d.message;  // B's segment table differs
  }
}

}  // namespace
}  // namespace tier::disk::test

namespace tier::disk::test {
namespace {

std::string ContentOf(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Security, DeletingLockWhileOpenDoesNotLetASecondInstanceIn) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  FakeHost host;
  auto first = OpenDisk(host, "holder-ns", BaseOptions(dir));
  ASSERT_TRUE(first.ok()) << first.status().message();
  // An operator "cleaning a stale lock" while the server runs.
  ASSERT_EQ(::unlink((dir + "/LOCK").c_str()), 0);
  FakeHost host2;
  auto second = OpenDisk(host2, "other-ns", BaseOptions(dir));
  EXPECT_EQ(second.status().code(), TIER_BUSY) << "a second server got in after LOCK was deleted";
  EXPECT_NE(second.status().message().find("in use by another tier instance"), std::string::npos)
      << second.status().message();
  // The first server is unaffected.
  Checkpoint cp = StandardCheckpoint(30, 1);
  ASSERT_EQ(SpillSync(*first.value(), MakeKey(30), cp).status, TIER_OK);
  first.value()->Close();
  auto third = OpenDisk(host2, "other-ns", BaseOptions(dir));
  EXPECT_TRUE(third.ok()) << "released with its holder: " << third.status().message();
}

TEST(Security, HardLinkPlantedAsLockIsNeverWrittenThrough) {
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const std::string victim = tmp.Sub("victim");
  { std::ofstream(victim) << "precious contents"; }
  ASSERT_EQ(::link(victim.c_str(), (dir + "/LOCK").c_str()), 0);
  {
    FakeHost host;
    auto opened = OpenDisk(host, "security-ns", BaseOptions(dir));
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    EXPECT_EQ(ContentOf(victim), "precious contents") << "the link's target was written";
    struct stat lock_st {
    }, victim_st{};
    ASSERT_EQ(::lstat((dir + "/LOCK").c_str(), &lock_st), 0);
    ASSERT_EQ(::stat(victim.c_str(), &victim_st), 0);
    EXPECT_NE(lock_st.st_ino, victim_st.st_ino) << "LOCK is a file of its own now";
    EXPECT_EQ(lock_st.st_nlink, 1u);
    EXPECT_EQ(ModeOf(dir + "/LOCK"), 0600u);
    // Planted again while the server runs: a second instance is refused and reads nothing
    // through the link.
    ASSERT_EQ(::unlink((dir + "/LOCK").c_str()), 0);
    ASSERT_EQ(::link(victim.c_str(), (dir + "/LOCK").c_str()), 0);
    FakeHost host2;
    auto second = OpenDisk(host2, "other-ns", BaseOptions(dir));
    EXPECT_EQ(second.status().code(), TIER_BUSY);
    EXPECT_EQ(second.status().message().find("precious"), std::string::npos)
        << second.status().message();
  }
  EXPECT_EQ(ContentOf(victim), "precious contents");
}

// Opens the tier, spills one checkpoint, closes; returns its file.
std::string SpillOne(const std::string& dir, uint64_t seed, Checkpoint& cp) {
  FakeHost host;
  auto p = OpenDisk(host, "security-ns", BaseOptions(dir));
  EXPECT_TRUE(p.ok()) << p.status().message();
  if (!p.ok()) return "";
  EXPECT_EQ(SpillSync(*p.value(), MakeKey(seed), cp).status, TIER_OK);
  return CheckpointFile(dir);
}

std::string BaseName(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

TEST(Security, CheckpointFileOfAnotherModeIsSetAsideAtOpen) {
  for (mode_t mode : {0644, 0666, 0660, 0700, 0400}) {
    SCOPED_TRACE("mode " + std::to_string(mode));
    TempDir tmp;
    const std::string dir = tmp.Sub("tier");
    Checkpoint cp = StandardCheckpoint(40, 1);
    const std::string file = SpillOne(dir, 40, cp);
    ASSERT_FALSE(file.empty());
    ASSERT_EQ(::chmod(file.c_str(), mode), 0);
    FakeHost host;
    auto p = OpenDisk(host, "security-ns", BaseOptions(dir));
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(StatsOf(*p.value()).entries, 0u) << "adopted a file this server did not write so";
    EXPECT_EQ(p.value()->not_owned_at_open(), 1u);
    RestoreTarget t = MakeTarget(cp);
    EXPECT_EQ(RestoreSync(*p.value(), MakeKey(40), t).status, TIER_NOT_FOUND);
    EXPECT_EQ(ListDir(dir + "/quarantine").size(), 1u) << "moved aside, not deleted";
    EXPECT_EQ(host.Value(TIER_METRIC_COLD_QUARANTINED, "disk,not_owned"), 1);
    EXPECT_EQ(host.CountLogs(BaseName(file)), 1u) << "one log line";
    EXPECT_TRUE(host.LogContains("has mode 0"));
  }
}

TEST(Security, CheckpointFileOfAnotherUserIsSetAsideAtOpen) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to hand a file to another user";
  TempDir tmp;
  const std::string dir = tmp.Sub("tier");
  Checkpoint cp = StandardCheckpoint(41, 1);
  const std::string file = SpillOne(dir, 41, cp);
  ASSERT_EQ(::chown(file.c_str(), 65534, 65534), 0);
  FakeHost host;
  auto p = OpenDisk(host, "security-ns", BaseOptions(dir));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(StatsOf(*p.value()).entries, 0u) << "adopted another user's file";
  EXPECT_EQ(p.value()->not_owned_at_open(), 1u);
  EXPECT_EQ(ListDir(dir + "/quarantine").size(), 1u);
  EXPECT_EQ(host.Value(TIER_METRIC_COLD_QUARANTINED, "disk,not_owned"), 1);
  EXPECT_EQ(host.CountLogs(BaseName(file)), 1u) << "one log line";
  EXPECT_TRUE(host.LogContains("is owned by uid 65534"));
}

TEST(Security, CheckpointFileChangedOwnerOrModeAfterOpenIsNotServed) {
  struct Case {
    const char* what;
    bool needs_root;
    int (*change)(const char* path);
  };
  const Case cases[] = {
      {"made 0644", false, [](const char* path) { return ::chmod(path, 0644); }},
      {"made 0666", false, [](const char* path) { return ::chmod(path, 0666); }},
      {"given to another user", true, [](const char* path) { return ::chown(path, 65534, 65534); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    if (c.needs_root && ::geteuid() != 0) continue;  // covered by the other cases
    TempDir tmp;
    const std::string dir = tmp.Sub("tier");
    FakeHost host;
    auto opened = OpenDisk(host, "security-ns", BaseOptions(dir));
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    DiskProvider& p = *opened.value();
    Checkpoint cp = StandardCheckpoint(42, 1);
    ASSERT_EQ(SpillSync(p, MakeKey(42), cp).status, TIER_OK);
    const std::string file = CheckpointFile(dir);
    ASSERT_EQ(c.change(file.c_str()), 0);
    RestoreTarget t = MakeTarget(cp);
    const Done d = RestoreSync(p, MakeKey(42), t);
    EXPECT_EQ(d.status, TIER_DATA_LOSS) << d.message;
    EXPECT_EQ(d.logical_bytes, 0u);
    EXPECT_NE(d.message.find("not written by this server"), std::string::npos) << d.message;
    EXPECT_EQ(StatsOf(p).entries, 0u);
    EXPECT_EQ(StatsOf(p).used_bytes, 0u);
    EXPECT_EQ(ListDir(dir + "/quarantine").size(), 1u);
    EXPECT_EQ(host.Value(TIER_METRIC_COLD_QUARANTINED, "disk,not_owned"), 1);
    EXPECT_EQ(host.CountLogs(BaseName(file)), 1u) << "one log line";
    EXPECT_EQ(RestoreSync(p, MakeKey(42), t).status, TIER_NOT_FOUND);
  }
}

}  // namespace
}  // namespace tier::disk::test
