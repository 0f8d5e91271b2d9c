// RadosFaults: the cluster misbehaves and every operation still ends, within op_timeout_s and a
// margin: an OSD killed in the middle of a spill or a restore (IO_ERROR, or OK once it is back,
// and the same instance works again), a cluster that is down at open (one line naming the mon),
// a pool quota (NO_SPACE at once; removes still go through), options the cluster cannot take, a
// client that may not write (refused at open); no admin socket unless asked.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <thread>

#include "checkpoint_bytes.h"
#include "rados_test_env.h"

namespace tier::rados::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kOpTimeoutS = 3;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

ProviderOptions FaultOptions(const ClusterInfo& c) {
  return Options(c, {{"op_timeout_s", std::to_string(kOpTimeoutS)},
                     {"lease_grace_s", "8"},
                     {"queue_depth", "2"}});
}

// After the OSD is back, the same instance spills and restores again (bounded retries: the first
// operations after a restart may still meet the old map).
void ExpectInstanceRecovers(Provider& p, const std::string& label) {
  Checkpoint cp = MakeCheckpoint(label, 2000000);
  tier_status last = -1;
  EXPECT_TRUE(Eventually(40,
                         [&] {
                           p.Remove(cp.key).IgnoreError();
                           last = p.Spill(cp.key, cp.Segments()).status;
                           return last == TIER_OK;
                         }))
      << "no successful spill after the OSD came back (last: " << tier_status_name(last) << ")";
  const Done d = p.Restore(cp.key, cp.EmptySegments());
  EXPECT_EQ(d.status, TIER_OK) << d.message;
  EXPECT_TRUE(cp.Matches());
}

TEST(RadosFaults, OsdKilledMidSpillCompletesWithinTheTimeout) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  auto p = Provider::Open(UniqueNamespace("fault-spill"), FaultOptions(c));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  OsdGuard osd(c);
  Checkpoint cp = MakeCheckpoint("fault-spill", 160000000);
  Provider::Pending pending;
  ASSERT_EQ(p.value()->SpillAsync(cp.key, cp.Segments(), &pending), TIER_OK);
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const auto kill = osd.Kill();
  ASSERT_EQ(kill.exit_code, 0) << kill.out << kill.err;
  const auto killed_at = Clock::now();
  ASSERT_TRUE(pending.Wait(4 * kOpTimeoutS + 10)) << "the spill hangs after the OSD died";
  const double after_s = SecondsSince(killed_at);
  EXPECT_TRUE(pending.done.status == TIER_IO_ERROR || pending.done.status == TIER_OK)
      << tier_status_name(pending.done.status) << ": " << pending.done.message;
  std::printf("OsdKilledMidSpill: %s %.1f s after the kill: %s\n",
              tier_status_name(pending.done.status), after_s, pending.done.message.c_str());
  // While it is down, a new spill and a stat also end (with an error) instead of hanging.
  Checkpoint other = MakeCheckpoint("fault-spill-while-down", 2000000);
  const auto t0 = Clock::now();
  const Done down = p.value()->Spill(other.key, other.Segments());
  EXPECT_EQ(down.status, TIER_IO_ERROR) << down.message;
  const double spill_s = SecondsSince(t0);
  const auto t1 = Clock::now();
  EXPECT_NE(p.value()->Stat(other.key).status().code(), TIER_OK);
  std::printf("OsdKilledMidSpill: while the OSD is down: a spill %s in %.1f s, a stat in %.1f s\n",
              tier_status_name(down.status), spill_s, SecondsSince(t1));
  osd.Restart();
  ExpectInstanceRecovers(*p.value(), "fault-spill-after");
  if (pending.done.status == TIER_OK) {
    ASSERT_EQ(p.value()->Restore(cp.key, cp.EmptySegments()).status, TIER_OK);
    EXPECT_TRUE(cp.Matches());
  }
}

TEST(RadosFaults, OsdKilledMidRestoreCompletesWithinTheTimeout) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  auto p = Provider::Open(UniqueNamespace("fault-restore"), FaultOptions(c));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  Checkpoint cp = MakeCheckpoint("fault-restore", 160000000);
  ASSERT_EQ(p.value()->Spill(cp.key, cp.Segments()).status, TIER_OK);
  OsdGuard osd(c);
  Provider::Pending pending;
  ASSERT_EQ(p.value()->RestoreAsync(cp.key, cp.EmptySegments(), &pending), TIER_OK);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto kill = osd.Kill();
  ASSERT_EQ(kill.exit_code, 0) << kill.out << kill.err;
  const auto killed_at = Clock::now();
  ASSERT_TRUE(pending.Wait(4 * kOpTimeoutS + 10)) << "the restore hangs after the OSD died";
  EXPECT_TRUE(pending.done.status == TIER_IO_ERROR || pending.done.status == TIER_OK)
      << tier_status_name(pending.done.status) << ": " << pending.done.message;
  if (pending.done.status == TIER_OK) {
    EXPECT_TRUE(cp.Matches());
  }
  std::printf("OsdKilledMidRestore: %s %.1f s after the kill: %s\n",
              tier_status_name(pending.done.status), SecondsSince(killed_at),
              pending.done.message.c_str());
  osd.Restart();
  // What was acknowledged before the kill reads back whole from BlueStore.
  tier_status last = -1;
  EXPECT_TRUE(Eventually(40, [&] {
    last = p.value()->Restore(cp.key, cp.EmptySegments()).status;
    return last == TIER_OK;
  })) << tier_status_name(last);
  EXPECT_TRUE(cp.Matches());
}

TEST(RadosFaults, ClusterDownAtOpenFailsWithinTheTimeoutInOneLineNamingTheMon) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  ::tier::test::ScopedTempDir tmp("rados-down");
  // A cluster nobody answers for: the fixture's keys, a mon address with no mon behind it.
  const std::string conf = tmp.path() + "/ceph.conf";
  std::ofstream(conf) << "[global]\nmon_host = [v2:127.0.0.1:9]\nauth_client_required = cephx\n";
  ProviderOptions options = FaultOptions(c);
  for (auto& [k, v] : options) {
    if (k == "conf") v = conf;
  }
  std::vector<std::string> args = {"--ns", UniqueNamespace("fault-down")};
  for (const auto& x : OptionArgs(options)) args.push_back(x);
  args.push_back("open");
  const auto t0 = Clock::now();
  const auto r = RunWorker(args);
  const double seconds = SecondsSince(t0);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_EQ(::tier::test::CountLines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("127.0.0.1:9"), std::string::npos) << "the line names the mon: " << r.out;
  EXPECT_NE(r.out.find("io_error"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "") << "librados must not write to the server's stderr";
  EXPECT_LT(seconds, 4 * kOpTimeoutS + 10) << "bounded by op_timeout_s, not librados's 300 s";
  std::printf("ClusterDownAtOpen: %.1f s: %s", seconds, r.out.c_str());
}

TEST(RadosFaults, PoolQuotaMakesSpillsNoSpaceAndRemovesStillWork) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  auto admin = Admin::Connect(c);
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  constexpr uint64_t kSpillBytes = 3000000, kQuotaBytes = 16777216;
  std::random_device device;
  const std::string pool = "tier-quota-" + std::to_string(device() % 1000000);
  ASSERT_TRUE(admin.value()
                  ->MonCommand(R"({"prefix": "osd pool create", "pool": ")" + pool +
                               R"(", "pg_num": 8, "pgp_num": 8})")
                  .ok());
  struct DropPool {
    Admin* admin;
    std::string pool;
    ~DropPool() {
      admin
          ->MonCommand(R"({"prefix": "osd pool delete", "pool": ")" + pool + R"(", "pool2": ")" +
                       pool + R"(", "yes_i_really_really_mean_it": true})")
          .IgnoreError();
    }
  } drop{admin.value().get(), pool};
  ASSERT_TRUE(admin.value()
                  ->MonCommand(R"({"prefix": "osd pool set-quota", "pool": ")" + pool +
                               R"(", "field": "max_bytes", "val": ")" +
                               std::to_string(kQuotaBytes) + R"("})")
                  .ok());
  auto p = Provider::Open(UniqueNamespace("fault-quota"),
                          Options(c, {{"pool", pool}, {"op_timeout_s", "5"}}));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  // The quota is enforced late (the mon learns the pool's size from the mgr's digest, seconds
  // after the writes, later on a loaded machine): spill until the pool is marked full, slowly once
  // past the quota so the wait is bounded in time (60 s) and in bytes (~200 spills past it); from
  // then on every spill fails with NO_SPACE, quickly.
  std::vector<tier_key> stored;
  Done last;
  const auto t0 = Clock::now();
  for (int i = 0; i < 1000 && SecondsSince(t0) < 60; ++i) {
    Checkpoint cp = MakeCheckpoint("quota/" + std::to_string(i), kSpillBytes);
    last = p.value()->Spill(cp.key, cp.Segments());
    if (last.status != TIER_OK) break;
    stored.push_back(cp.key);
    if (stored.size() * kSpillBytes > 2 * kQuotaBytes) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
  }
  ASSERT_EQ(last.status, TIER_NO_SPACE) << tier_status_name(last.status) << ": " << last.message;
  std::printf("PoolQuota: full after %zu spills (%.1f s): %s\n", stored.size(), SecondsSince(t0),
              last.message.c_str());
  Checkpoint again = MakeCheckpoint("quota/again", kSpillBytes);
  const auto t1 = Clock::now();
  EXPECT_EQ(p.value()->Spill(again.key, again.Segments()).status, TIER_NO_SPACE);
  EXPECT_LT(SecondsSince(t1), 5.0 + 2) << "a full pool fails a spill at once (FULL_TRY)";
  ASSERT_FALSE(stored.empty());
  // Removes go through on a full pool (FULL_FORCE) and the checkpoint is gone.
  const auto t2 = Clock::now();
  EXPECT_TRUE(p.value()->Remove(stored.back()).ok());
  EXPECT_LT(SecondsSince(t2), 5.0 + 2);
  EXPECT_EQ(p.value()->Stat(stored.back()).status().code(), TIER_NOT_FOUND);
  // What was stored before the pool filled restores exactly.
  Checkpoint first = MakeCheckpoint("quota/0", kSpillBytes);
  ASSERT_EQ(p.value()->Restore(first.key, first.EmptySegments()).status, TIER_OK);
  EXPECT_TRUE(first.Matches());
}

TEST(RadosFaults, ObjectMibPastTheClusterLimitsIsRefusedNamingBoth) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  auto p = Provider::Open(UniqueNamespace("fault-limits"), Options(c, {{"object_mib", "100"}}));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), TIER_INVALID_ARGUMENT);
  for (const char* word : {"object_mib", "osd_max_object_size", "osd_max_write_size"}) {
    EXPECT_NE(p.status().message().find(word), std::string::npos) << p.status().message();
  }
}

TEST(RadosFaults, UnknownPoolAndBadOptionsAreRefusedNamingThem) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  auto pool = Provider::Open(UniqueNamespace("fault-pool"), Options(c, {{"pool", "no-such-pool"}}));
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(pool.status().message().find("no-such-pool"), std::string::npos);
  auto unknown = Provider::Open(UniqueNamespace("fault-opt"), Options(c, {{"chunk_kib", "64"}}));
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("'chunk_kib'"), std::string::npos);
  auto keyring = Provider::Open(UniqueNamespace("fault-key"),
                                Options(c, {{"keyring", "/nonexistent/keyring"}}));
  ASSERT_FALSE(keyring.ok());
  EXPECT_NE(keyring.status().message().find("keyring"), std::string::npos)
      << keyring.status().message();
}

// Issue 26, 8: a client whose OSD caps are read-only is refused at open, naming the caps, instead
// of opening and failing every spill with EPERM.
TEST(RadosFaults, ReadOnlyClientIsRefusedAtOpenNamingTheCaps) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  auto admin = Admin::Connect(c);
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  const std::string id = "ro-" + std::to_string(::getpid());
  std::string keyring;
  ASSERT_TRUE(admin.value()
                  ->MonCommand(R"({"prefix": "auth get-or-create", "entity": "client.)" + id +
                                   R"(", "caps": ["mon", "allow r", "osd", "allow r pool=)" +
                                   c.pool + R"("]})",
                               &keyring)
                  .ok());
  const std::string path = c.dir + "/client." + id + ".keyring";
  std::ofstream(path) << keyring;
  auto p =
      Provider::Open(UniqueNamespace("fault-ro"), Options(c, {{"client", id}, {"keyring", path}}));
  admin.value()
      ->MonCommand(R"({"prefix": "auth del", "entity": "client.)" + id + R"("})")
      .IgnoreError();
  ASSERT_FALSE(p.ok()) << "a read-only client opened";
  EXPECT_EQ(p.status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(p.status().message().find("may not write to pool '" + c.pool + "'"), std::string::npos)
      << p.status().message();
  EXPECT_NE(p.status().message().find("allow rw"), std::string::npos) << p.status().message();
}

// Issue 26, 5: the provider opens no librados admin socket unless asked (the test cluster's conf
// asks for one per client name): nothing local can connect to it, or hang up on it to raise
// SIGPIPE in the server.
TEST(RadosFaults, NoAdminSocketUnlessAsked) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  auto connectable = [](const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof(address.sun_path), "%s", path.c_str());
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    ::close(fd);
    return ok;
  };
  const std::string conf_socket = c.dir + "/run/ceph-client." + c.client + ".asok";
  auto p = Provider::Open(UniqueNamespace("fault-asok"), Options(c));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(connectable(conf_socket)) << conf_socket << " answers";
  const std::string asked = c.dir + "/run/asked-" + std::to_string(::getpid()) + ".asok";
  auto q = Provider::Open(UniqueNamespace("fault-asok"), Options(c, {{"admin_socket", asked}}));
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_TRUE(Eventually(10, [&] { return connectable(asked); })) << "asked for, and not there";
}

}  // namespace
}  // namespace tier::rados::test
