// FaultSweep: every file operation a spill or restore makes is failed in turn, with
// EIO and with ENOSPC, on both I/O paths. Each time the operation completes exactly once with the
// status the errno maps to, the failure is counted by result, nothing partial is visible or left
// on disk, the budget is released, and the tier keeps working.
#include <fcntl.h>
#include <unistd.h>

#include "fault_rig.h"

namespace tier::disk::test {
namespace {

const char* OpName(FsOp op) {
  switch (op) {
    case FsOp::kOpenTemp:
      return "create temp";
    case FsOp::kFDataSync:
      return "fdatasync";
    case FsOp::kFSyncDir:
      return "fsync dir";
    case FsOp::kRename:
      return "rename";
    case FsOp::kUnlink:
      return "unlink";
    case FsOp::kFTruncate:
      return "ftruncate";
    case FsOp::kPWrite:
      return "pwrite";
    case FsOp::kPRead:
      return "pread";
    case FsOp::kFAllocate:
      return "fallocate";
  }
  return "?";
}

// The word a failure message of `op` must contain.
const char* MessageWord(FsOp op) {
  switch (op) {
    case FsOp::kOpenTemp:
      return "create";
    case FsOp::kPWrite:
      return "write";
    case FsOp::kFSyncDir:
      return "fsync directory";
    default:
      return OpName(op);
  }
}

// Fails the nth call of `op` with `err` during one spill; returns false once nth is past the
// calls a spill makes (the spill succeeded).
bool SpillWithFault(FsOp op, int nth, int err, bool threads) {
  SCOPED_TRACE(std::string(OpName(op)) + " call " + std::to_string(nth) + " fails with errno " +
               std::to_string(err) + (threads ? " (threads)" : " (io_uring)"));
  FaultRig rig(threads);
  if (!rig.p) return false;
  Checkpoint cp = StandardCheckpoint(7, 2);
  rig.fs->Fail(op, nth, err);
  const Done d = SpillSync(*rig.p, MakeKey(7), cp);  // checks: exactly one completion
  if (d.status == TIER_OK) return false;
  EXPECT_EQ(d.status, StatusForErrno(err)) << d.message;
  EXPECT_EQ(d.logical_bytes, 0u);
  EXPECT_EQ(d.stored_bytes, 0u);
  EXPECT_NE(d.message.find(MessageWord(op)), std::string::npos)
      << "the message names the failing call: " << d.message;
  EXPECT_EQ(rig.host.Value("tier_cold_spills_total",
                           std::string("disk,") + tier_status_name(StatusForErrno(err))),
            1);
  EXPECT_EQ(rig.host.Value("tier_cold_spills_total", "disk,ok"), 0);
  EXPECT_EQ(rig.CheckNothingVisible(), "");
  EXPECT_EQ(rig.CheckStillWorks(1000 + nth), "");
  return true;
}

void SweepSpill(int err) {
  struct Case {
    FsOp op;
    bool threads;
  };
  // pwrite is a FileOps call only on the thread path; the rest are the same on both paths.
  for (const Case c :
       {Case{FsOp::kOpenTemp, false}, Case{FsOp::kPWrite, true}, Case{FsOp::kFTruncate, false},
        Case{FsOp::kFDataSync, false}, Case{FsOp::kRename, false}, Case{FsOp::kFSyncDir, false},
        Case{FsOp::kFDataSync, true}}) {
    int failed = 0;
    for (int nth = 1; nth <= 64 && SpillWithFault(c.op, nth, err, c.threads); ++nth) ++failed;
    EXPECT_GE(failed, 1) << OpName(c.op) << ": the spill never made this call";
    if (c.op == FsOp::kPWrite) {
      EXPECT_GE(failed, 8) << "one pwrite per chunk, header last";
    }
  }
}

TEST(FaultSweep, EverySpillFileCallFailingWithEioIsIoError) {
  SweepSpill(EIO);
}

TEST(FaultSweep, EverySpillFileCallFailingWithEnospcIsNoSpace) {
  SweepSpill(ENOSPC);
}

TEST(FaultSweep, EveryBackendWriteFailureOnIoUringIsClean) {
  struct Case {
    int64_t result;
    tier_status want;
    const char* what;
  };
  for (const Case c : {Case{-EIO, TIER_IO_ERROR, "EIO"}, Case{-ENOSPC, TIER_NO_SPACE, "ENOSPC"},
                       Case{4096, TIER_IO_ERROR, "short write"}}) {
    int failed = 0;
    for (int nth = 1; nth <= 64; ++nth) {
      SCOPED_TRACE(std::string(c.what) + " on write " + std::to_string(nth));
      FaultRig rig(/*threads=*/false);
      ASSERT_TRUE(rig.p);
      Checkpoint cp = StandardCheckpoint(8, 2);
      rig.io->Fail(IoKind::kWrite, nth, c.result);
      const Done d = SpillSync(*rig.p, MakeKey(8), cp);
      if (d.status == TIER_OK) break;  // past the last write of the spill
      ++failed;
      EXPECT_EQ(d.status, c.want) << d.message;
      EXPECT_EQ(
          rig.host.Value("tier_cold_spills_total", std::string("disk,") + tier_status_name(c.want)),
          1);
      EXPECT_EQ(rig.CheckNothingVisible(), "");
      EXPECT_EQ(rig.CheckStillWorks(2000 + nth), "");
    }
    EXPECT_GE(failed, 8) << c.what << ": one write per chunk, header last";
  }
}

TEST(FaultSweep, EveryShortPwriteIsContinuedToAWholeCheckpoint) {
  for (int nth = 1; nth <= 16; ++nth) {
    SCOPED_TRACE("short pwrite " + std::to_string(nth));
    FaultRig rig(/*threads=*/true, Options().Set("compression", "off"));
    ASSERT_TRUE(rig.p);
    Checkpoint cp = StandardCheckpoint(9, 2);
    rig.fs->Fail(FsOp::kPWrite, nth, 0);  // half the bytes, then the caller continues
    const Done d = SpillSync(*rig.p, MakeKey(9), cp);
    ASSERT_EQ(d.status, TIER_OK) << d.message;
    RestoreTarget t = MakeTarget(cp, 5);
    ASSERT_EQ(RestoreSync(*rig.p, MakeKey(9), t).status, TIER_OK);
    EXPECT_TRUE(t.Equals(cp));
  }
}

// Fails the nth read of a restore; false once nth is past the reads a restore makes.
bool RestoreWithFault(bool threads, int nth, int err) {
  SCOPED_TRACE(std::string(threads ? "pread " : "io_uring read ") + std::to_string(nth) +
               " fails with errno " + std::to_string(err));
  FaultRig rig(threads);
  if (!rig.p) return false;
  const uint64_t seed = 77;
  Checkpoint cp = StandardCheckpoint(seed, 2);
  EXPECT_EQ(SpillSync(*rig.p, MakeKey(seed), cp).status, TIER_OK);
  const uint64_t used = rig.Stats().used_bytes;
  if (threads) {
    rig.fs->Fail(FsOp::kPRead, nth, err);
  } else {
    rig.io->Fail(IoKind::kRead, nth, -err);
  }
  RestoreTarget t = MakeTarget(cp);
  const Done d = RestoreSync(*rig.p, MakeKey(seed), t);
  if (d.status == TIER_OK) {
    EXPECT_TRUE(t.Equals(cp));
    return false;
  }
  EXPECT_EQ(d.status, TIER_IO_ERROR) << d.message;
  EXPECT_EQ(d.logical_bytes, 0u) << "a failed restore never reports bytes";
  EXPECT_EQ(rig.host.Value("tier_cold_restores_total", "disk,io_error"), 1);
  // An I/O error is not proof of damage: the entry, its file and its budget stay.
  EXPECT_EQ(rig.Stats().entries, 1u);
  EXPECT_EQ(rig.Stats().used_bytes, used);
  EXPECT_EQ(rig.Stats().inflight_ops, 0u);
  EXPECT_TRUE(ListDir(rig.dir + "/quarantine").empty());
  RestoreTarget again = MakeTarget(cp, 1);
  EXPECT_EQ(RestoreSync(*rig.p, MakeKey(seed), again).status, TIER_OK);
  EXPECT_TRUE(again.Equals(cp));
  return true;
}

TEST(FaultSweep, EveryRestoreReadFailureIsIoErrorAndKeepsTheEntry) {
  for (bool threads : {true, false}) {
    int failed = 0;
    for (int nth = 1; nth <= 64 && RestoreWithFault(threads, nth, EIO); ++nth) ++failed;
    EXPECT_GE(failed, 8) << "the header read and one read per chunk";
  }
}

TEST(FaultSweep, RemoveWhoseUnlinkFailsKeepsTheEntry) {
  FaultRig rig(/*threads=*/false);
  ASSERT_TRUE(rig.p);
  Checkpoint cp = StandardCheckpoint(11, 1);
  ASSERT_EQ(SpillSync(*rig.p, MakeKey(11), cp).status, TIER_OK);
  rig.fs->Fail(FsOp::kUnlink, 1, EIO);
  const tier_key key = MakeKey(11);
  const Status removed = rig.p->Remove(&key);
  EXPECT_EQ(removed.code(), TIER_IO_ERROR) << removed.message();
  EXPECT_EQ(rig.host.Value("tier_cold_removes_total", "disk,io_error"), 1);
  EXPECT_EQ(rig.Stats().entries, 1u) << "the file is still there, so is the entry";
  EXPECT_EQ(rig.Stats().used_bytes, SumCheckpointFileBytes(rig.dir));
  RestoreTarget t = MakeTarget(cp);
  ASSERT_EQ(RestoreSync(*rig.p, key, t).status, TIER_OK);
  EXPECT_TRUE(t.Equals(cp));
  EXPECT_TRUE(rig.p->Remove(&key).ok());
  EXPECT_EQ(rig.CheckNothingVisible(), "");
}

TEST(FaultSweep, CorruptFileThatCannotBeMovedAsideIsDeleted) {
  FaultRig rig(/*threads=*/false, Options().Set("compression", "off"));
  ASSERT_TRUE(rig.p);
  Checkpoint cp = StandardCheckpoint(12, 1);
  ASSERT_EQ(SpillSync(*rig.p, MakeKey(12), cp).status, TIER_OK);
  std::string path;
  for (const std::string& n : ListDir(rig.dir)) {
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".ckpt") == 0) path = rig.dir + "/" + n;
  }
  ASSERT_FALSE(path.empty());
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const uint8_t junk[16] = {1, 2, 3};
  ASSERT_EQ(::pwrite(fd, junk, sizeof(junk), 8192), static_cast<ssize_t>(sizeof(junk)));
  ::close(fd);
  rig.fs->Fail(FsOp::kRename, 1, EXDEV);  // the move into quarantine/ fails
  RestoreTarget t = MakeTarget(cp);
  const Done d = RestoreSync(*rig.p, MakeKey(12), t);
  EXPECT_EQ(d.status, TIER_DATA_LOSS) << d.message;
  EXPECT_TRUE(rig.host.LogContains("could not move it aside"));
  EXPECT_EQ(FileBytes(path), static_cast<uint64_t>(-1)) << "deleted instead: never served again";
  EXPECT_EQ(rig.host.Value("tier_cold_data_loss_total", "disk,restore"), 1);
  EXPECT_EQ(rig.CheckNothingVisible(), "");
}

}  // namespace
}  // namespace tier::disk::test
