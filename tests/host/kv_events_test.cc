// HostKvEvents (issue 23): the Host publishes what its tiers hold in vLLM's KV-event format
// (host_shim/README.md "KV events"). A subscriber written from that format in Python
// (kv_events_subscriber.py) rebuilds, from the events alone, the (block, medium) set Describe
// reports -- live with replay for what it missed, and joining late through replay alone.
#include <gtest/gtest.h>
#include <tier/host/identity.h>

#include <sys/wait.h>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "host_fixture.h"
#include "kv_events.h"
#include "test_support.h"

namespace tier::host::test {
namespace {

std::vector<uint8_t> Bytes(std::initializer_list<int> values) {
  return std::vector<uint8_t>(values.begin(), values.end());
}

void Append(std::vector<uint8_t>* out, const std::string& s) {
  out->insert(out->end(), s.begin(), s.end());
}

// msgpack written out by hand from the spec: fixarray 0x9N, fixstr 0xaN, nil 0xc0, float64 0xcb,
// uint16 0xcd, positive fixint as itself.
TEST(KvEventsEncoding, IsVllmArrayLikeBatchOfTaggedEvents) {
  if (!KvEventsAvailable()) GTEST_SKIP() << "built without libzmq/msgpack-c";
  std::vector<KvEvent> events(3);
  events[0] = KvEvent{KvEvent::kStored, {1, 2}, std::nullopt, 16, "GPU"};
  events[1] = KvEvent{KvEvent::kRemoved, {300}, std::nullopt, 0, "CPU"};
  events[2] = KvEvent{KvEvent::kAllCleared, {}, std::nullopt, 0, ""};
  const std::vector<std::byte> got = EncodeKvEventBatch(1.5, events, 0);
  std::vector<uint8_t> want = Bytes({0x93, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0x93});
  want.push_back(0x97);
  want.push_back(0xab);
  Append(&want, "BlockStored");
  for (int b : {0x92, 0x01, 0x02, 0xc0, 0x90, 0x10, 0xc0, 0xa3}) want.push_back(b);
  Append(&want, "GPU");
  want.push_back(0x93);
  want.push_back(0xac);
  Append(&want, "BlockRemoved");
  for (int b : {0x91, 0xcd, 0x01, 0x2c, 0xa3}) want.push_back(b);
  Append(&want, "CPU");
  want.push_back(0x91);
  want.push_back(0xb0);
  Append(&want, "AllBlocksCleared");
  want.push_back(0x00);  // data_parallel_rank
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(static_cast<uint8_t>(got[i]), want[i]) << "byte " << i;
  }
}

class HostKvEvents : public HostTest {
 protected:
  // Debian's interpreter, where python3-zmq and python3-msgpack install (a python3 earlier on
  // PATH, a pyenv one, may not have them).
  static std::string Python() {
    return std::ifstream("/usr/bin/python3").good() ? "/usr/bin/python3" : "python3";
  }
  static bool PythonHasZmq() {
    return tier::test::RunCommand({Python(), "-c", "import zmq, msgpack"}).exit_code == 0;
  }
  std::string Subscriber(const std::string& expect, const std::string& ready) const {
    std::string cmd = Python() + " " + TEST_KV_EVENTS_SUBSCRIBER + " --pub " + pub_ + " --replay " +
                      replay_ + " --expect " + expect;
    if (!ready.empty()) cmd += " --ready " + ready;
    return cmd + " 2>&1";
  }
  // What Describe says the Host holds: (block, medium) for every tier of every checkpoint.
  std::set<std::pair<uint64_t, std::string>> Held(
      const std::vector<std::vector<uint64_t>>& checkpoints) const {
    std::set<std::pair<uint64_t, std::string>> held;
    for (const auto& blocks : checkpoints) {
      auto info = host_->Describe(blocks);
      if (!info) continue;
      for (uint64_t b : blocks) {
        if (info->on_device) held.emplace(b, "GPU");
        if (info->on_host) held.emplace(b, "CPU");
        if (info->on_cold) held.emplace(b, "DISK");
      }
    }
    return held;
  }
  std::string pub_, replay_;
};

TEST_F(HostKvEvents, OffByDefaultAndABadEndpointIsRefused) {
  Open("null", {}, Bytes(2), Bytes(2));
  ASSERT_TRUE(Seal(Blocks(10, 1), 1));
  EXPECT_EQ(host_->Stats().kv_events_queued, 0u);
  host_.reset();
  if (!KvEventsAvailable()) GTEST_SKIP() << "built without libzmq/msgpack-c";
  auto bad = TryOpen("null", {}, [](HostOptions& o) { o.kv_events.addr = "nonsense://x"; });
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), TIER_INVALID_ARGUMENT) << bad.status().ToString();
  EXPECT_NE(bad.status().ToString().find("nonsense://x"), std::string::npos);
}

TEST_F(HostKvEvents, AFullQueueDropsAndCountsNeverWaits) {
  if (!KvEventsAvailable()) GTEST_SKIP() << "built without libzmq/msgpack-c";
  tier::test::ScopedTempDir dir;
  Open("null", {}, Bytes(2), Bytes(2), [&](HostOptions& o) {
    o.kv_events.addr = "ipc://" + dir.path() + "/pub";
    o.kv_events.queue_events = 0;  // every change finds the queue full
  });
  ASSERT_TRUE(Seal(Blocks(10, 1), 1));
  ASSERT_TRUE(Seal(Blocks(20, 1), 2));
  const HostStats s = host_->Stats();
  EXPECT_GE(s.kv_events_queued, 2u) << "two checkpoints entered a tier";
  EXPECT_EQ(s.kv_events_dropped, s.kv_events_queued);
  EXPECT_EQ(s.kv_events_published, 0u);
}

TEST_F(HostKvEvents, SubscribersRebuildWhatEachTierHoldsLiveAndThroughReplay) {
  if (!KvEventsAvailable()) GTEST_SKIP() << "built without libzmq/msgpack-c";
  if (!PythonHasZmq()) GTEST_SKIP() << "python3-zmq / python3-msgpack missing";
  tier::test::ScopedTempDir dir;
  pub_ = "ipc://" + dir.path() + "/pub";
  replay_ = "ipc://" + dir.path() + "/replay";
  const std::string expect = dir.path() + "/expect.json", ready = dir.path() + "/ready";
  const ProviderOptions disk = {
      {"dir", dir.path() + "/cold"}, {"capacity_bytes", "67108864"}, {"chunk_kib", "64"}};
  Open("disk", disk, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2, [&](HostOptions& o) {
    o.kv_events.addr = pub_;
    o.kv_events.replay_addr = replay_;
  });
  // The live subscriber listens from the start (what it misses it replays).
  FILE* live = popen(Subscriber(expect, ready).c_str(), "r");
  ASSERT_NE(live, nullptr);
  for (int i = 0; i < 300 && !std::ifstream(ready).good(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Checkpoints through every tier: one pushed down to Cold, one sharing its first block, one
  // evicted, one restored from Cold.
  const auto a = Blocks(10, 1), ab = Blocks(10, 2), c = Blocks(50, 1);
  SealAndPushToCold(a);
  ASSERT_TRUE(Seal(ab, 6));
  ASSERT_TRUE(Seal(c, 7));
  ASSERT_TRUE(host_->Evict(PrefixKey("host-test", c)));
  Settle();
  Admission restored = AdmitAndWait(a, 8);
  EXPECT_EQ(restored.state, AdmissionState::kReady);
  Release(restored);
  Settle();
  // A fresh one parks on Device; the extension leaves, but its first block stays in DISK (the
  // one-block checkpoint still holds it there).
  const auto d = Blocks(70, 1);
  ASSERT_TRUE(Seal(d, 9));
  ASSERT_TRUE(host_->Evict(PrefixKey("host-test", ab)));
  Settle();
  std::vector<std::vector<uint64_t>> all = {a, ab, c, d};
  for (uint64_t i = 0; i < 3; ++i) all.push_back(Blocks(100 + 10 * i, 1));
  const auto held = Held(all);
  std::set<std::string> media;
  for (const auto& [block, medium] : held) media.insert(medium);
  std::string listed;
  for (const auto& [block, medium] : held) listed += std::to_string(block) + "@" + medium + " ";
  EXPECT_EQ(media.size(), 3u) << "the run leaves checkpoints in GPU, CPU and DISK: " << listed;

  // Every placement change published, none dropped; then the expected set for the subscribers.
  HostStats s = host_->Stats();
  for (int i = 0; i < 500 && s.kv_events_published + s.kv_events_dropped < s.kv_events_queued;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    s = host_->Stats();
  }
  EXPECT_GT(s.kv_events_queued, 0u);
  EXPECT_EQ(s.kv_events_published, s.kv_events_queued);
  EXPECT_EQ(s.kv_events_dropped, 0u);
  {
    std::ofstream out(expect + ".tmp");
    out << "[";
    bool first = true;
    for (const auto& [block, medium] : held) {
      out << (first ? "" : ",") << "[" << block << ",\"" << medium << "\"]";
      first = false;
    }
    out << "]\n";
  }
  ASSERT_EQ(std::rename((expect + ".tmp").c_str(), expect.c_str()), 0);

  std::string live_out;
  char line[512];
  while (fgets(line, sizeof line, live) != nullptr) live_out += line;
  const int live_status = pclose(live);
  EXPECT_TRUE(WIFEXITED(live_status) && WEXITSTATUS(live_status) == 0) << live_out;

  // A subscriber joining now has only the replay to go by.
  const auto late = tier::test::RunCommand({Python(), TEST_KV_EVENTS_SUBSCRIBER, "--pub", pub_,
                                            "--replay", replay_, "--expect", expect});
  EXPECT_EQ(late.exit_code, 0) << late.out << late.err;
  EXPECT_NE(late.out.find("live batches 0"), std::string::npos) << late.out;
  std::cout << "live: " << live_out << "late: " << late.out;
}

}  // namespace
}  // namespace tier::host::test
