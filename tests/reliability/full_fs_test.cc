// FullFilesystem: faults from a real full filesystem: a small tmpfs, and a small ext4 image on a
// loop device, are filled through the provider until it answers no-space. Each runs in a child
// process with its own mount namespace, so the mount can never outlive the test. Skipped, saying
// why, where the machine does not allow mounts (no CAP_SYS_ADMIN, no loop devices, no mkfs.ext4).
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "derived_checkpoint.h"

namespace tier::disk::test {
namespace {

constexpr int kSkip = 77;
constexpr uint64_t kCheckpointBytes = 1536u << 10;

struct Report {
  int fd;
  int failures = 0;
  void Fail(const std::string& what) {
    ++failures;
    const std::string line = what + "\n";
    if (::write(fd, line.data(), line.size()) < 0) ::_exit(3);
  }
};

Checkpoint Incompressible(uint64_t seed) {
  Checkpoint cp;
  cp.Add(TIER_SEGMENT_MAIN_KV, 0, RandomBytes(kCheckpointBytes, seed));
  cp.Add(TIER_SEGMENT_HIDDEN_STATE, 0, RandomBytes(10240 + seed, seed + 1));
  return cp;
}

// Spills checkpoints from `*next` on until one is refused or completes NO_SPACE. Returns how many
// completed; any status other than OK or NO_SPACE is a failure.
int FillUp(DiskProvider& p, uint64_t* next, Report* r) {
  int stored = 0;
  for (int i = 0; i < 200; ++i) {
    Checkpoint cp = Incompressible(*next);
    const Done d = SpillSync(p, MakeKey(*next), cp);
    ++*next;
    if (d.status == TIER_NO_SPACE) return stored;
    if (d.status != TIER_OK) {
      r->Fail(std::string("spill failed with ") + tier_status_name(d.status) + ": " + d.message);
      return stored;
    }
    ++stored;
  }
  r->Fail("the filesystem never filled up");
  return stored;
}

// Everything the provider shows must be whole and match what is on disk.
void CheckConsistent(DiskProvider& p, const std::string& dir, uint64_t first, uint64_t end,
                     Report* r) {
  tier_stats st{};
  st.struct_size = sizeof(st);
  if (!p.Stats(&st).ok()) r->Fail("stats failed");
  if (st.used_bytes != SumCheckpointFileBytes(dir)) r->Fail("used_bytes differs from the files");
  if (st.inflight_ops != 0) r->Fail("operations still in flight");
  for (const std::string& n : ListDir(dir)) {
    if (n.find(".tmp") != std::string::npos) r->Fail("temporary file left behind: " + n);
  }
  uint64_t found = 0;
  for (uint64_t s = first; s < end; ++s) {
    Checkpoint cp = Incompressible(s);
    RestoreTarget t = MakeTarget(cp, s % 2);
    const Done d = RestoreSync(p, MakeKey(s), t);
    if (d.status == TIER_NOT_FOUND) continue;
    ++found;
    if (d.status != TIER_OK) r->Fail("restore of " + std::to_string(s) + ": " + d.message);
    if (d.status == TIER_OK && !t.Equals(cp))
      r->Fail("restore of " + std::to_string(s) + ": WRONG");
  }
  if (found != st.entries) r->Fail("entries do not match what restores");
}

void Scenario(const std::string& dir, Report* r) {
  const Options options = BaseOptions(dir, 1ull << 30)  // the budget exceeds the filesystem
                              .Set("durability", "fdatasync")
                              .Set("compression", "off")
                              .Set("chunk_kib", "64")
                              .Set("staging_mib", "1");
  uint64_t next = 1;
  {
    FakeHost host;
    auto opened = OpenDisk(host, "full-fs", options);
    if (!opened.ok()) return r->Fail("open: " + opened.status().message());
    DiskProvider& p = *opened.value();
    const int stored = FillUp(p, &next, r);
    if (stored < 2) r->Fail("only " + std::to_string(stored) + " checkpoints fit");
    if (host.Value("tier_cold_spills_total", "disk,no_space") != 1) {
      r->Fail("the no-space spill is not counted");
    }
    // A retry storm on the full filesystem is answered at submit: no file, no job, each counted
    // once, and the log holds one line for all of them.
    for (int i = 0; i < 10; ++i) {
      Checkpoint more = Incompressible(next);
      Status sync;
      SpillSync(p, MakeKey(next++), more, &sync);
      if (sync.code() != TIER_NO_SPACE) r->Fail("accepted on a full filesystem: " + sync.message());
    }
    if (host.Value("tier_cold_spills_total", "disk,no_space") != 11) {
      r->Fail("no-space spills counted " +
              std::to_string(host.Value("tier_cold_spills_total", "disk,no_space")) +
              " times for 11");
    }
    if (host.CountLogs("No space left") != 1) {
      r->Fail(std::to_string(host.CountLogs("No space left")) +
              " log lines for 11 no-space spills");
    }
    CheckConsistent(p, dir, 1, next, r);
    // Space comes back with a remove, and the tier takes spills again.
    const tier_key first = MakeKey(1);
    if (!p.Remove(&first).ok()) r->Fail("remove on a full disk failed");
    Checkpoint again = Incompressible(next);
    if (SpillSync(p, MakeKey(next++), again).status != TIER_OK) r->Fail("no spill after a remove");
    FillUp(p, &next, r);  // full again
  }
  // Another program takes the last free byte; the server restarts on the full disk. The
  // checkpoints already stored must stay reachable.
  const std::string filler = dir + "/../filler";
  const int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const std::vector<uint8_t> block(65536, 0x5A);
  for (size_t size : {size_t{65536}, size_t{4096}, size_t{1}}) {
    while (fd >= 0 && ::write(fd, block.data(), size) > 0) {
    }
  }
  if (fd >= 0) ::close(fd);
  FakeHost host;
  auto reopened = OpenDisk(host, "full-fs", options);
  if (!reopened.ok()) return r->Fail("reopen on a full disk: " + reopened.status().message());
  DiskProvider& p = *reopened.value();
  if (p.quarantined_at_open() != 0) r->Fail("quarantined after filling up");
  CheckConsistent(p, dir, 2, next, r);
  Checkpoint cp = Incompressible(next);
  if (SpillSync(p, MakeKey(next), cp).status != TIER_NO_SPACE) r->Fail("a spill fit a full disk");
  ::unlink(filler.c_str());
  const tier_key oldest = MakeKey(2);
  if (!p.Remove(&oldest).ok()) r->Fail("remove after the restart failed");
  const Done d = SpillSync(p, MakeKey(next), cp);
  if (d.status != TIER_OK) r->Fail("no spill once space is freed: " + d.message);
  CheckConsistent(p, dir, 3, next + 1, r);
}

// Runs Scenario in a child with a private mount namespace and `mount_command` (a shell command
// mounting the filesystem on $MNT). Returns the child's report; sets *skip when mounting is not
// possible here.
std::string RunOnFilesystem(const std::string& mount_command, bool* skip) {
  TempDir tmp;
  const std::string mnt = tmp.Sub("mnt");
  ::mkdir(mnt.c_str(), 0700);
  int out[2];
  if (::pipe(out) != 0) return "pipe failed";
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(out[0]);
    Report r{out[1]};
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      r.Fail("no private mount namespace here (unshare/mount need CAP_SYS_ADMIN)");
      ::_exit(kSkip);
    }
    ::setenv("MNT", mnt.c_str(), 1);
    ::setenv("IMG", tmp.Sub("fs.img").c_str(), 1);
    if (std::system(("(" + mount_command + ") >/dev/null 2>&1").c_str()) != 0) {
      r.Fail("cannot mount here: " + mount_command);
      ::_exit(kSkip);
    }
    Scenario(mnt + "/tier", &r);
    ::_exit(r.failures == 0 ? 0 : 1);
  }
  ::close(out[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof(buf))) > 0;) text.append(buf, n);
  ::close(out[0]);
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  *skip = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == kSkip;
  if (!*skip && !(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) && text.empty()) {
    text = "the child died (status " + std::to_string(wstatus) + ")";
  }
  return text;
}

TEST(FullFilesystem, FullTmpfsAnswersNoSpaceAndRecovers) {
  bool skip = false;
  const std::string report =
      RunOnFilesystem("mount -t tmpfs -o size=12m,mode=0700 tier-full-test \"$MNT\"", &skip);
  if (skip) GTEST_SKIP() << report;
  EXPECT_EQ(report, "");
}

TEST(FullFilesystem, FullExt4LoopImageAnswersNoSpaceAndRecovers) {
  bool skip = false;
  const std::string report = RunOnFilesystem(
      "command -v mkfs.ext4 && truncate -s 24m \"$IMG\" && mkfs.ext4 -q -F \"$IMG\" && "
      "mount -o loop \"$IMG\" \"$MNT\" && chmod 0700 \"$MNT\"",
      &skip);
  if (skip) GTEST_SKIP() << report;
  EXPECT_EQ(report, "");
}

}  // namespace
}  // namespace tier::disk::test
