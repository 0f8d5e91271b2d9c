// HostOverDisk: the Host over the real disk provider (libtier_faultydisk.so: the disk core with
// its fault seams driven by options). When the disk fails a spill, the Host keeps its Host copy
// and both its metrics and the provider's count it; when it fails a restore, the admission
// prefills from the root and the cold copy stays; a damaged cold file is never served.
#include <fcntl.h>
#include <unistd.h>

#include <tier/host/identity.h>
#include "disk_test_util.h"

#include "host_fixture.h"

namespace tier::host::test {
namespace {

using disk::test::FileBytes;
using disk::test::ListDir;
using disk::test::TempDir;

class HostOverDisk : public HostTest {
 protected:
  ProviderOptions DiskOptions(const std::string& fault = "") {
    ProviderOptions o = {{"dir", tmp_.Sub("tier")},   {"capacity_bytes", "67108864"},
                         {"chunk_kib", "64"},         {"staging_mib", "1"},
                         {"durability", "fdatasync"}, {"compression", "off"}};
    if (!fault.empty()) o.push_back({"fault", fault});
    return o;
  }
  void OpenOverDisk(const std::string& fault = "") {
    Open(TIER_FAULTYDISK_PLUGIN_PATH, DiskOptions(fault), Bytes(1) * 3 / 2, Bytes(1) * 5 / 2);
  }
  // a, b, c, d sealed one after the other: Device holds one, Host two, so a (then b, when a's
  // spill fails) is pushed from Host towards Cold.
  void SealFour() {
    for (const auto& blocks : {a_, b_, c_, d_}) {
      ASSERT_TRUE(Seal(blocks, blocks[0] / 10));
    }
  }
  // Names in the tier directory other than LOCK and quarantine/.
  std::vector<std::string> Files() {
    std::vector<std::string> out;
    for (const std::string& n : ListDir(tmp_.Sub("tier"))) {
      if (n != "LOCK" && n != "quarantine") out.push_back(n);
    }
    return out;
  }
  double ProviderCounter(const std::string& family, const std::string& result) {
    return Counter(family + "{provider=\"disk\",result=\"" + result + "\"}");
  }

  TempDir tmp_;
  const std::vector<uint64_t> a_ = Blocks(10, 1), b_ = Blocks(20, 1), c_ = Blocks(30, 1),
                              d_ = Blocks(40, 1);
};

TEST_F(HostOverDisk, SpillsReachColdWhenNothingFails) {
  OpenOverDisk();
  SealFour();
  EXPECT_EQ(host_->Stats().spill_failures, 0u);
  EXPECT_EQ(PlacementsOf(a_), kC) << "the least valuable went all the way down";
  EXPECT_EQ(PlacementsOf(b_), kH);
  EXPECT_EQ(Files().size(), 1u);
  EXPECT_EQ(ProviderCounter("tier_cold_spills_total", "ok"), 1);
  Admission admission = AdmitAndWait(a_, 10);
  EXPECT_EQ(admission.outcome, Outcome::kColdRestore);
  EXPECT_EQ(mismatched_, 0u);
  Release(admission);
}

struct FaultCase {
  const char* name;
  const char* fault;   // the faultydisk `fault` option
  const char* result;  // the provider's completion status (metric label)
};

void PrintTo(const FaultCase& c, std::ostream* os) {
  *os << c.fault;
}

class HostOverFailingDisk : public HostOverDisk, public ::testing::WithParamInterface<FaultCase> {};

TEST_P(HostOverFailingDisk, KeepsTheHostCopyAndCountsTheFailure) {
  OpenOverDisk(GetParam().fault);
  SealFour();
  // As HostPressure.FailedSpillKeepsTheHostCopyAndBacksOff, with the real disk provider failing
  // underneath: one failure, then spills back off and room is made by value.
  EXPECT_EQ(host_->Stats().spill_failures, 1u);
  EXPECT_EQ(Counter(R"(tier_spill_failures_total{action="kept_host"})"), 1);
  EXPECT_EQ(Counter(R"(tier_spill_failures_total{action="dropped"})"), 1);
  EXPECT_EQ(ProviderCounter("tier_cold_spills_total", GetParam().result), 1)
      << "the provider counts the failed spill by its status";
  EXPECT_EQ(ProviderCounter("tier_cold_spills_total", "ok"), 0);
  EXPECT_EQ(PlacementsOf(a_), 0);
  EXPECT_EQ(PlacementsOf(b_), kH) << "its spill failed: the Host copy is kept, not lost";
  EXPECT_EQ(host_->Stats().cold_entries, 0u);
  EXPECT_EQ(Files(), std::vector<std::string>{}) << "nothing partial on disk";
  EXPECT_EQ(Counter(R"(tier_cold_entries{provider="disk"})"), 0);
  EXPECT_EQ(Counter(R"(tier_cold_used_bytes{provider="disk"})"), 0);
  Admission admission = AdmitAndWait(b_, 5);
  EXPECT_EQ(admission.outcome, Outcome::kHostRestore) << "the kept copy serves the request";
  EXPECT_EQ(mismatched_, 0u);
  Release(admission);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, HostOverFailingDisk,
    ::testing::Values(FaultCase{"write_eio", "write:1:100000:EIO", "io_error"},
                      FaultCase{"write_enospc", "write:1:100000:ENOSPC", "no_space"},
                      FaultCase{"short_write", "write:1:100000:short", "io_error"},
                      FaultCase{"create_enospc", "create:1:100000:ENOSPC", "no_space"},
                      FaultCase{"ftruncate_eio", "ftruncate:1:100000:EIO", "io_error"},
                      FaultCase{"fdatasync_eio", "fdatasync:1:100000:EIO", "io_error"},
                      FaultCase{"fdatasync_enospc", "fdatasync:1:100000:ENOSPC", "no_space"},
                      FaultCase{"rename_eio", "rename:1:100000:EIO", "io_error"},
                      FaultCase{"fsync_dir_eio", "fsync_dir:1:100000:EIO", "io_error"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(HostOverDisk, RestoreReadErrorPrefillsFromTheRootAndKeepsTheColdCopy) {
  OpenOverDisk("read:1:1:EIO");  // the first read of the first restore fails, then the disk heals
  SealFour();
  ASSERT_EQ(PlacementsOf(a_), kC);
  Admission failed = AdmitAndWait(a_, 10);
  EXPECT_EQ(failed.outcome, Outcome::kRootPrefill);
  EXPECT_EQ(failed.root_reason, RootReason::kRestoreFailed);
  EXPECT_EQ(Counter(R"(tier_root_prefills_total{reason="restore_failed"})"), 1);
  EXPECT_EQ(ProviderCounter("tier_cold_restores_total", "io_error"), 1);
  EXPECT_EQ(PlacementsOf(a_), kC) << "an I/O error is not corruption: the cold copy stays";
  Admission retried = AdmitAndWait(a_, 11);
  EXPECT_EQ(retried.outcome, Outcome::kColdRestore);
  EXPECT_EQ(mismatched_, 0u);
  Release(retried);
}

TEST_F(HostOverDisk, DamagedColdCheckpointIsNeverServed) {
  OpenOverDisk();
  SealFour();
  ASSERT_EQ(PlacementsOf(a_), kC);
  // Damage a's file on disk behind the provider's back (one byte of its first data block).
  const tier_key key = PrefixKey("host-test", a_);
  std::string path;
  for (const std::string& n : Files()) {
    if (n.find(disk::Hex(std::span(key.bytes, TIER_KEY_BYTES))) != std::string::npos) {
      path = tmp_.Sub("tier/" + n);
    }
  }
  ASSERT_FALSE(path.empty());
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint8_t byte = 0;
  ASSERT_EQ(::pread(fd, &byte, 1, 4096 + 100), 1);
  byte ^= 0x10;
  ASSERT_EQ(::pwrite(fd, &byte, 1, 4096 + 100), 1);
  ::close(fd);
  Admission admission = AdmitAndWait(a_, 10);
  EXPECT_EQ(admission.outcome, Outcome::kRootPrefill);
  EXPECT_EQ(admission.root_reason, RootReason::kCorrupt);
  EXPECT_EQ(verified_, 0u) << "the provider caught it: no wrong byte reached the server";
  EXPECT_FALSE(Info(a_).has_value()) << "its only copy was damaged: it leaves the catalog";
  EXPECT_EQ(FileBytes(path), static_cast<uint64_t>(-1));
  EXPECT_EQ(ListDir(tmp_.Sub("tier/quarantine")).size(), 1u);
  EXPECT_EQ(Counter(R"(tier_cold_data_loss_total{provider="disk",where="restore"})"), 1);
}

}  // namespace
}  // namespace tier::host::test
