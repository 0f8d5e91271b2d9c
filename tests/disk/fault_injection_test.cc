// FaultInjection: every failing file operation completes the spill or restore exactly once with
// the right status, leaves nothing partial visible, no temporary file, and the budget released.
#include <thread>

#include "disk_test_util.h"
#include "test_seams.h"

namespace tier::disk::test {
namespace {

constexpr const char* kNs = "fault-ns";

struct Rig {
  TempDir tmp;
  FakeHost host;
  std::shared_ptr<FaultyFileOps> fs = std::make_shared<FaultyFileOps>();
  std::shared_ptr<FaultyBackend> io;
  std::unique_ptr<DiskProvider> p;
  Checkpoint cp = StandardCheckpoint(7, 2);

  explicit Rig(Options extra = {}, bool threads = false) {
    Options o = BaseOptions(tmp.Sub("tier"), 64u << 20).Set("durability", "fdatasync");
    for (auto& [k, v] : extra.kv) o.Set(k, v);
    Seams seams;
    seams.file_ops = fs;
    seams.wrap_backend = WrapWith(&io);
    seams.disable_io_uring = threads;
    auto r = OpenDisk(host, kNs, o, seams);
    EXPECT_TRUE(r.ok()) << r.status().message();
    p = r.take();
  }

  tier_stats Stats() {
    tier_stats s{};
    s.struct_size = sizeof(s);
    EXPECT_TRUE(p->Stats(&s).ok());
    return s;
  }

  // Nothing visible, nothing left behind, budget fully released, and the tier still works.
  void ExpectClean(const std::string& what) {
    SCOPED_TRACE(what);
    EXPECT_EQ(Stats().entries, 0u);
    EXPECT_EQ(Stats().used_bytes, 0u);
    EXPECT_EQ(Stats().inflight_ops, 0u);
    for (const std::string& n : ListDir(tmp.Sub("tier"))) {
      EXPECT_TRUE(n == "LOCK" || n == "quarantine") << "left behind: " << n;
    }
    RestoreTarget t = MakeTarget(cp);
    EXPECT_EQ(RestoreSync(*p, MakeKey(7), t).status, TIER_NOT_FOUND);
    // The whole budget is available again: a spill of the same checkpoint succeeds now.
    Done again = SpillSync(*p, MakeKey(7), cp);
    EXPECT_EQ(again.status, TIER_OK) << again.message;
    RestoreTarget t2 = MakeTarget(cp);
    EXPECT_EQ(RestoreSync(*p, MakeKey(7), t2).status, TIER_OK);
    EXPECT_TRUE(t2.Equals(cp));
  }
};

TEST(FaultInjection, WriteEioIsIoError) {
  Rig rig;
  rig.io->Fail(IoKind::kWrite, 2, -EIO);
  Done d = SpillSync(*rig.p, MakeKey(7), rig.cp);
  EXPECT_EQ(d.status, TIER_IO_ERROR) << d.message;
  EXPECT_NE(d.message.find(".tmp"), std::string::npos) << d.message;  // names the file
  EXPECT_EQ(rig.host.Value("tier_cold_spills_total", "disk,io_error"), 1);
  rig.ExpectClean("EIO");
}

TEST(FaultInjection, WriteEnospcIsNoSpace) {
  Rig rig;
  rig.io->Fail(IoKind::kWrite, 1, -ENOSPC);
  Done d = SpillSync(*rig.p, MakeKey(7), rig.cp);
  EXPECT_EQ(d.status, TIER_NO_SPACE) << d.message;
  rig.ExpectClean("ENOSPC");
}

TEST(FaultInjection, HeaderWriteFailureLeavesNothing) {
  Rig rig(Options().Set("compression", "off"));
  // Chunk writes come first; the header is the last write of the spill.
  uint64_t chunks = 0;
  for (const auto& info : rig.cp.infos) {
    if (info.kind != TIER_SEGMENT_MANIFEST) chunks += (info.length_bytes + (1u << 20) - 1) >> 20;
  }
  rig.io->Fail(IoKind::kWrite, static_cast<int>(chunks) + 1, -EIO);
  Done d = SpillSync(*rig.p, MakeKey(7), rig.cp);
  EXPECT_EQ(d.status, TIER_IO_ERROR) << d.message;
  EXPECT_NE(d.message.find("header"), std::string::npos) << d.message;
  rig.ExpectClean("header EIO");
}

TEST(FaultInjection, PersistentShortWriteIsIoError) {
  Rig rig;
  rig.io->Fail(IoKind::kWrite, 1, 4096);  // the device took one block of a larger write
  Done d = SpillSync(*rig.p, MakeKey(7), rig.cp);
  EXPECT_EQ(d.status, TIER_IO_ERROR) << d.message;
  EXPECT_NE(d.message.find("short write"), std::string::npos) << d.message;
  rig.ExpectClean("short write");
}

TEST(FaultInjection, TransientShortPwriteIsRetried) {
  Rig rig(Options(), /*threads=*/true);  // pread/pwrite path: FileOps sees every call
  rig.fs->Fail(FsOp::kPWrite, 1, 0);     // half a write, then the rest
  Done d = SpillSync(*rig.p, MakeKey(7), rig.cp);
  ASSERT_EQ(d.status, TIER_OK) << d.message;
  RestoreTarget t = MakeTarget(rig.cp, 1);
  ASSERT_EQ(RestoreSync(*rig.p, MakeKey(7), t).status, TIER_OK);
  EXPECT_TRUE(t.Equals(rig.cp));
}

TEST(FaultInjection, PwriteEioOnThreadPath) {
  Rig rig(Options(), /*threads=*/true);
  rig.fs->Fail(FsOp::kPWrite, 3, EIO);
  Done d = SpillSync(*rig.p, MakeKey(7), rig.cp);
  EXPECT_EQ(d.status, TIER_IO_ERROR) << d.message;
  rig.ExpectClean("pwrite EIO");
}

TEST(FaultInjection, FdatasyncFailureIsIoError) {
  Rig rig;
  rig.fs->Fail(FsOp::kFDataSync, 1, EIO);
  Done d = SpillSync(*rig.p, MakeKey(7), rig.cp);
  EXPECT_EQ(d.status, TIER_IO_ERROR) << d.message;
  EXPECT_NE(d.message.find("fdatasync"), std::string::npos);
  rig.ExpectClean("fdatasync");
}

TEST(FaultInjection, RenameFailureIsIoError) {
  Rig rig;
  rig.fs->Fail(FsOp::kRename, 1, EIO);
  Done d = SpillSync(*rig.p, MakeKey(7), rig.cp);
  EXPECT_EQ(d.status, TIER_IO_ERROR) << d.message;
  EXPECT_NE(d.message.find("rename"), std::string::npos);
  rig.ExpectClean("rename");
}

TEST(FaultInjection, DirectoryFsyncFailureUnpublishes) {
  Rig rig;
  rig.fs->Fail(FsOp::kFSyncDir, 1, EIO);
  Done d = SpillSync(*rig.p, MakeKey(7), rig.cp);
  EXPECT_EQ(d.status, TIER_IO_ERROR) << d.message;
  rig.ExpectClean("fsync dir");
}

TEST(FaultInjection, RemoveSyncsTheDirectoryOnlyUnderFdatasync) {
  for (const char* durability : {"fdatasync", "none"}) {
    SCOPED_TRACE(durability);
    Rig rig(Options().Set("durability", durability));
    ASSERT_EQ(SpillSync(*rig.p, MakeKey(7), rig.cp).status, TIER_OK);
    const int before = rig.fs->calls(FsOp::kFSyncDir);
    const tier_key key = MakeKey(7);
    ASSERT_EQ(rig.p->Remove(&key).code(), TIER_OK);
    EXPECT_EQ(rig.fs->calls(FsOp::kFSyncDir) - before,
              std::string(durability) == "fdatasync" ? 1 : 0);
  }
}

// A remove under fdatasync holds its bytes until its unlink is durable: a spill that took them
// earlier could leave the directory over capacity after a power loss brings the file back
// (found by tests/powerloss; the header's used_bytes <= capacity_bytes).
TEST(FaultInjection, RemoveKeepsItsBytesUntilItsUnlinkIsDurable) {
  // Compression off: both rigs store the checkpoint in exactly the same bytes (auto decides by
  // measured rates, which differ from run to run).
  Rig probe(Options().Set("compression", "off"));
  ASSERT_EQ(SpillSync(*probe.p, MakeKey(7), probe.cp).status, TIER_OK);
  const uint64_t one = probe.Stats().used_bytes;
  // Room for one checkpoint (and a half), not two.
  Rig rig(Options().Set("compression", "off").Set("capacity_bytes", std::to_string(one + one / 2)));
  ASSERT_EQ(SpillSync(*rig.p, MakeKey(7), rig.cp).status, TIER_OK);
  rig.fs->HoldNextDirSync();
  const tier_key key = MakeKey(7);
  Status removed;
  std::thread remover([&] { removed = rig.p->Remove(&key); });
  ASSERT_TRUE(rig.fs->WaitDirSyncHeld(30000)) << "the remove never synced its directory";
  EXPECT_GE(rig.Stats().used_bytes, one) << "the remove gave its bytes back before its sync";
  Checkpoint other = StandardCheckpoint(8, 2);
  const Done early = SpillSync(*rig.p, MakeKey(8), other);
  EXPECT_EQ(early.status, TIER_NO_SPACE) << "a spill took the bytes of a remove not yet durable";
  rig.fs->ReleaseDirSync();
  remover.join();
  EXPECT_TRUE(removed.ok()) << removed.message();
  EXPECT_EQ(rig.Stats().used_bytes, 0u);
  EXPECT_EQ(SpillSync(*rig.p, MakeKey(8), other).status, TIER_OK);
}

TEST(FaultInjection, RemoveWhoseDirectorySyncFailsStillRemoves) {
  Rig rig;
  ASSERT_EQ(SpillSync(*rig.p, MakeKey(7), rig.cp).status, TIER_OK);
  rig.fs->Fail(FsOp::kFSyncDir, 1, EIO);
  const tier_key key = MakeKey(7);
  EXPECT_EQ(rig.p->Remove(&key).code(), TIER_OK);  // the unlink happened: not there
  EXPECT_EQ(rig.host.Value("tier_cold_removes_total", "disk,ok"), 1);
  EXPECT_TRUE(rig.host.LogContains("may reappear after a power loss"));
  rig.ExpectClean("remove with a failing directory sync");
}

TEST(FaultInjection, TempCreateEnospcIsNoSpace) {
  Rig rig;
  rig.fs->Fail(FsOp::kOpenTemp, 1, ENOSPC);
  Done d = SpillSync(*rig.p, MakeKey(7), rig.cp);
  EXPECT_EQ(d.status, TIER_NO_SPACE) << d.message;
  rig.ExpectClean("create temp");
}

TEST(FaultInjection, FtruncateFailure) {
  Rig rig;
  rig.fs->Fail(FsOp::kFTruncate, 1, EIO);
  Done d = SpillSync(*rig.p, MakeKey(7), rig.cp);
  EXPECT_EQ(d.status, TIER_IO_ERROR) << d.message;
  rig.ExpectClean("ftruncate");
}

TEST(FaultInjection, ReadEioIsIoErrorAndKeepsTheEntry) {
  Rig rig;
  ASSERT_EQ(SpillSync(*rig.p, MakeKey(7), rig.cp).status, TIER_OK);
  for (int nth : {1, 3}) {  // the header read, then a chunk read
    rig.io->Fail(IoKind::kRead, nth, -EIO);
    RestoreTarget t = MakeTarget(rig.cp);
    Done d = RestoreSync(*rig.p, MakeKey(7), t);
    EXPECT_EQ(d.status, TIER_IO_ERROR) << d.message;
    EXPECT_EQ(d.logical_bytes, 0u);
    EXPECT_EQ(rig.Stats().entries, 1u);  // an I/O error is not proof of corruption
  }
  RestoreTarget t = MakeTarget(rig.cp);
  ASSERT_EQ(RestoreSync(*rig.p, MakeKey(7), t).status, TIER_OK);
  EXPECT_TRUE(t.Equals(rig.cp));
  EXPECT_EQ(rig.host.Value("tier_cold_restores_total", "disk,io_error"), 2);
}

TEST(FaultInjection, ShortReadIsDataLoss) {
  Rig rig;
  ASSERT_EQ(SpillSync(*rig.p, MakeKey(7), rig.cp).status, TIER_OK);
  rig.io->Fail(IoKind::kRead, 2, 0);  // end of file where a chunk should be
  RestoreTarget t = MakeTarget(rig.cp);
  Done d = RestoreSync(*rig.p, MakeKey(7), t);
  EXPECT_EQ(d.status, TIER_DATA_LOSS) << d.message;
  EXPECT_EQ(rig.Stats().entries, 0u);
  EXPECT_EQ(rig.Stats().used_bytes, 0u);
  EXPECT_EQ(ListDir(rig.tmp.Sub("tier/quarantine")).size(), 1u);
}

TEST(FaultInjection, RepeatedNoSpaceIsOneLogLineThenOneSummaryPerInterval) {
  Rig rig;
  rig.host.FreezeClock(1'000'000'000'000);  // the log's interval is measured on the host clock
  constexpr int kFailures = 30;
  for (int nth = 1; nth <= kFailures + 1; ++nth) rig.fs->Fail(FsOp::kFAllocate, nth, ENOSPC);
  for (int i = 0; i < kFailures; ++i) {
    const Done d = SpillSync(*rig.p, MakeKey(7), rig.cp);
    ASSERT_EQ(d.status, TIER_NO_SPACE) << d.message;
    EXPECT_NE(d.message.find("fallocate"), std::string::npos) << d.message;
  }
  EXPECT_EQ(rig.host.Value("tier_cold_spills_total", "disk,no_space"), kFailures)
      << "each counted once";
  EXPECT_EQ(rig.host.CountLogs("fallocate"), 1u) << "one line, not one per failed spill";
  EXPECT_EQ(rig.host.CountLogs("more spill failure"), 0u);
  rig.host.AdvanceClock(11'000'000'000);
  ASSERT_EQ(SpillSync(*rig.p, MakeKey(7), rig.cp).status, TIER_NO_SPACE);
  EXPECT_EQ(rig.host.CountLogs("fallocate"), 2u);
  EXPECT_EQ(rig.host.CountLogs("30 more spill failures with no_space"), 1u)
      << "then one summary per interval";
  rig.ExpectClean("repeated no_space");  // and a spill that fits succeeds again
}

TEST(FaultInjection, FullFilesystemRefusesSpillsAtSubmitWithoutWriting) {
  Rig rig;
  rig.fs->ReportFreeBytes(64u << 10);         // statfs: 64 KiB free
  rig.fs->Fail(FsOp::kFAllocate, 1, ENOSPC);  // and the first spill finds the disk full
  const Done first = SpillSync(*rig.p, MakeKey(7), rig.cp);
  ASSERT_EQ(first.status, TIER_NO_SPACE) << first.message;
  const int temps_created = rig.fs->calls(FsOp::kOpenTemp);
  for (int i = 0; i < 20; ++i) {  // a retry storm: answered at submit, nothing written
    Status sync;
    const Done d = SpillSync(*rig.p, MakeKey(7), rig.cp, &sync);
    ASSERT_EQ(sync.code(), TIER_NO_SPACE) << sync.message();
    EXPECT_NE(sync.message().find("is full"), std::string::npos) << sync.message();
    EXPECT_EQ(d.calls, 0) << "refused: no completion";
  }
  EXPECT_EQ(rig.fs->calls(FsOp::kOpenTemp), temps_created) << "no file was created";
  EXPECT_EQ(rig.host.Value("tier_cold_spills_total", "disk,no_space"), 21);
  EXPECT_EQ(rig.host.CountLogs("No space left"), 1u);
  EXPECT_EQ(rig.Stats().inflight_ops, 0u);
  rig.fs->ReportFreeBytes(1ull << 40);  // space came back
  rig.ExpectClean("full filesystem");
}

TEST(FaultInjection, EveryWriteFailurePointLeavesNothing) {
  // Fail each write of a spill in turn (chunks, then the header).
  for (int nth = 1; nth <= 7; ++nth) {
    SCOPED_TRACE("write " + std::to_string(nth));
    Rig rig(Options().Set("chunk_kib", "512"));
    rig.io->Fail(IoKind::kWrite, nth, -EIO);
    Done d = SpillSync(*rig.p, MakeKey(7), rig.cp);
    if (d.status == TIER_OK) continue;  // fewer writes than nth
    EXPECT_EQ(d.status, TIER_IO_ERROR) << d.message;
    rig.ExpectClean("write " + std::to_string(nth));
  }
}

}  // namespace
}  // namespace tier::disk::test
