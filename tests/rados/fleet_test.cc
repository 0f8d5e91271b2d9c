// RadosFleet: two servers (two processes, two provider instances) on one pool and namespace. A
// checkpoint spilled by one is found (probe), described (stat, plan) and restored byte-exact by
// the other without reopening; a remove racing a restore never yields wrong bytes; two servers
// spilling one key store it once and leave no chunks of the loser behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <set>
#include <thread>

#include "checkpoint_bytes.h"
#include "format.h"
#include "rados_test_env.h"

namespace tier::rados::test {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

TEST(RadosFleet, CheckpointSpilledByAnotherProcessIsRestoredExactlyWithoutReopening) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  const std::string ns = UniqueNamespace("fleet-exact");
  // Server B opens first and stays open: it must find what A spills later.
  auto b = Provider::Open(ns, Options(c));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  tier_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(b.value()->table()->info(b.value()->instance(), &info, nullptr), TIER_OK);
  EXPECT_EQ(info.capabilities & (TIER_CAP_SHARED | TIER_CAP_PERSISTENT | TIER_CAP_CHECKSUMS),
            uint32_t{TIER_CAP_SHARED | TIER_CAP_PERSISTENT | TIER_CAP_CHECKSUMS});
  ASSERT_TRUE(TIER_HAS_SLOT(b.value()->table(), tier_provider, probe)) << "the 1.1 probe slot";
  constexpr int kCount = 3;
  const auto run = RunWorker([&] {
    std::vector<std::string> args = {"--ns", ns};
    for (const auto& a : OptionArgs(Options(c))) args.push_back(a);
    for (const char* a : {"spill-loop", "parked", "3", "3000000"}) args.push_back(a);
    return args;
  }());
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  for (int i = 0; i < kCount; ++i) {
    EXPECT_NE(run.out.find("spilled " + std::to_string(i) + " ok"), std::string::npos) << run.out;
  }
  std::vector<tier_key> keys;
  for (int i = 0; i < kCount; ++i) keys.push_back(KeyFromText("parked/" + std::to_string(i)));
  keys.push_back(KeyFromText("parked/never"));
  auto found = b.value()->Probe(keys);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(*found, (std::vector<uint8_t>{1, 1, 1, 0}));
  for (int i = 0; i < kCount; ++i) {
    Checkpoint want = MakeCheckpoint("parked/" + std::to_string(i), 3000000);
    auto stat = b.value()->Stat(want.key);
    ASSERT_TRUE(stat.ok()) << stat.status().ToString();
    EXPECT_EQ(stat->segment_count, want.layout.size());
    EXPECT_EQ(stat->logical_bytes, want.logical_bytes());
    auto plan = b.value()->Plan(want.key, 3600ull * 1'000'000'000ull);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->decision, TIER_DECISION_RESTORE);
    const Done d = b.value()->Restore(want.key, want.EmptySegments());
    ASSERT_EQ(d.status, TIER_OK) << d.message;
    EXPECT_TRUE(want.Matches()) << "restored bytes of parked/" << i << " differ";
  }
  // Enumerate lists A's checkpoints, with the 1.1 times.
  auto entries = b.value()->Enumerate();
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), static_cast<size_t>(kCount));
  for (const tier_entry& e : *entries) {
    ASSERT_GE(e.struct_size, sizeof(tier_entry));
    EXPECT_GT(e.created_unix_ns, 0u);
    EXPECT_GE(e.last_used_unix_ns, e.created_unix_ns);
  }
  auto stats = b.value()->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->entries, static_cast<uint64_t>(kCount)) << "enumerate recounts the namespace";
}

TEST(RadosFleet, RestoreRecordsTheLastUseForEveryServer) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  const std::string ns = UniqueNamespace("fleet-last-use");
  auto a = Provider::Open(ns, Options(c));
  auto b = Provider::Open(ns, Options(c));
  ASSERT_TRUE(a.ok() && b.ok());
  Checkpoint cp = MakeCheckpoint("last-use", 2000000);
  ASSERT_EQ(a.value()->Spill(cp.key, cp.Segments()).status, TIER_OK);
  auto before = b.value()->Enumerate();
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(before->size(), 1u);
  EXPECT_EQ(before->at(0).last_used_unix_ns, before->at(0).created_unix_ns);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(b.value()->Restore(cp.key, cp.EmptySegments()).status, TIER_OK);
  // Best effort and asynchronous: it lands shortly after the restore completes.
  EXPECT_TRUE(Eventually(10, [&] {
    auto after = a.value()->Enumerate();
    return after.ok() && after->size() == 1 &&
           after->at(0).last_used_unix_ns > before->at(0).created_unix_ns;
  })) << "server A sees B's restore as the checkpoint's last use";
}

TEST(RadosFleet, RemoveRacingRestoreNeverServesWrongBytes) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  const std::string ns = UniqueNamespace("fleet-race");
  auto b = Provider::Open(ns, Options(c));
  ASSERT_TRUE(b.ok());
  ::tier::test::ScopedTempDir tmp("rados-race");
  // Server A spills generation after generation of one key (each with its own bytes) and removes
  // each one; B restores the key as fast as it can meanwhile.
  std::vector<std::string> args = {"--ns", ns};
  for (const auto& x : OptionArgs(Options(c))) args.push_back(x);
  for (const char* x : {"churn", "contested", "2000000", "6"}) args.push_back(x);
  const int pid = StartWorker(args, tmp.path() + "/churn.out");
  ASSERT_GT(pid, 0);
  int ok = 0, absent = 0, lost = 0, attempts = 0, interrupted = 0;
  const tier_key key = KeyFromText("contested");
  Checkpoint shape = MakeCheckpoint("contested", 2000000);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(6);
  while (std::chrono::steady_clock::now() < until) {
    ++attempts;
    const Done d = b.value()->Restore(key, shape.EmptySegments());
    if (d.status == TIER_OK) {
      // Every segment must come from one and the same generation.
      bool whole = false;
      for (int gen = 0; gen < 10000 && !whole; ++gen) {
        whole = shape.MatchesContent(KeyFromText("contested#" + std::to_string(gen)));
      }
      EXPECT_TRUE(whole) << "a restore completed OK with bytes of no single generation";
      ++ok;
    } else if (d.status == TIER_NOT_FOUND) {
      ++absent;
      interrupted += d.message.find("during the restore") != std::string::npos ? 1 : 0;
    } else if (d.status == TIER_DATA_LOSS) {
      ++lost;
    } else {
      ADD_FAILURE() << "restore: " << tier_status_name(d.status) << ": " << d.message;
    }
  }
  ASSERT_EQ(WaitWorker(pid, 60), 0);
  std::ifstream in(tmp.path() + "/churn.out");
  const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(out.find(" ok"), std::string::npos) << out;
  std::printf(
      "RemoveRacingRestore: %d restores: %d ok, %d not_found (%d removed mid-restore), "
      "%d data_loss; churn: %zu generations\n",
      attempts, ok, absent, interrupted, lost, Lines(out).size());
  EXPECT_GT(ok + absent, 0);
}

TEST(RadosFleet, TwoProcessesSpillingOneKeyStoreItOnceAndLeaveNoChunksOfTheLoser) {
  ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  auto admin = Admin::Connect(c);
  ASSERT_TRUE(admin.ok()) << admin.status().ToString();
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string ns = UniqueNamespace("fleet-exclusive");
    ::tier::test::ScopedTempDir tmp("rados-exclusive");
    const std::string go = tmp.path() + "/go";
    std::vector<std::string> args = {"--ns", ns};
    for (const auto& x : OptionArgs(Options(c))) args.push_back(x);
    for (const char* x : {"spill", "one-key", "12000000", "--go"}) args.push_back(x);
    args.push_back(go);
    const int a = StartWorker(args, tmp.path() + "/a.out");
    const int b = StartWorker(args, tmp.path() + "/b.out");
    ASSERT_GT(a, 0);
    ASSERT_GT(b, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // both open (or close to it)
    std::ofstream(go).put('1');
    ASSERT_EQ(WaitWorker(a, 60), 0);
    ASSERT_EQ(WaitWorker(b, 60), 0);
    auto read = [&](const char* name) {
      std::ifstream in(tmp.path() + "/" + name);
      std::string word;
      in >> word;
      return word;
    };
    std::multiset<std::string> results = {read("a.out"), read("b.out")};
    EXPECT_EQ(results, (std::multiset<std::string>{"already_exists", "ok"}));
    // After both closed: the header and the winner's chunks, nothing else (no lease, no chunk of
    // another spill).
    const std::vector<std::string> objects = admin.value()->List(RadosNamespaceOf(ns));
    std::set<uint64_t> spills;
    int headers = 0, others = 0;
    for (const std::string& name : objects) {
      const ObjectName o = ParseObjectName(name);
      if (o.kind == ObjectName::Kind::kHeader)
        ++headers;
      else if (o.kind == ObjectName::Kind::kChunk)
        spills.insert(o.spill_id);
      else
        ++others;
    }
    EXPECT_EQ(headers, 1);
    EXPECT_EQ(spills.size(), 1u) << "chunks of the losing spill were left behind";
    EXPECT_EQ(others, 0) << "a lease or a stray object was left behind";
    auto reader = Provider::Open(ns, Options(c));
    ASSERT_TRUE(reader.ok());
    Checkpoint want = MakeCheckpoint("one-key", 12000000);
    ASSERT_EQ(reader.value()->Restore(want.key, want.EmptySegments()).status, TIER_OK);
    EXPECT_TRUE(want.Matches());
  }
}

}  // namespace
}  // namespace tier::rados::test
