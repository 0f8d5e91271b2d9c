// RadosPowerLoss: the power-loss question for the shared tier, as far as a single-node cluster can
// ask it. Two servers (two provider instances on one pool and namespace) spill and restore; the
// OSD is killed with SIGKILL (not stopped: no flush, no clean shutdown) while they do, and started
// again. Then a third server opens (its sweep runs) and checks: every spill that completed OK
// before or after the kill is there and restores byte-exact; nothing restores wrong bytes, during
// the outage or after; what is visible is only what was spilled, whole; a spill the kill cut in
// half is invisible, and once its lease is stale its chunks are swept.
//
// What pool size 1 cannot show: with one OSD the kill takes the whole pool away, so no write is
// acknowledged by a primary whose replicas have not applied it, and nothing is peered, recovered
// or backfilled afterwards (the cases where replicated pools lose or resurrect writes); and the
// OSD process dies but the machine does not: BlueStore's writes already handed to the kernel are
// not lost as in a power cut of the node. What it shows is that an acknowledged write survives its
// OSD's crash and that the provider's publish (header last, exclusive create) leaves nothing torn.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "checkpoint_bytes.h"
#include "format.h"
#include "rados_test_env.h"

namespace tier::rados::test {
namespace {

constexpr int kGraceS = 8;  // lease_grace_s (the least op_timeout_s=3 allows)
constexpr uint64_t kKvBytes = 3000000;

// One server's loop: spills "<label>/<i>" for i = 0, 1, ...; after each completed spill restores
// a random earlier one. Records what completed and every wrong byte it was ever served.
class Server {
 public:
  Server(Provider* p, std::string label) : p_(p), label_(std::move(label)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Server() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  size_t completed() {
    std::lock_guard lock(mu_);
    return ok_.size();
  }
  std::vector<std::string> ok() {
    std::lock_guard lock(mu_);
    return ok_;
  }
  std::set<std::string> begun() {
    std::lock_guard lock(mu_);
    return begun_;
  }
  int wrong_bytes() const { return wrong_.load(); }
  int failures() const { return failures_.load(); }

 private:
  void Run() {
    for (int i = 0; !stop_; ++i) {
      const std::string name = label_ + "/" + std::to_string(i);
      Checkpoint cp = MakeCheckpoint(name, kKvBytes);
      {
        std::lock_guard lock(mu_);
        begun_.insert(name);
      }
      const Done d = p_->Spill(cp.key, cp.Segments());
      if (d.status != TIER_OK) {
        ++failures_;  // the OSD is down: IO_ERROR within op_timeout_s
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        continue;
      }
      std::string earlier;
      {
        std::lock_guard lock(mu_);
        ok_.push_back(name);
        earlier = ok_[static_cast<size_t>(i) * 7919 % ok_.size()];
      }
      Checkpoint back = MakeCheckpoint(earlier, kKvBytes);
      const Done r = p_->Restore(back.key, back.EmptySegments());
      if (r.status == TIER_OK && !back.Matches()) ++wrong_;
    }
  }

  Provider* p_;
  const std::string label_;
  std::atomic<bool> stop_{false};
  std::atomic<int> wrong_{0}, failures_{0};
  std::mutex mu_;
  std::vector<std::string> ok_;
  std::set<std::string> begun_;
  std::thread thread_;
};

TEST(RadosPowerLoss, OsdSigkilledDuringTwoServersSpillsAndRestoresLosesNothingCompleted) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  auto admin = Admin::Connect(c);
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  const std::string ns = UniqueNamespace("osdkill");
  const ProviderOptions options = Options(
      c, {{"op_timeout_s", "3"}, {"lease_grace_s", std::to_string(kGraceS)}, {"queue_depth", "2"}});
  auto a = Provider::Open(ns, options), b = Provider::Open(ns, options);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << " / " << b.status().ToString();
  std::vector<std::string> ok;
  std::set<std::string> begun;
  int wrong = 0, failures = 0;
  {
    OsdGuard osd(c);
    Server sa(a.value().get(), "osdkill-a"), sb(b.value().get(), "osdkill-b");
    ASSERT_TRUE(Eventually(60, [&] { return sa.completed() >= 3 && sb.completed() >= 3; }))
        << "the servers did not complete 3 spills each before the kill";
    const auto kill = osd.Kill();
    ASSERT_EQ(kill.exit_code, 0) << kill.out << kill.err;
    const size_t before_a = sa.completed(), before_b = sb.completed();
    std::this_thread::sleep_for(std::chrono::seconds(2));  // operations meet the dead OSD
    osd.Restart();
    EXPECT_TRUE(Eventually(60, [&] {
      return sa.completed() >= before_a + 2 && sb.completed() >= before_b + 2;
    })) << "the servers did not spill again after the OSD came back";
    sa.Stop();
    sb.Stop();
    for (Server* s : {&sa, &sb}) {
      for (const std::string& n : s->ok()) ok.push_back(n);
      for (const std::string& n : s->begun()) begun.insert(n);
      wrong += s->wrong_bytes();
      failures += s->failures();
    }
  }
  std::printf("RadosPowerLoss: %zu spills completed, %d failed around the kill, %zu begun\n",
              ok.size(), failures, begun.size());
  EXPECT_EQ(wrong, 0) << "a restore served wrong bytes";
  a.value()->Close();
  b.value()->Close();

  // Once every lease the kill orphaned is stale, a third server opens: its sweep runs.
  std::this_thread::sleep_for(std::chrono::seconds(kGraceS + 1));
  auto observer = Provider::Open(ns, options);
  ASSERT_TRUE(observer.ok()) << observer.status().ToString();
  for (const std::string& name : ok) {
    Checkpoint cp = MakeCheckpoint(name, kKvBytes);
    const Done d = observer.value()->Restore(cp.key, cp.EmptySegments());
    EXPECT_EQ(d.status, TIER_OK) << name << " completed OK but: " << d.message;
    EXPECT_TRUE(d.status != TIER_OK || cp.Matches()) << name << ": WRONG BYTES";
  }
  auto entries = observer.value()->Enumerate();
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  std::set<std::string> visible_hex;
  for (const std::string& name : begun) {
    Checkpoint cp = MakeCheckpoint(name, kKvBytes);
    auto st = observer.value()->Stat(cp.key);
    if (!st.ok()) continue;  // never published (cut by the kill): invisible
    visible_hex.insert(Hex({cp.key.bytes, TIER_KEY_BYTES}));
    const Done d = observer.value()->Restore(cp.key, cp.EmptySegments());
    EXPECT_EQ(d.status, TIER_OK) << name << " is visible but: " << d.message;
    EXPECT_TRUE(d.status != TIER_OK || cp.Matches()) << name << ": WRONG BYTES";
  }
  EXPECT_EQ(entries.value().size(), visible_hex.size()) << "a visible entry was never spilled";
  // Half-written spills are swept: every chunk object left belongs to a visible checkpoint.
  for (const std::string& object : admin.value()->List(RadosNamespaceOf(ns))) {
    if (object.rfind("c.", 0) != 0) continue;
    const std::string hex = object.substr(2, 2 * TIER_KEY_BYTES);
    EXPECT_EQ(visible_hex.count(hex), 1u) << "chunk object " << object << " outlived the sweep";
  }
}

}  // namespace
}  // namespace tier::rados::test
