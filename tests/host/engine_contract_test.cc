// engine_contract_test.cc -- HostEngineContract: what host.h promises an engine about its pages
// and inputs, driven the way a real engine drives it (issue 20): a Device hit's pages stay the
// server's until its Release whatever a demotion queued before; inputs that do not match the pool
// are refused with a message naming what does not match.
#include <tier/device/cpu_transfer_engine.h>
#include <tier/host/identity.h>
#include <tier/host/log.h>

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "host_fixture.h"
#include "test_support.h"

namespace tier::host::test {
namespace {

class HostEngineContract : public HostTest {
 protected:
  // A CPU engine whose worker sleeps before every transfer (a slow engine), and the pool on it.
  void UseSlowEngine(int sleep_ms) {
    device::CpuEngineOptions o;
    o.before_transfer = [sleep_ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    };
    auto engine = device::MakeCpuTransferEngine(o);
    ASSERT_TRUE(engine.ok()) << engine.status().ToString();
    engine_ = std::move(engine).value();
    auto pool = sim::KvPool::Create(engine_.get(), profile_, 1, 4096);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    pool_ = std::move(pool).value();
  }

  // How many times each page was named in a kPagesReleased event from events_[from] on.
  std::map<uint32_t, int> ReleasedSince(size_t from) const {
    std::map<uint32_t, int> released;
    for (size_t i = from; i < events_.size(); ++i) {
      if (events_[i].kind != Event::kPagesReleased) continue;
      for (uint32_t p : events_[i].pages) ++released[p];
    }
    return released;
  }

  // Issue 20, defect 1: Device budget of one checkpoint; A (200 pages) sealed and settled; B (104
  // pages) sealed over the budget so pressure starts demoting A; A admitted at once: a Device hit.
  // Until its Release, none of A's pages may be named in kPagesReleased (the server would reuse
  // them under a live request), and its bytes must stay what was sealed.
  void DeviceHitSurvivesAQueuedDemotion() {
    const auto a = Blocks(1000, 25), b = Blocks(2000, 13);  // 200 and 104 pages
    Open("null", {}, Bytes(25) + 4096, Bytes(25) * 4);      // room for A (its manifest is larger)
    ASSERT_TRUE(Seal(a, 1));
    ASSERT_EQ(PlacementsOf(a), kD);
    const Sealed sealed_b = SealNow(b, 2);
    ASSERT_TRUE(sealed_b.status.ok()) << sealed_b.status.ToString();
    const size_t from = events_.size();
    Admission hit = Admit(a, 3);
    ASSERT_EQ(hit.state, AdmissionState::kReady);
    ASSERT_EQ(hit.outcome, Outcome::kDeviceHit);
    ASSERT_TRUE(hit.pages_shared);
    ASSERT_EQ(hit.pages.size(), 200u);
    // The scheduler goes on polling while the request decodes; the demotion completes meanwhile.
    for (int i = 0; i < 20; ++i) PollOnce();
    Settle();
    const std::map<uint32_t, int> early = ReleasedSince(from);
    for (uint32_t p : hit.pages) {
      ASSERT_EQ(early.count(p), 0u) << "page " << p << " of a live Device hit was released";
    }
    auto info = Info(a);
    ASSERT_TRUE(info.has_value());
    EXPECT_TRUE(info->on_device) << "a pinned checkpoint keeps its Device pages";
    EXPECT_EQ(info->pins, 1u);
    EXPECT_TRUE(Check(a, hit)) << "the Device hit's pages and state are what was sealed";
    // Once released the Host may let them go: evicted, each comes back exactly once.
    const size_t before_release = events_.size();
    Release(hit);
    ASSERT_TRUE(host_->Evict(PrefixKey("host-test", a)));
    Settle();
    const std::map<uint32_t, int> late = ReleasedSince(before_release);
    for (uint32_t p : hit.pages) {
      auto it = late.find(p);
      ASSERT_TRUE(it != late.end()) << "page " << p << " never came back after Release";
      EXPECT_EQ(it->second, 1) << "page " << p;
    }
    EXPECT_FALSE(Info(a).has_value());
  }
};

TEST_F(HostEngineContract, DeviceHitPagesStayTheServersWhileADemotionWasQueued) {
  DeviceHitSurvivesAQueuedDemotion();
}

TEST_F(HostEngineContract, DeviceHitPagesStayTheServersWithASlowEngine) {
  UseSlowEngine(20);
  DeviceHitSurvivesAQueuedDemotion();
}

// A server that releases a Device hit before its state copy ran (an aborted request) and a
// checkpoint that leaves Device at once: the copy still reads the Device copy's state buffers,
// which are freed only after it (before: freed under the engine's worker, the CPU engine's
// SIGSEGV of issue 20).
TEST_F(HostEngineContract, ADeviceCopyLeavingWhileItsStateCopyRunsIsFreedAfterIt) {
  UseSlowEngine(20);
  Open("null", {}, Bytes(4), Bytes(4));
  const auto a = Blocks(10, 2);
  ASSERT_TRUE(Seal(a, 1));
  ASSERT_EQ(PlacementsOf(a), kD);
  Admission hit = Admit(a, 2);
  ASSERT_EQ(hit.outcome, Outcome::kDeviceHit);
  host_->Release(hit.id);                                // before its state copy ran
  ASSERT_TRUE(host_->Evict(PrefixKey("host-test", a)));  // the Device copy leaves now
  PollOnce();
  ASSERT_TRUE(hit.state_copy.Wait().ok());
  EXPECT_TRUE(sim::KvPool::CheckState(hit.key, *lanes_[hit.id]))
      << "the state copy read freed buffers";
  Settle();
  EXPECT_FALSE(Info(a).has_value());
  pool_->Unref(held_pages_[hit.id]);
  held_pages_.erase(hit.id);
}

// verify_held_pages: a server that writes a page the Host holds (before kPagesReleased) gets an
// error naming the page when the Host next reads it (a Device hit, a demotion), and the
// checkpoint leaves every tier instead of being served again with wrong bytes.
TEST_F(HostEngineContract, VerifyHeldPagesNamesAPageTheServerWroteWhileTheHostHeldIt) {
  Open("null", {}, Bytes(2) + 4096, Bytes(8), [](HostOptions& o) { o.verify_held_pages = true; });
  std::vector<std::string> errors;
  SetLogSink([&](tier_log_level level, std::string_view line) {
    if (level == TIER_LOG_ERROR) errors.emplace_back(line);
  });
  const auto a = Blocks(10, 2);
  ASSERT_TRUE(Seal(a, 1));
  Admission first = AdmitAndWait(a, 2);  // its pages as sealed: no error
  ASSERT_EQ(first.outcome, Outcome::kDeviceHit);
  const std::vector<uint32_t> pages = first.pages;
  Release(first);
  EXPECT_TRUE(errors.empty()) << errors.front();
  // The server writes page 3 of the checkpoint, which the Host still holds.
  pool_->Fill(PrefixHashes(Blocks(999, 1)), 512, 0, std::span(pages).subspan(3, 1));
  Admission second = Admit(a, 3);
  ASSERT_EQ(second.outcome, Outcome::kDeviceHit);
  Settle();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("page " + std::to_string(pages[3]) + " (index 3)"), std::string::npos)
      << errors[0];
  EXPECT_EQ(host_->Stats().held_page_mismatches, 1u);
  Release(second);
  EXPECT_FALSE(Info(a).has_value()) << "never served again";
  // The same through a demotion: b's page written, then pushed down by a newer checkpoint.
  const auto b = Blocks(20, 2);
  ASSERT_TRUE(Seal(b, 10));
  Admission peek = AdmitAndWait(b, 11);
  const std::vector<uint32_t> b_pages = peek.pages;
  Release(peek);
  pool_->Fill(PrefixHashes(Blocks(998, 1)), 512, 0, std::span(b_pages).first(1));
  errors.clear();
  ASSERT_TRUE(Seal(Blocks(30, 2), 20));  // over the Device budget: b is demoted
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("found at its demotion"), std::string::npos) << errors[0];
  EXPECT_FALSE(Info(b).has_value()) << "not placed in Host with wrong bytes";
  SetLogSink(nullptr);
}

// ReportVerification(false) says the checkpoint is never served again: an admission of it already
// under way (its Host -> pool copy running) ends at the root (reason corrupt), not ready with the
// bytes just reported wrong; its pages come back in unused_pages. (Found by the simulation.)
TEST_F(HostEngineContract, APendingAdmissionOfACheckpointReportedWrongIsNotServed) {
  UseSlowEngine(20);
  Open("null", {}, 0, Bytes(4));  // Host only: every admission copies Host -> pool
  const auto a = Blocks(10, 1);
  ASSERT_TRUE(Seal(a, 1));
  Admission first = AdmitAndWait(a, 2);
  ASSERT_EQ(first.state, AdmissionState::kReady);
  Admission second = Admit(a, 3);
  ASSERT_EQ(second.state, AdmissionState::kPending) << "its copy runs on the slow engine";
  host_->ReportVerification(first.id, false);  // the server found wrong bytes in the first
  std::optional<Admission> ended = WaitFor(second.id);
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->state, AdmissionState::kRoot) << "not served after it was reported wrong";
  EXPECT_EQ(ended->root_reason, RootReason::kCorrupt);
  EXPECT_EQ(ended->unused_pages.size(), 8u) << "its pages are the server's again";
  Release(first);
  EXPECT_FALSE(Info(a).has_value());
}

// Issue 20, defect 6: inputs an engine gets wrong are refused with a message naming what does not
// match, never accepted silently.
TEST_F(HostEngineContract, ProfileThatDoesNotDescribeThePoolIsRefusedNamingBoth) {
  // The pool is TinyProfile's: 64-token pages, 2 layers.
  auto pages = TryOpen("null", {}, [](HostOptions& o) { o.profile.tokens_per_page = 16; });
  ASSERT_FALSE(pages.ok());
  EXPECT_EQ(pages.status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(pages.status().message().find("16-token pages, the KV pool 64-token pages"),
            std::string::npos)
      << pages.status().ToString();
  auto layers = TryOpen("null", {}, [](HostOptions& o) { o.profile.full_attention_layers = 16; });
  ASSERT_FALSE(layers.ok());
  EXPECT_NE(layers.status().message().find("16 KV layers"), std::string::npos)
      << layers.status().ToString();
  EXPECT_NE(layers.status().message().find("the KV pool 2 layers"), std::string::npos)
      << layers.status().ToString();
}

TEST_F(HostEngineContract, SealWhoseBlocksDoNotFitItsTokensIsRefusedNamingTheFigures) {
  Open("null", {}, Bytes(8), Bytes(8), [](HostOptions& o) { o.block_tokens = 512; });
  std::vector<uint32_t> pages;
  ASSERT_TRUE(pool_->Allocate(32, &pages));  // 32 pages of 64 tokens: 2048 tokens
  const auto blocks = Blocks(10, 64);        // 64 blocks of 512 tokens: 32768 tokens
  SealRequest r;
  r.blocks = blocks;
  r.tokens = 2048;
  r.pages = pages;
  const Sealed sealed = host_->Seal(r);
  EXPECT_EQ(sealed.status.code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(sealed.status.message().find("64 blocks of 512 tokens"), std::string::npos)
      << sealed.status.ToString();
  EXPECT_NE(sealed.status.message().find("2048 tokens over 32 pages"), std::string::npos)
      << sealed.status.ToString();
  EXPECT_FALSE(Info(blocks).has_value()) << "nothing was taken";
  r.blocks = std::span(blocks).first(4);  // 4 x 512 = 2048: what the pages hold
  EXPECT_TRUE(host_->Seal(r).status.ok());
  Settle();
  pool_->Unref(pages);
}

TEST_F(HostEngineContract, SealWithMoreBlocksThanTokensIsRefusedWithoutBlockTokens) {
  Open("null", {}, Bytes(8), Bytes(8));
  std::vector<uint32_t> pages;
  ASSERT_TRUE(pool_->Allocate(1, &pages));
  const auto blocks = Blocks(10, 64);
  SealRequest r;
  r.blocks = blocks;
  r.tokens = 32;
  r.pages = pages;
  const Sealed sealed = host_->Seal(r);
  EXPECT_EQ(sealed.status.code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(sealed.status.message().find("64 blocks but 32 tokens"), std::string::npos)
      << sealed.status.ToString();
  pool_->Unref(pages);
}

// An allocator that says yes but hands over the wrong pages is a server bug: the admission goes to
// the root with reason restore_failed (not no_room), an error line names what was wrong, and every
// id handed over comes back once in unused_pages.
TEST_F(HostEngineContract, AllocatorHandingOverWrongPagesIsNamed) {
  Open("null", {}, 0, Bytes(4));  // no Device budget: the checkpoint lives in Host
  const auto cp = Blocks(10, 1);  // 8 pages
  ASSERT_TRUE(Seal(cp, 1));
  ASSERT_EQ(PlacementsOf(cp), kH);
  std::vector<std::string> errors;
  SetLogSink([&](tier_log_level level, std::string_view line) {
    if (level == TIER_LOG_ERROR) errors.emplace_back(line);
  });
  struct Case {
    const char* what;
    std::function<void(uint32_t, std::vector<uint32_t>*)> fill;
    const char* named;
  };
  const std::vector<Case> cases = {
      {"short",
       [](uint32_t n, std::vector<uint32_t>* p) {
         for (uint32_t i = 0; i + 1 < n; ++i) p->push_back(100 + i);
       },
       "7 page(s) for 8 asked"},
      {"duplicate",
       [](uint32_t n, std::vector<uint32_t>* p) {
         for (uint32_t i = 0; i < n; ++i) p->push_back(200 + i / 2);
       },
       "page id 200 appears twice"},
      {"out of range",
       [](uint32_t n, std::vector<uint32_t>* p) {
         for (uint32_t i = 0; i < n; ++i) p->push_back(i == 3 ? 9999 : 300 + i);
       },
       "page id 9999 at index 3 is outside the pool (4096 pages)"},
  };
  for (const Case& c : cases) {
    errors.clear();
    auto lane = pool_->NewStateSet();
    ASSERT_TRUE(lane.ok());
    std::vector<uint32_t> handed;
    AdmitRequest r;
    r.blocks = cp;
    r.now_ns = 2000000000ull;
    r.allocate_pages = [&](uint32_t n, std::vector<uint32_t>* pages) {
      c.fill(n, pages);
      handed = *pages;
      return true;
    };
    r.state = lane.value()->buffers;
    Admission a = host_->Admit(r);
    if (a.state == AdmissionState::kPending) {
      auto ended = WaitFor(a.id);
      ASSERT_TRUE(ended.has_value()) << c.what;
      a = *ended;
    }
    EXPECT_EQ(a.state, AdmissionState::kRoot) << c.what;
    EXPECT_EQ(a.root_reason, RootReason::kRestoreFailed) << c.what << ": not a lack of room";
    std::set<uint32_t> distinct(handed.begin(), handed.end());
    EXPECT_EQ(std::set<uint32_t>(a.unused_pages.begin(), a.unused_pages.end()), distinct) << c.what;
    EXPECT_EQ(a.unused_pages.size(), distinct.size()) << c.what << ": each id once";
    bool named = false;
    for (const std::string& line : errors) named |= line.find(c.named) != std::string::npos;
    EXPECT_TRUE(named) << c.what << ": no error line names '" << c.named << "'";
  }
  SetLogSink(nullptr);
  EXPECT_EQ(PlacementsOf(cp), kH) << "the checkpoint itself is fine";
}

// Issue 20, defect 3: a seal that can be placed neither on Device nor in Host is refused at once
// (never pending), and the message names host_memory_bytes and the figures.
TEST_F(HostEngineContract, SealThatCannotBePlacedIsRefusedNamingHostMemoryBytes) {
  Open("null", {}, 0, Bytes(8), [](HostOptions& o) { o.host_memory_bytes = 128 << 10; });
  const auto big = Blocks(10, 4);  // 256 KiB of KV: more than the pinned memory
  std::vector<uint32_t> pages;
  ASSERT_TRUE(pool_->Allocate(32, &pages));
  SealRequest r;
  r.blocks = big;
  r.tokens = 4 * 512;
  r.pages = pages;
  const size_t events_before = events_.size();
  const Sealed sealed = host_->Seal(r);
  EXPECT_EQ(sealed.status.code(), TIER_NO_SPACE);
  const std::string& message = sealed.status.message();
  EXPECT_NE(message.find("host_memory_bytes is 131072"), std::string::npos) << message;
  EXPECT_NE(message.find("device_capacity_bytes 0"), std::string::npos) << message;
  EXPECT_FALSE(Info(big).has_value());
  Settle();
  for (size_t i = events_before; i < events_.size(); ++i) {
    EXPECT_NE(events_[i].kind, Event::kSealed) << "a refused seal has no event";
    EXPECT_NE(events_[i].kind, Event::kPagesReleased) << "nothing was held";
  }
  pool_->Unref(pages);
  EXPECT_TRUE(Seal(Blocks(50, 1), 2)) << "one that fits is placed";
  EXPECT_EQ(PlacementsOf(Blocks(50, 1)), kH);
}

// Issue 20, defect 5: every request for a checkpoint whose restore never completes waited the
// whole provider deadline again. A restore is waited for only as long as the prefill it would
// replace (at least 1 s), and after one passed its deadline the next requests prefill at once.
TEST_F(HostEngineContract, StuckRestoreCostsThePrefillItReplacesThenRestoresBackOff) {
  Open("scripted", {{"restore_never", "1"}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2,
       [](HostOptions& o) {
         o.provider_timeout_ns = 60ull * 1000 * 1000 * 1000;  // the global deadline: far away
         o.close_timeout_ns = 300ull * 1000 * 1000;
       });
  const auto a = Blocks(10, 1);  // its prefill (TinyProfile): ~2 ms, so the 1 s floor bounds it
  SealAndPushToCold(a);
  Admission first = Admit(a, 10);
  ASSERT_EQ(first.state, AdmissionState::kPending);
  std::optional<Admission> ended = WaitFor(first.id, 20000);
  ASSERT_TRUE(ended.has_value()) << "still waiting: bounded by the 60 s deadline, not the prefill";
  EXPECT_EQ(ended->state, AdmissionState::kRoot);
  EXPECT_EQ(ended->root_reason, RootReason::kTimeout);
  EXPECT_EQ(host_->Stats().timeouts, 1u);
  // The next request for it does not wait again: answered at once, from the root.
  Admission second = Admit(a, 11);
  EXPECT_EQ(second.state, AdmissionState::kRoot) << "cold restores are backing off";
  EXPECT_EQ(second.root_reason, RootReason::kBusy);
  EXPECT_EQ(host_->Stats().restores_skipped_backing_off, 1u);
  EXPECT_EQ(host_->Stats().timeouts, 1u) << "no second provider call";
}

// The contract of host.h beyond the defects: a pending admission says where it comes from, ids
// share one space (the one-thread rule and allocator re-entry: engine_contract_death_test.cc).
TEST_F(HostEngineContract, APendingAdmissionSaysWhichTierItComesFromAndIdsShareOneSpace) {
  Open("scripted", {}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  const auto cold = Blocks(10, 1);
  SealAndPushToCold(cold);
  Admission pending = Admit(cold, 10);
  ASSERT_EQ(pending.state, AdmissionState::kPending);
  EXPECT_EQ(pending.outcome, Outcome::kColdRestore) << "while pending: the tier it comes from";
  std::optional<Admission> done = WaitFor(pending.id);
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->outcome, Outcome::kColdRestore);
  std::set<uint64_t> ids;
  for (const Event& e : events_) {
    if (e.kind == Event::kSealed) ids.insert(e.id);
  }
  ASSERT_EQ(ids.size(), 4u) << "four seals";
  EXPECT_EQ(ids.count(pending.id), 0u) << "an admission id is never a seal's";
  EXPECT_EQ(ids.count(0), 0u);
  Release(*done);
}

// Issue 20, defect 4: checkpoints only Host held were lost at close (a restart served the turn
// before). Close writes them to a persistent cold tier; a restart re-adopts the newest turn.
class HostCloseFlush : public HostTest {
 protected:
  void ParkTwoTurnsAndRestart(bool flush) {
    const ProviderOptions disk = {
        {"dir", dir_.path() + "/cold"}, {"capacity_bytes", "67108864"}, {"chunk_kib", "64"}};
    auto tweak = [flush](HostOptions& o) { o.flush_host_at_close = flush; };
    Open("disk", disk, 0, Bytes(2) * 4, tweak);  // no Device budget: both turns in Host
    ASSERT_TRUE(Seal(turn1_, 1));
    ASSERT_TRUE(Seal(turn2_, 2));
    ASSERT_EQ(PlacementsOf(turn2_), kH);
    ASSERT_EQ(host_->Stats().cold_entries, 0u) << "nothing below Host before close";
    host_.reset();  // the server stops
    Open("disk", disk, 0, Bytes(2) * 4, tweak);
  }
  tier::test::ScopedTempDir dir_;
  const std::vector<uint64_t> turn1_ = Blocks(10, 1), turn2_ = Blocks(10, 2);
};

TEST_F(HostCloseFlush, CloseWritesHostCopiesAndARestartReadoptsTheNewestTurn) {
  ParkTwoTurnsAndRestart(true);
  EXPECT_EQ(PlacementsOf(turn2_), kC) << "the newest turn survived the restart";
  EXPECT_EQ(Counter(R"(tier_close_flush_total{result="written"})"), 2) << "both turns, no more";
  EXPECT_EQ(Counter(R"(tier_close_flush_total{result="left"})"), 0);
  Admission next = AdmitAndWait(Blocks(10, 3), 10);  // the session's third turn comes back
  ASSERT_EQ(next.state, AdmissionState::kReady);
  EXPECT_EQ(next.outcome, Outcome::kColdRestore);
  EXPECT_EQ(next.cached_tokens, 2u * 512) << "resumed from the newest turn, not the one before";
  EXPECT_EQ(mismatched_, 0u);
  Release(next);
}

// Pinned Host memory full of Host copies that Cold also holds, the logical Host budget far from
// full: a seal lets go of such a copy (Cold still has it) instead of being refused.
TEST_F(HostCloseFlush, ASealMakesRoomInPinnedMemoryFromHostCopiesColdBacks) {
  ParkTwoTurnsAndRestart(true);  // both turns now in Cold only
  host_.reset();
  const ProviderOptions disk = {
      {"dir", dir_.path() + "/cold"}, {"capacity_bytes", "67108864"}, {"chunk_kib", "64"}};
  Open("disk", disk, 0, Bytes(2) * 20, [](HostOptions& o) {
    o.host_memory_bytes = 400 << 10;  // room for these three copies (5 blocks), not a fourth
  });
  const auto other = Blocks(50, 2);
  ASSERT_TRUE(Seal(other, 3));
  for (uint64_t t = 4; t < 6; ++t) {  // both turns restored: in Host and in Cold
    Admission a = AdmitAndWait(t == 4 ? turn1_ : turn2_, t);
    ASSERT_EQ(a.outcome, Outcome::kColdRestore);
    Release(a);
  }
  ASSERT_EQ(PlacementsOf(turn2_), kH | kC);
  EXPECT_TRUE(Seal(Blocks(60, 2), 10)) << "refused: the pinned memory is full";
  EXPECT_EQ(PlacementsOf(Blocks(60, 2)), kH);
  EXPECT_TRUE((PlacementsOf(turn1_) & kC) && (PlacementsOf(turn2_) & kC))
      << "what made room is still in Cold";
  EXPECT_NE(PlacementsOf(turn1_) & PlacementsOf(turn2_) & kH, kH)
      << "one of them let go of its Host copy";
}

TEST_F(HostCloseFlush, CloseWritesNothingWhenTheFlagIsOff) {
  ParkTwoTurnsAndRestart(false);
  EXPECT_EQ(host_->Stats().readopted, 0u);
  EXPECT_EQ(PlacementsOf(turn2_), 0);
  EXPECT_EQ(Counter(R"(tier_close_flush_total{result="written"})"), 0);
}

}  // namespace
}  // namespace tier::host::test
