// conformance_test.cc -- AbiConformance: what every tier provider must do, run against any plugin
// (tier-conformance --tier-plugin PATH ...). A provider with capacity 0 (an absent tier) is held to
// the absent-tier expectations: decline every store cleanly, find nothing, never call back.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <thread>

#include "checkpoint_bytes.h"
#include "conformance_fixture.h"
#include "conformance_tools.h"

namespace tier::conformance {
namespace {

TEST_P(AbiConformance, InfoDescribesTheProvider) {
  tier_info info{};
  info.struct_size = sizeof(info);
  tier_error error{};
  ASSERT_EQ(table()->info(instance(), &info, &error), TIER_OK) << error.message;
  ASSERT_NE(info.name, nullptr);
  EXPECT_STREQ(info.name, table()->name);
  ASSERT_NE(info.version, nullptr);
  ASSERT_NE(info.io_path, nullptr);
  EXPECT_GE(info.buffer_alignment, 1u);
  EXPECT_EQ(info.buffer_alignment & (info.buffer_alignment - 1), 0u) << "a power of two";
  if (absent()) {
    EXPECT_EQ(Stats().capacity_bytes, 0u);
  }
}

TEST_P(AbiConformance, OutStructuresHonourStructSize) {
  // A caller compiled against an older, shorter struct: nothing past struct_size may be written.
  struct Guarded {
    tier_stats stats;
    unsigned char guard[64];
  } guarded;
  std::memset(&guarded, 0xAB, sizeof(guarded));
  guarded.stats.struct_size = offsetof(tier_stats, used_bytes);
  ASSERT_EQ(table()->stats(instance(), &guarded.stats, nullptr), TIER_OK);
  const auto* tail =
      reinterpret_cast<const unsigned char*>(&guarded.stats) + offsetof(tier_stats, used_bytes);
  for (size_t i = 0; i < sizeof(guarded) - offsetof(tier_stats, used_bytes); ++i) {
    ASSERT_EQ(tail[i], 0xAB) << "byte " << i << " past struct_size was written";
  }
  tier_info info;
  std::memset(&info, 0xCD, sizeof(info));
  info.struct_size = offsetof(tier_info, io_path);
  ASSERT_EQ(table()->info(instance(), &info, nullptr), TIER_OK);
  const auto* info_tail =
      reinterpret_cast<const unsigned char*>(&info) + offsetof(tier_info, io_path);
  for (size_t i = 0; i < sizeof(info) - offsetof(tier_info, io_path); ++i) {
    ASSERT_EQ(info_tail[i], 0xCD) << "tier_info byte " << i << " past struct_size was written";
  }
}

TEST_P(AbiConformance, MultiSegmentCheckpointRoundTripsByteForByte) {
  TestCheckpoint checkpoint = MakeCheckpoint("round-trip");
  const tier_status spilled = Spill(checkpoint);
  if (absent()) {
    EXPECT_EQ(spilled, TIER_NO_SPACE);
    EXPECT_EQ(Restore(checkpoint), TIER_NOT_FOUND);
    return;
  }
  ASSERT_EQ(spilled, TIER_OK);
  tier_stat_result stat{};
  stat.struct_size = sizeof(stat);
  std::vector<tier_segment_info> table_out(16);
  ASSERT_EQ(table()->stat(instance(), &checkpoint.key, &stat, table_out.data(),
                          static_cast<uint32_t>(table_out.size()), nullptr),
            TIER_OK);
  ASSERT_EQ(stat.segment_count, checkpoint.layout.size());
  EXPECT_EQ(stat.logical_bytes, checkpoint.logical_bytes());
  EXPECT_GT(stat.stored_bytes, 0u);
  for (const auto& want : checkpoint.layout) {
    const bool found = std::any_of(table_out.begin(), table_out.begin() + stat.segment_count,
                                   [&](const tier_segment_info& got) {
                                     return got.kind == want.kind && got.index == want.index &&
                                            got.length_bytes == want.length_bytes;
                                   });
    EXPECT_TRUE(found) << "segment kind " << want.kind << " index " << want.index;
  }
  ASSERT_EQ(Restore(checkpoint), TIER_OK);
  EXPECT_TRUE(checkpoint.Matches()) << "restored bytes differ from spilled bytes";
}

TEST_P(AbiConformance, UnknownKeyIsNotFound) {
  TestCheckpoint checkpoint = MakeCheckpoint("never-stored", 4096);
  tier_stat_result stat{};
  stat.struct_size = sizeof(stat);
  EXPECT_EQ(table()->stat(instance(), &checkpoint.key, &stat, nullptr, 0, nullptr), TIER_NOT_FOUND);
  EXPECT_EQ(Restore(checkpoint), TIER_NOT_FOUND);
  tier_error error{};
  EXPECT_EQ(table()->remove(instance(), &checkpoint.key, &error), TIER_NOT_FOUND);
}

TEST_P(AbiConformance, KeysDifferingInOneByteAreDifferentCheckpoints) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint("exact-identity", 4096);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  for (size_t byte : {size_t{0}, size_t{15}, size_t{TIER_KEY_BYTES - 1}}) {
    tier_key other = checkpoint.key;
    other.bytes[byte] ^= 0x01;
    tier_stat_result stat{};
    stat.struct_size = sizeof(stat);
    EXPECT_EQ(table()->stat(instance(), &other, &stat, nullptr, 0, nullptr), TIER_NOT_FOUND)
        << "a key differing in byte " << byte << " was treated as a hit";
  }
}

TEST_P(AbiConformance, SpillOfAnExistingKeyIsAlreadyExists) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint("duplicate", 4096);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  EXPECT_EQ(Spill(checkpoint), TIER_ALREADY_EXISTS);
  EXPECT_EQ(Restore(checkpoint), TIER_OK) << "the first copy is untouched";
  EXPECT_TRUE(checkpoint.Matches());
}

TEST_P(AbiConformance, ConcurrentSpillsOfOneKeyStoreItOnce) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint("racing-duplicate", 1 << 20);
  auto segments = checkpoint.Segments();
  OpRecord first, second;
  tier_error error{};
  ASSERT_EQ(table()->spill(instance(), &checkpoint.key, segments.data(),
                           static_cast<uint32_t>(segments.size()), OpRecord::Callback,
                           first.cookie(), &error),
            TIER_OK)
      << error.message;
  const tier_status again = table()->spill(instance(), &checkpoint.key, segments.data(),
                                           static_cast<uint32_t>(segments.size()),
                                           OpRecord::Callback, second.cookie(), &error);
  ASSERT_TRUE(first.Wait());
  if (again == TIER_OK) {
    ASSERT_TRUE(second.Wait());
    EXPECT_EQ(second.status, TIER_ALREADY_EXISTS) << "second spill of one key must not succeed";
  } else {
    EXPECT_EQ(again, TIER_ALREADY_EXISTS);
    EXPECT_EQ(second.calls.load(), 0);
  }
  EXPECT_EQ(first.status, TIER_OK);
  EXPECT_EQ(Stats().entries, 1u);
}

TEST_P(AbiConformance, RemoveMakesTheKeyNotFound) {
  TestCheckpoint checkpoint = MakeCheckpoint("remove", 4096);
  if (absent()) {
    EXPECT_EQ(table()->remove(instance(), &checkpoint.key, nullptr), TIER_NOT_FOUND);
    return;
  }
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  tier_error error{};
  ASSERT_EQ(table()->remove(instance(), &checkpoint.key, &error), TIER_OK) << error.message;
  tier_stat_result stat{};
  stat.struct_size = sizeof(stat);
  EXPECT_EQ(table()->stat(instance(), &checkpoint.key, &stat, nullptr, 0, nullptr), TIER_NOT_FOUND);
  EXPECT_EQ(Restore(checkpoint), TIER_NOT_FOUND);
  EXPECT_EQ(table()->remove(instance(), &checkpoint.key, nullptr), TIER_NOT_FOUND);
  EXPECT_EQ(Spill(checkpoint), TIER_OK) << "a removed key can be stored again";
}

TEST_P(AbiConformance, EveryCompletionRunsExactlyOnce) {
  constexpr int kOps = 24;
  std::vector<TestCheckpoint> checkpoints;
  for (int i = 0; i < kOps; ++i)
    checkpoints.push_back(MakeCheckpoint("once-" + std::to_string(i), 32768));
  std::vector<OpRecord> spills(kOps);
  std::vector<tier_status> accepted(kOps);
  std::vector<std::vector<tier_segment>> segments(kOps);
  // Submit from several threads at once.
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = t; i < kOps; i += 4) {
        segments[i] = checkpoints[i].Segments();
        accepted[i] = table()->spill(instance(), &checkpoints[i].key, segments[i].data(),
                                     static_cast<uint32_t>(segments[i].size()), OpRecord::Callback,
                                     spills[i].cookie(), nullptr);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int i = 0; i < kOps; ++i) {
    if (accepted[i] == TIER_OK) {
      ASSERT_TRUE(spills[i].Wait()) << i;
    }
  }
  Close();  // after close returns, no callback may run again
  for (int i = 0; i < kOps; ++i) {
    if (accepted[i] == TIER_OK) {
      EXPECT_EQ(spills[i].calls.load(), 1) << "op " << i;
      EXPECT_TRUE(spills[i].status == TIER_OK || spills[i].status == TIER_BUSY ||
                  spills[i].status == TIER_NO_SPACE)
          << tier_status_name(spills[i].status);
    } else {
      EXPECT_EQ(spills[i].calls.load(), 0) << "refused op " << i << " called back";
      if (absent()) {
        EXPECT_EQ(accepted[i], TIER_NO_SPACE);
      }
    }
  }
}

TEST_P(AbiConformance, CloseWithOperationsInFlightCompletesEachOnce) {
  constexpr int kOps = 8;
  std::vector<TestCheckpoint> checkpoints;
  for (int i = 0; i < kOps; ++i) {
    checkpoints.push_back(MakeCheckpoint("close-inflight-" + std::to_string(i), 2 << 20));
  }
  std::vector<OpRecord> records(kOps);
  std::vector<tier_status> accepted(kOps);
  std::vector<std::vector<tier_segment>> segments(kOps);
  for (int i = 0; i < kOps; ++i) {
    segments[i] = checkpoints[i].Segments();
    accepted[i] = table()->spill(instance(), &checkpoints[i].key, segments[i].data(),
                                 static_cast<uint32_t>(segments[i].size()), OpRecord::Callback,
                                 records[i].cookie(), nullptr);
  }
  Close();  // must cancel or finish, and wait for, every accepted operation
  std::vector<int> stored;
  for (int i = 0; i < kOps; ++i) {
    if (accepted[i] != TIER_OK) {
      EXPECT_EQ(records[i].calls.load(), 0);
      continue;
    }
    ASSERT_EQ(records[i].calls.load(), 1) << "op " << i << " not completed when close returned";
    EXPECT_TRUE(records[i].status == TIER_OK || records[i].status == TIER_CANCELLED)
        << tier_status_name(records[i].status) << ": " << records[i].message;
    if (records[i].status == TIER_OK) stored.push_back(i);
  }
  if (!persistent()) return;
  Open();
  ASSERT_NE(instance(), nullptr);
  const auto keys = EnumerateKeys();
  EXPECT_EQ(keys.size(), stored.size()) << "only completed spills are visible after reopen";
  for (int i : stored) {
    ASSERT_EQ(Restore(checkpoints[i]), TIER_OK) << i;
    EXPECT_TRUE(checkpoints[i].Matches()) << i;
  }
}

TEST_P(AbiConformance, EnumerateListsExactlyWhatIsStored) {
  if (absent()) {
    EXPECT_TRUE(EnumerateKeys().empty());
    return;
  }
  std::vector<TestCheckpoint> checkpoints;
  for (int i = 0; i < 3; ++i) {
    checkpoints.push_back(MakeCheckpoint("enumerate-" + std::to_string(i), 8192));
    ASSERT_EQ(Spill(checkpoints.back()), TIER_OK);
  }
  ASSERT_EQ(table()->remove(instance(), &checkpoints[1].key, nullptr), TIER_OK);
  struct Seen {
    std::vector<TestCheckpoint>* checkpoints;
    std::vector<int> matched;
    int manifest_ok = 0;
  } seen{&checkpoints, {}, 0};
  ASSERT_EQ(
      table()->enumerate(
          instance(),
          [](void* user, const tier_entry* entry) -> int32_t {
            auto* s = static_cast<Seen*>(user);
            for (size_t i = 0; i < s->checkpoints->size(); ++i) {
              const TestCheckpoint& c = (*s->checkpoints)[i];
              if (!SameKey(c.key, entry->key)) continue;
              s->matched.push_back(static_cast<int>(i));
              if (entry->segment_count == c.layout.size() &&
                  entry->logical_bytes == c.logical_bytes() && entry->manifest != nullptr &&
                  entry->manifest_bytes == 300 &&
                  sim::SegmentBytesMatch(c.key, TIER_SEGMENT_MANIFEST, 0,
                                         {static_cast<const std::byte*>(entry->manifest), 300})) {
                ++s->manifest_ok;
              }
            }
            return 0;
          },
          &seen, nullptr),
      TIER_OK);
  std::sort(seen.matched.begin(), seen.matched.end());
  EXPECT_EQ(seen.matched, (std::vector<int>{0, 2}));
  EXPECT_EQ(seen.manifest_ok, 2) << "enumerate returns each entry's manifest and segment table";
  // Returning non-zero stops the walk.
  int calls = 0;
  table()->enumerate(
      instance(),
      [](void* user, const tier_entry*) -> int32_t { return ++*static_cast<int*>(user); }, &calls,
      nullptr);
  EXPECT_EQ(calls, 1);
}

TEST_P(AbiConformance, StatsTrackUsage) {
  const tier_stats before = Stats();
  EXPECT_LE(before.used_bytes, before.capacity_bytes);
  TestCheckpoint checkpoint = MakeCheckpoint("stats", 65536);
  OpRecord record;
  auto segments = checkpoint.Segments();
  const tier_status accepted = table()->spill(instance(), &checkpoint.key, segments.data(),
                                              static_cast<uint32_t>(segments.size()),
                                              OpRecord::Callback, record.cookie(), nullptr);
  if (absent()) {
    EXPECT_EQ(accepted, TIER_NO_SPACE);
    EXPECT_EQ(Stats().used_bytes, 0u);
    EXPECT_EQ(Stats().entries, 0u);
    return;
  }
  ASSERT_EQ(accepted, TIER_OK);
  ASSERT_TRUE(record.Wait());
  ASSERT_EQ(record.status, TIER_OK);
  const tier_stats after = Stats();
  EXPECT_EQ(after.entries, before.entries + 1);
  EXPECT_EQ(after.used_bytes, before.used_bytes + record.stored_bytes)
      << "used bytes grow by exactly what the completion reported as stored";
  EXPECT_EQ(after.capacity_bytes, before.capacity_bytes);
  EXPECT_EQ(after.inflight_ops, 0u);
  ASSERT_EQ(table()->remove(instance(), &checkpoint.key, nullptr), TIER_OK);
  const tier_stats removed = Stats();
  EXPECT_EQ(removed.entries, before.entries);
  EXPECT_EQ(removed.used_bytes, before.used_bytes);
}

TEST_P(AbiConformance, PlanRestoreWeighsCostAgainstPrefill) {
  TestCheckpoint checkpoint = MakeCheckpoint("plan", 65536);
  tier_plan plan{};
  plan.struct_size = sizeof(plan);
  ASSERT_EQ(table()->plan_restore(instance(), &checkpoint.key, 1000000000ull, &plan, nullptr),
            TIER_OK);
  EXPECT_EQ(plan.decision, TIER_DECISION_SKIP_TO_ROOT);
  EXPECT_EQ(plan.reason, TIER_REASON_MISS);
  if (absent()) return;
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  ASSERT_EQ(
      table()->plan_restore(instance(), &checkpoint.key, 3600ull * 1000000000ull, &plan, nullptr),
      TIER_OK);
  EXPECT_EQ(plan.decision, TIER_DECISION_RESTORE) << "an hour of prefill is never cheaper";
  EXPECT_EQ(plan.reason, TIER_REASON_CHEAPER);
  EXPECT_GT(plan.estimated_restore_ns, 0u);
  EXPECT_GT(plan.stored_bytes, 0u);
  ASSERT_EQ(table()->plan_restore(instance(), &checkpoint.key, 0, &plan, nullptr), TIER_OK);
  EXPECT_EQ(plan.decision, TIER_DECISION_SKIP_TO_ROOT) << "a free prefill always wins";
  EXPECT_EQ(plan.reason, TIER_REASON_COST);
}

TEST_P(AbiConformance, BadArgumentsGetInvalidArgumentAndNoCallback) {
  TestCheckpoint checkpoint = MakeCheckpoint("bad-args", 4096);
  auto good = checkpoint.Segments();
  const auto n = static_cast<uint32_t>(good.size());
  OpRecord record;
  tier_error error{};
  auto expect_invalid = [&](tier_status got, const char* what) {
    EXPECT_EQ(got, TIER_INVALID_ARGUMENT) << what << ": got " << tier_status_name(got);
    EXPECT_NE(error.message[0], '\0') << what << ": a refusal says why";
    error.message[0] = '\0';
  };
  expect_invalid(table()->spill(instance(), nullptr, good.data(), n, OpRecord::Callback,
                                record.cookie(), &error),
                 "NULL key");
  expect_invalid(table()->spill(instance(), &checkpoint.key, nullptr, n, OpRecord::Callback,
                                record.cookie(), &error),
                 "NULL segments");
  expect_invalid(table()->spill(instance(), &checkpoint.key, good.data(), 0, OpRecord::Callback,
                                record.cookie(), &error),
                 "zero segments");
  expect_invalid(
      table()->spill(instance(), &checkpoint.key, good.data(), n, nullptr, &record, &error),
      "NULL callback");
  auto unknown = good;
  unknown[0].kind = 99;
  expect_invalid(table()->spill(instance(), &checkpoint.key, unknown.data(), n, OpRecord::Callback,
                                record.cookie(), &error),
                 "unknown kind");
  auto duplicate = good;
  duplicate[1].kind = duplicate[0].kind;
  duplicate[1].index = duplicate[0].index;
  expect_invalid(table()->spill(instance(), &checkpoint.key, duplicate.data(), n,
                                OpRecord::Callback, record.cookie(), &error),
                 "duplicate (kind, index)");
  auto no_data = good;
  no_data[0].data = nullptr;
  expect_invalid(table()->spill(instance(), &checkpoint.key, no_data.data(), n, OpRecord::Callback,
                                record.cookie(), &error),
                 "NULL data");
  expect_invalid(table()->restore(instance(), nullptr, good.data(), n, OpRecord::Callback,
                                  record.cookie(), &error),
                 "restore NULL key");
  expect_invalid(
      table()->restore(instance(), &checkpoint.key, good.data(), n, nullptr, &record, &error),
      "restore NULL callback");
  expect_invalid(table()->stat(instance(), &checkpoint.key, nullptr, nullptr, 0, &error),
                 "stat NULL out");
  expect_invalid(table()->stats(instance(), nullptr, &error), "stats NULL out");
  expect_invalid(table()->info(instance(), nullptr, &error), "info NULL out");
  expect_invalid(table()->enumerate(instance(), nullptr, nullptr, &error), "enumerate NULL fn");
  expect_invalid(table()->plan_restore(instance(), &checkpoint.key, 0, nullptr, &error),
                 "plan NULL out");
  expect_invalid(table()->remove(instance(), nullptr, &error), "remove NULL key");
  tier_error open_error{};
  EXPECT_EQ(TryOpen(std::nullopt, nullptr, &open_error), TIER_INVALID_ARGUMENT) << "open NULL out";
  EXPECT_EQ(record.calls.load(), 0) << "no refused call may complete";
  EXPECT_EQ(Stats().entries, 0u) << "nothing was stored";
}

TEST_P(AbiConformance, RestoreNeedsTheExactSegmentTable) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint("restore-table", 8192);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  auto check_refused = [&](std::vector<tier_segment> segments, const char* what) {
    OpRecord record;
    tier_error error{};
    const tier_status got = table()->restore(instance(), &checkpoint.key, segments.data(),
                                             static_cast<uint32_t>(segments.size()),
                                             OpRecord::Callback, record.cookie(), &error);
    if (got == TIER_OK) {
      ASSERT_TRUE(record.Wait());
      EXPECT_EQ(record.status, TIER_INVALID_ARGUMENT) << what;
    } else {
      EXPECT_EQ(got, TIER_INVALID_ARGUMENT) << what;
      EXPECT_EQ(record.calls.load(), 0);
    }
  };
  auto too_small = checkpoint.EmptySegments();
  too_small[0].length_bytes -= 1;
  check_refused(too_small, "a buffer one byte too small");
  auto missing = checkpoint.EmptySegments();
  missing.pop_back();
  check_refused(missing, "one segment missing (a partial restore)");
  auto extra = checkpoint.EmptySegments();
  std::vector<std::byte> spare(16);
  extra.push_back({TIER_SEGMENT_OTHER, 999, spare.size(), spare.data()});
  check_refused(extra, "one segment too many");
  ASSERT_EQ(Restore(checkpoint), TIER_OK) << "the entry survives refused restores";
  EXPECT_TRUE(checkpoint.Matches());
}

TEST_P(AbiConformance, ZeroLengthSegmentsRoundTrip) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint(
      "zero-length", {{TIER_SEGMENT_MAIN_KV, 0, 4096}, {TIER_SEGMENT_HIDDEN_STATE, 0, 0}});
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  ASSERT_EQ(Restore(checkpoint), TIER_OK);
  EXPECT_TRUE(checkpoint.Matches());
}

TEST_P(AbiConformance, OversizedCheckpointIsNoSpace) {
  const tier_stats stats = Stats();
  // Mapped but never touched: a provider must refuse before reading a byte.
  const uint64_t length = stats.capacity_bytes + (1u << 20);
  void* region =
      ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(region, MAP_FAILED);
  tier_key key = KeyFromText("conformance:oversized");
  tier_segment segment{TIER_SEGMENT_MAIN_KV, 0, length, region};
  OpRecord record;
  tier_error error{};
  const tier_status got =
      table()->spill(instance(), &key, &segment, 1, OpRecord::Callback, record.cookie(), &error);
  if (got == TIER_OK) {
    ASSERT_TRUE(record.Wait());
    EXPECT_EQ(record.status, TIER_NO_SPACE);
  } else {
    EXPECT_EQ(got, TIER_NO_SPACE) << error.message;
  }
  ::munmap(region, length);
  EXPECT_EQ(Stats().used_bytes, stats.used_bytes) << "a refused spill uses nothing";
}

TEST_P(AbiConformance, RemoveDuringRestoreDoesNotBreakTheRestore) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint("remove-during-restore", 8 << 20);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  auto segments = checkpoint.EmptySegments();
  OpRecord record;
  tier_error error{};
  ASSERT_EQ(table()->restore(instance(), &checkpoint.key, segments.data(),
                             static_cast<uint32_t>(segments.size()), OpRecord::Callback,
                             record.cookie(), &error),
            TIER_OK)
      << error.message;
  const tier_status removed = table()->remove(instance(), &checkpoint.key, &error);
  EXPECT_TRUE(removed == TIER_OK || removed == TIER_BUSY) << tier_status_name(removed);
  ASSERT_TRUE(record.Wait());
  EXPECT_EQ(record.status, TIER_OK) << record.message;
  EXPECT_TRUE(checkpoint.Matches()) << "the restore accepted before the remove reads it whole";
  if (removed == TIER_OK) {
    tier_stat_result stat{};
    stat.struct_size = sizeof(stat);
    EXPECT_EQ(table()->stat(instance(), &checkpoint.key, &stat, nullptr, 0, nullptr),
              TIER_NOT_FOUND);
  }
}

TEST_P(AbiConformance, PersistentCheckpointsSurviveReopen) {
  SKIP_IF_ABSENT();
  if (!persistent()) GTEST_SKIP() << GetParam().name << " does not claim TIER_CAP_PERSISTENT";
  TestCheckpoint checkpoint = MakeCheckpoint("reopen", 1 << 20);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  Close();
  Open();
  ASSERT_NE(instance(), nullptr);
  const auto keys = EnumerateKeys();
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_TRUE(SameKey(keys[0], checkpoint.key));
  ASSERT_EQ(Restore(checkpoint), TIER_OK);
  EXPECT_TRUE(checkpoint.Matches());
}

TEST_P(AbiConformance, AnotherNamespaceIsNeverServed) {
  SKIP_IF_ABSENT();
  if (!persistent()) GTEST_SKIP() << GetParam().name << " does not claim TIER_CAP_PERSISTENT";
  TestCheckpoint checkpoint = MakeCheckpoint("namespace", 8192);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  Open("conformance-other-model");
  ASSERT_NE(instance(), nullptr);
  tier_stat_result stat{};
  stat.struct_size = sizeof(stat);
  EXPECT_EQ(table()->stat(instance(), &checkpoint.key, &stat, nullptr, 0, nullptr), TIER_NOT_FOUND);
  EXPECT_EQ(Restore(checkpoint), TIER_NOT_FOUND);
  EXPECT_TRUE(EnumerateKeys().empty());
  Open();  // the original namespace still has it
  ASSERT_EQ(Restore(checkpoint), TIER_OK);
  EXPECT_TRUE(checkpoint.Matches());
}

// ---- ABI misuse: every wrong call gets a clear status, a completion runs exactly once for what
// was accepted and never for what was refused, and nothing crashes (the sanitizer builds run
// these too, so a read past a short table is caught) ----------------------------------------------

// Refused synchronously with `want`, a message, and no callback.
#define EXPECT_REFUSED(call, want, record, error)                                   \
  do {                                                                              \
    (error).message[0] = '\0';                                                      \
    const tier_status got_ = (call);                                                \
    EXPECT_EQ(got_, (want)) << #call << ": got " << tier_status_name(got_);         \
    EXPECT_NE((error).message[0], '\0') << #call << ": a refusal says why";         \
    EXPECT_LT(std::strlen((error).message), sizeof((error).message)) << #call;      \
    EXPECT_EQ((record).calls.load(), 0) << #call << ": a refused call called back"; \
  } while (0)

TEST_P(AbiConformance, NullInstanceIsRefusedByEveryFunction) {
  TestCheckpoint checkpoint = MakeCheckpoint("null-instance", 4096);
  auto segments = checkpoint.Segments();
  const auto n = static_cast<uint32_t>(segments.size());
  OpRecord record;
  tier_error error{};
  tier_info info{};
  info.struct_size = sizeof(info);
  tier_stats stats{};
  stats.struct_size = sizeof(stats);
  tier_stat_result stat{};
  stat.struct_size = sizeof(stat);
  tier_plan plan{};
  plan.struct_size = sizeof(plan);
  const tier_status want = TIER_INVALID_ARGUMENT;
  EXPECT_REFUSED(table()->info(nullptr, &info, &error), want, record, error);
  EXPECT_REFUSED(table()->stats(nullptr, &stats, &error), want, record, error);
  EXPECT_REFUSED(table()->stat(nullptr, &checkpoint.key, &stat, nullptr, 0, &error), want, record,
                 error);
  EXPECT_REFUSED(table()->spill(nullptr, &checkpoint.key, segments.data(), n, OpRecord::Callback,
                                record.cookie(), &error),
                 want, record, error);
  EXPECT_REFUSED(table()->restore(nullptr, &checkpoint.key, segments.data(), n, OpRecord::Callback,
                                  record.cookie(), &error),
                 want, record, error);
  EXPECT_REFUSED(table()->remove(nullptr, &checkpoint.key, &error), want, record, error);
  EXPECT_REFUSED(
      table()->enumerate(
          nullptr, [](void*, const tier_entry*) -> int32_t { return 0; }, nullptr, &error),
      want, record, error);
  EXPECT_REFUSED(table()->plan_restore(nullptr, &checkpoint.key, 0, &plan, &error), want, record,
                 error);
  table()->close(nullptr);  // a no-op, not a crash
  // The same refusals with no error buffer at all.
  EXPECT_EQ(table()->stats(nullptr, &stats, nullptr), want);
  EXPECT_EQ(table()->remove(nullptr, &checkpoint.key, nullptr), want);
}

TEST_P(AbiConformance, ShortOutStructuresGetOnlyTheFieldsTheyHave) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint("short-out", 4096);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  // Each out-structure with room for struct_size only (and one with struct_size 0): the bytes
  // behind it are guarded and must stay untouched.
  struct Guarded {
    unsigned char bytes[256];
    void Fill(uint32_t struct_size) {
      std::memset(bytes, 0xE7, sizeof(bytes));
      std::memcpy(bytes, &struct_size, sizeof(struct_size));
    }
    bool UntouchedFrom(size_t at) const {
      for (size_t i = at; i < sizeof(bytes); ++i) {
        if (bytes[i] != 0xE7) return false;
      }
      return true;
    }
  };
  for (uint32_t size : {uint32_t{0}, uint32_t{sizeof(uint32_t)}}) {
    SCOPED_TRACE("struct_size " + std::to_string(size));
    const size_t from = sizeof(uint32_t);
    Guarded g;
    g.Fill(size);
    ASSERT_EQ(table()->stat(instance(), &checkpoint.key, reinterpret_cast<tier_stat_result*>(&g),
                            nullptr, 0, nullptr),
              TIER_OK);
    EXPECT_TRUE(g.UntouchedFrom(from)) << "tier_stat_result";
    g.Fill(size);
    ASSERT_EQ(table()->plan_restore(instance(), &checkpoint.key, 1000,
                                    reinterpret_cast<tier_plan*>(&g), nullptr),
              TIER_OK);
    EXPECT_TRUE(g.UntouchedFrom(from)) << "tier_plan";
    g.Fill(size);
    ASSERT_EQ(table()->stats(instance(), reinterpret_cast<tier_stats*>(&g), nullptr), TIER_OK);
    EXPECT_TRUE(g.UntouchedFrom(from)) << "tier_stats";
    g.Fill(size);
    ASSERT_EQ(table()->info(instance(), reinterpret_cast<tier_info*>(&g), nullptr), TIER_OK);
    EXPECT_TRUE(g.UntouchedFrom(from)) << "tier_info";
  }
  // A tier_stat_result cut after logical_bytes gets segment_count and logical_bytes only.
  Guarded g;
  g.Fill(offsetof(tier_stat_result, stored_bytes));
  ASSERT_EQ(table()->stat(instance(), &checkpoint.key, reinterpret_cast<tier_stat_result*>(&g),
                          nullptr, 0, nullptr),
            TIER_OK);
  const auto* stat = reinterpret_cast<const tier_stat_result*>(&g);
  EXPECT_EQ(stat->segment_count, checkpoint.layout.size());
  EXPECT_EQ(stat->logical_bytes, checkpoint.logical_bytes());
  EXPECT_TRUE(g.UntouchedFrom(offsetof(tier_stat_result, stored_bytes)));
}

TEST_P(AbiConformance, StatFillsNoMoreSegmentsThanTheCapacity) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint("stat-capacity", 4096);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  std::vector<tier_segment_info> infos(8);
  std::memset(infos.data(), 0xE7, infos.size() * sizeof(tier_segment_info));
  tier_stat_result stat{};
  stat.struct_size = sizeof(stat);
  ASSERT_EQ(table()->stat(instance(), &checkpoint.key, &stat, infos.data(), 2, nullptr), TIER_OK);
  EXPECT_EQ(stat.segment_count, checkpoint.layout.size()) << "the full count, whatever the room";
  const auto* guard = reinterpret_cast<const unsigned char*>(&infos[2]);
  for (size_t i = 0; i < 6 * sizeof(tier_segment_info); ++i) {
    ASSERT_EQ(guard[i], 0xE7) << "wrote past segment_capacity";
  }
  OpRecord record;
  tier_error error{};
  EXPECT_REFUSED(table()->stat(instance(), &checkpoint.key, &stat, nullptr, 4, &error),
                 TIER_INVALID_ARGUMENT, record, error);
}

TEST_P(AbiConformance, UnknownSegmentKindsAreRefused) {
  TestCheckpoint checkpoint = MakeCheckpoint("unknown-kinds", 4096);
  if (!absent()) {
    ASSERT_EQ(Spill(checkpoint), TIER_OK);
  }
  for (uint32_t kind : {0u, TIER_SEGMENT_KIND_MAX + 1, 0x80000000u, 0xFFFFFFFFu}) {
    SCOPED_TRACE("kind " + std::to_string(kind));
    OpRecord record;
    tier_error error{};
    tier_key other = KeyFromText("conformance:unknown-kind-spill");
    auto spill = checkpoint.Segments();
    spill[1].kind = kind;
    EXPECT_REFUSED(
        table()->spill(instance(), &other, spill.data(), static_cast<uint32_t>(spill.size()),
                       OpRecord::Callback, record.cookie(), &error),
        TIER_INVALID_ARGUMENT, record, error);
    if (absent()) continue;
    auto restore = checkpoint.EmptySegments();
    restore[1].kind = kind;
    EXPECT_REFUSED(table()->restore(instance(), &checkpoint.key, restore.data(),
                                    static_cast<uint32_t>(restore.size()), OpRecord::Callback,
                                    record.cookie(), &error),
                   TIER_INVALID_ARGUMENT, record, error);
  }
  EXPECT_EQ(Stats().entries, absent() ? 0u : 1u);
}

TEST_P(AbiConformance, SegmentCountsPastTheTableAreRefusedUnread) {
  // A table of one segment with a count that claims more: a provider must bound the count before
  // reading the table (ASan reports a read past it).
  std::vector<std::byte> bytes(64);
  auto table_of_one = std::make_unique<tier_segment[]>(1);
  table_of_one[0] = {TIER_SEGMENT_MAIN_KV, 0, bytes.size(), bytes.data()};
  tier_key key = KeyFromText("conformance:count-past-table");
  for (uint32_t count : {TIER_MAX_SEGMENTS + 1, 0xFFFFFFFFu}) {
    SCOPED_TRACE("count " + std::to_string(count));
    OpRecord record;
    tier_error error{};
    EXPECT_REFUSED(table()->spill(instance(), &key, table_of_one.get(), count, OpRecord::Callback,
                                  record.cookie(), &error),
                   TIER_INVALID_ARGUMENT, record, error);
  }
  if (absent()) return;
  // Restore of a stored checkpoint: a count above the stored one is refused before the table is
  // read.
  TestCheckpoint checkpoint = MakeCheckpoint("count-past-table", 4096);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  auto exact = checkpoint.EmptySegments();
  auto heap = std::make_unique<tier_segment[]>(exact.size());
  std::copy(exact.begin(), exact.end(), heap.get());
  for (uint32_t count :
       {static_cast<uint32_t>(exact.size() + 1), TIER_MAX_SEGMENTS + 1, 0xFFFFFFFFu}) {
    SCOPED_TRACE("restore count " + std::to_string(count));
    OpRecord record;
    tier_error error{};
    EXPECT_REFUSED(table()->restore(instance(), &checkpoint.key, heap.get(), count,
                                    OpRecord::Callback, record.cookie(), &error),
                   TIER_INVALID_ARGUMENT, record, error);
  }
  ASSERT_EQ(Restore(checkpoint), TIER_OK) << "the entry survives the refusals";
  EXPECT_TRUE(checkpoint.Matches());
}

TEST_P(AbiConformance, OversizedSegmentsAreRefusedBeforeAnyByteIsRead) {
  // Lengths no buffer can have: the 16 bytes behind `data` are all there is.
  std::vector<std::byte> small(16);
  tier_key key = KeyFromText("conformance:oversized-segment");
  for (uint64_t length : {uint64_t{1} << 62, ~uint64_t{0}}) {
    SCOPED_TRACE("length " + std::to_string(length));
    tier_segment segment{TIER_SEGMENT_MAIN_KV, 0, length, small.data()};
    OpRecord record;
    tier_error error{};
    error.message[0] = '\0';
    const tier_status got =
        table()->spill(instance(), &key, &segment, 1, OpRecord::Callback, record.cookie(), &error);
    EXPECT_TRUE(got == TIER_INVALID_ARGUMENT || got == TIER_NO_SPACE) << tier_status_name(got);
    EXPECT_NE(error.message[0], '\0');
    EXPECT_EQ(record.calls.load(), 0);
  }
  // A manifest longer than TIER_MANIFEST_MAX_BYTES.
  std::vector<std::byte> manifest(TIER_MANIFEST_MAX_BYTES + 1);
  tier_segment too_long[2] = {{TIER_SEGMENT_MAIN_KV, 0, small.size(), small.data()},
                              {TIER_SEGMENT_MANIFEST, 0, manifest.size(), manifest.data()}};
  OpRecord record;
  tier_error error{};
  EXPECT_REFUSED(
      table()->spill(instance(), &key, too_long, 2, OpRecord::Callback, record.cookie(), &error),
      TIER_INVALID_ARGUMENT, record, error);
  EXPECT_EQ(Stats().used_bytes, 0u);
}

TEST_P(AbiConformance, RestoreIntoWrongSizedOrMissingBuffersIsRefused) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint("restore-buffers", 8192);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  auto check_refused = [&](std::vector<tier_segment> segments, const char* what) {
    SCOPED_TRACE(what);
    OpRecord record;
    tier_error error{};
    const tier_status got = table()->restore(instance(), &checkpoint.key, segments.data(),
                                             static_cast<uint32_t>(segments.size()),
                                             OpRecord::Callback, record.cookie(), &error);
    if (got == TIER_OK) {
      ASSERT_TRUE(record.Wait());
      EXPECT_EQ(record.calls.load(), 1);
      EXPECT_EQ(record.status, TIER_INVALID_ARGUMENT);
    } else {
      EXPECT_EQ(got, TIER_INVALID_ARGUMENT);
      EXPECT_EQ(record.calls.load(), 0);
    }
  };
  auto zero = checkpoint.EmptySegments();
  for (auto& s : zero) s.length_bytes = 0;
  check_refused(zero, "every length 0 (a caller that did not stat first)");
  auto larger = checkpoint.EmptySegments();
  larger[0].length_bytes += 4096;  // still inside no buffer: must not be written
  larger[0].data = nullptr;
  check_refused(larger, "a length larger than stored, NULL data");
  auto null_data = checkpoint.EmptySegments();
  null_data[2].data = nullptr;
  check_refused(null_data, "NULL data for a non-empty segment");
  auto wrong_index = checkpoint.EmptySegments();
  wrong_index[0].index += 100;
  check_refused(wrong_index, "an index that is not stored");
  ASSERT_EQ(Restore(checkpoint), TIER_OK);
  EXPECT_TRUE(checkpoint.Matches());
}

TEST_P(AbiConformance, CloseWithRestoresInFlightCompletesEachOnce) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint("close-restores", 1 << 20);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  constexpr int kOps = 6;
  std::vector<TestCheckpoint> copies(kOps, checkpoint);
  std::vector<OpRecord> records(kOps);
  std::vector<tier_status> accepted(kOps);
  for (int i = 0; i < kOps; ++i) {
    auto segments = copies[i].EmptySegments();
    accepted[i] = table()->restore(instance(), &checkpoint.key, segments.data(),
                                   static_cast<uint32_t>(segments.size()), OpRecord::Callback,
                                   records[i].cookie(), nullptr);
  }
  Close();
  for (int i = 0; i < kOps; ++i) {
    if (accepted[i] != TIER_OK) {
      EXPECT_EQ(accepted[i], TIER_BUSY);
      EXPECT_EQ(records[i].calls.load(), 0);
      continue;
    }
    ASSERT_EQ(records[i].calls.load(), 1) << "restore " << i << " not completed by close";
    EXPECT_TRUE(records[i].status == TIER_OK || records[i].status == TIER_CANCELLED)
        << tier_status_name(records[i].status);
    if (records[i].status == TIER_OK) {
      EXPECT_TRUE(copies[i].Matches()) << i;
    }
  }
  if (!persistent()) return;
  Open();
  ASSERT_EQ(Restore(checkpoint), TIER_OK) << "a cancelled restore leaves the checkpoint whole";
  EXPECT_TRUE(checkpoint.Matches());
}

TEST_P(AbiConformance, CompletionMayCallTheProviderAndSeesTheCheckpoint) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint("callback-reentry", 65536);
  struct Reentry {
    const tier_provider* table = nullptr;
    tier_instance* instance = nullptr;
    tier_key key{};
    std::atomic<int> calls{0};
    tier_status stat_in_callback = -1;
    uint64_t entries_in_callback = 0;
    std::mutex mutex;
    std::condition_variable cv;
  } reentry;
  reentry.table = table();
  reentry.instance = instance();
  reentry.key = checkpoint.key;
  auto segments = checkpoint.Segments();
  ASSERT_EQ(
      table()->spill(
          instance(), &checkpoint.key, segments.data(), static_cast<uint32_t>(segments.size()),
          [](void* user, const tier_completion* c) {
            auto* r = static_cast<Reentry*>(user);
            tier_stat_result stat{};
            stat.struct_size = sizeof(stat);
            tier_stats stats{};
            stats.struct_size = sizeof(stats);
            tier_status s = r->table->stat(r->instance, &r->key, &stat, nullptr, 0, nullptr);
            r->table->stats(r->instance, &stats, nullptr);
            std::lock_guard lock(r->mutex);
            r->stat_in_callback = c->status == TIER_OK ? s : -2;
            r->entries_in_callback = stats.entries;
            r->calls.fetch_add(1);
            r->cv.notify_all();
          },
          &reentry, nullptr),
      TIER_OK);
  std::unique_lock lock(reentry.mutex);
  ASSERT_TRUE(reentry.cv.wait_for(lock, OpDeadline(), [&] { return reentry.calls.load() > 0; }));
  EXPECT_EQ(reentry.stat_in_callback, TIER_OK)
      << "a checkpoint is visible by the time its spill completes OK";
  EXPECT_EQ(reentry.entries_in_callback, 1u);
  lock.unlock();
  Close();
  EXPECT_EQ(reentry.calls.load(), 1);
}

// ---- What the header settles and a provider can get wrong quietly: spills in flight stay
// invisible, the declared bound on operations in flight holds, CHECKSUMS means verified -----------

// A spill in flight is invisible: stat does not find it, stats does not count it, enumerate does
// not list it. Without the provider's help a test can check consistency, as often as it can while
// the spill runs: an entry count taken before an enumerate never exceeds what the enumerate lists,
// and a key stat finds is one that a restore right after reads whole and an enumerate lists.
TEST_P(AbiConformance, SpillInFlightIsNeitherFoundNorCounted) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint("in-flight", 1 << 20);
  const uint64_t entries_before = Stats().entries;
  OpRecord record;
  auto segments = checkpoint.Segments();
  tier_error error{};
  ASSERT_EQ(table()->spill(instance(), &checkpoint.key, segments.data(),
                           static_cast<uint32_t>(segments.size()), OpRecord::Callback,
                           record.cookie(), &error),
            TIER_OK)
      << error.message;
  // No ASSERT until the spill completed: its record and buffers must outlive it.
  const auto give_up = std::chrono::steady_clock::now() + OpDeadline();
  int observations = 0;
  while (record.calls.load() == 0 && std::chrono::steady_clock::now() < give_up) {
    ++observations;
    const uint64_t counted = Stats().entries;
    const std::vector<tier_key> listed = EnumerateKeys();
    if (counted > listed.size()) {
      ADD_FAILURE() << "stats counted " << counted << " entries while an enumerate right after "
                    << "listed " << listed.size() << ": entries counts a spill still in flight";
      break;
    }
    tier_stat_result stat{};
    stat.struct_size = sizeof(stat);
    if (table()->stat(instance(), &checkpoint.key, &stat, nullptr, 0, nullptr) != TIER_OK) continue;
    // Found, so complete: a restore reads it whole and enumerate lists it.
    TestCheckpoint copy = checkpoint;
    const tier_status restored = Restore(copy);
    const std::vector<tier_key> after = EnumerateKeys();
    const bool in_list = std::any_of(after.begin(), after.end(),
                                     [&](const tier_key& k) { return SameKey(k, checkpoint.key); });
    EXPECT_EQ(restored, TIER_OK) << "stat found the checkpoint but a restore right after answered "
                                 << tier_status_name(restored)
                                 << ": stat sees a spill still in flight";
    EXPECT_TRUE(restored != TIER_OK || copy.Matches())
        << "stat found the checkpoint but a restore right after read other bytes: stat sees a "
           "spill still in flight";
    EXPECT_TRUE(in_list) << "stat found the checkpoint but an enumerate right after did not list "
                            "it: stat sees a spill still in flight";
    break;
  }
  ASSERT_TRUE(record.Wait("spill"));
  ASSERT_EQ(record.status, TIER_OK) << record.message;
  RecordProperty("observations_in_flight", observations);
  tier_stat_result stat{};
  stat.struct_size = sizeof(stat);
  EXPECT_EQ(table()->stat(instance(), &checkpoint.key, &stat, nullptr, 0, nullptr), TIER_OK)
      << "visible once its spill completed OK";
  EXPECT_EQ(Stats().entries, entries_before + 1);
}

// More spills and restores in flight than info.max_inflight_ops declares are refused with BUSY. A
// burst of twice that many (plus 16) fails when the provider accepted one while more than
// max_inflight_ops + slack accepted operations had not started their completion (the slack covers
// completions a provider has counted down but not yet called), or when stats reports more.
TEST_P(AbiConformance, NoMoreOperationsInFlightThanDeclared) {
  SKIP_IF_ABSENT();
  const uint32_t declared = info().max_inflight_ops;
  if (declared == 0) GTEST_SKIP() << GetParam().name << " declares no limit (max_inflight_ops 0)";
  if (declared > 1024) {
    GTEST_SKIP() << GetParam().name << " declares max_inflight_ops " << declared
                 << ": more than this test submits in one burst (2 * 1024 + 16)";
  }
  const int slack = std::max<int>(8, static_cast<int>(declared / 4));
  TestCheckpoint stored = MakeCheckpoint(
      "inflight-stored", {{TIER_SEGMENT_MAIN_KV, 0, 4096}, {TIER_SEGMENT_MANIFEST, 0, 64}});
  ASSERT_EQ(Spill(stored), TIER_OK);
  const int total = 2 * static_cast<int>(declared) + 16;
  std::vector<TestCheckpoint> checkpoints;
  checkpoints.reserve(total);
  std::vector<std::vector<tier_segment>> segments(total);
  std::vector<OpRecord> records(total);
  std::vector<tier_status> accepted(total, -1);
  std::atomic<int> started{0};
  int accepted_count = 0, worst_outstanding = 0, violation_at = -1;
  uint64_t worst_reported = 0;
  // Every completion thread held (where the provider runs completions on threads of its own), so
  // the burst finds the provider as full as it can be, however fast it is.
  auto hold = std::make_unique<CompletionHold>(table(), instance(), declared);
  for (int i = 0; i < total; ++i) {
    const bool restore = i % 2 == 0;
    if (restore) {
      checkpoints.push_back(stored);
      segments[i] = checkpoints.back().EmptySegments();
    } else {
      checkpoints.push_back(
          MakeCheckpoint("inflight-" + std::to_string(i), {{TIER_SEGMENT_MAIN_KV, 0, 4096}}));
      segments[i] = checkpoints.back().Segments();
    }
    records[i].CountStartIn(&started);
    tier_error error{};
    const auto n = static_cast<uint32_t>(segments[i].size());
    accepted[i] = restore ? table()->restore(instance(), &stored.key, segments[i].data(), n,
                                             OpRecord::Callback, records[i].cookie(), &error)
                          : table()->spill(instance(), &checkpoints[i].key, segments[i].data(), n,
                                           OpRecord::Callback, records[i].cookie(), &error);
    if (accepted[i] != TIER_OK) {
      EXPECT_TRUE(accepted[i] == TIER_BUSY || (!restore && accepted[i] == TIER_NO_SPACE))
          << "op " << i << ": " << tier_status_name(accepted[i]) << ": " << error.message;
      EXPECT_NE(error.message[0], '\0') << "op " << i << ": a refusal says why";
      continue;
    }
    // Accepted before this one and not started completing by now: a lower bound of what was in
    // flight when this one was accepted.
    const int outstanding = accepted_count - (started.load() - (records[i].started() ? 1 : 0));
    worst_outstanding = std::max(worst_outstanding, outstanding);
    if (outstanding >= static_cast<int>(declared) + slack && violation_at < 0) violation_at = i;
    ++accepted_count;
    worst_reported = std::max(worst_reported, Stats().inflight_ops);
  }
  hold->Release();
  for (int i = 0; i < total; ++i) {
    if (accepted[i] != TIER_OK) {
      EXPECT_EQ(records[i].calls.load(), 0) << "refused op " << i << " called back";
      continue;
    }
    if (!records[i].Wait(i % 2 == 0 ? "restore" : "spill")) return;
    if (i % 2 == 0) {
      EXPECT_EQ(records[i].status, TIER_OK) << "restore " << i << ": " << records[i].message;
      EXPECT_TRUE(records[i].status != TIER_OK || checkpoints[i].Matches()) << "restore " << i;
    } else {
      EXPECT_TRUE(records[i].status == TIER_OK || records[i].status == TIER_NO_SPACE ||
                  records[i].status == TIER_BUSY)
          << "spill " << i << ": " << tier_status_name(records[i].status);
    }
  }
  RecordProperty("worst_outstanding", worst_outstanding);
  EXPECT_LT(violation_at, 0) << "accepted operation " << violation_at
                             << " of a burst while at least " << worst_outstanding
                             << " accepted ones had not completed: more than "
                             << "max_inflight_ops = " << declared
                             << " in flight (the one too many must be refused with TIER_BUSY)";
  EXPECT_LE(worst_reported, declared)
      << "stats reported inflight_ops " << worst_reported << ", above max_inflight_ops";
}

namespace {

// Flips one byte in every copy of `needle` found in the regular files under `dir`; fsyncs what it
// changed. Returns how many copies it damaged.
size_t DamageEveryCopy(const std::string& dir, std::span<const std::byte> needle) {
  size_t damaged = 0;
  for (const auto& file : std::filesystem::recursive_directory_iterator(dir)) {
    if (!file.is_regular_file()) continue;
    std::ifstream in(file.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string_view pattern(reinterpret_cast<const char*>(needle.data()), needle.size());
    std::vector<size_t> hits;
    for (size_t at = bytes.find(pattern); at != std::string::npos;
         at = bytes.find(pattern, at + 1)) {
      hits.push_back(at + needle.size() / 2);
    }
    if (hits.empty()) continue;
    const int fd = ::open(file.path().c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) continue;
    for (size_t at : hits) {
      const char flipped = static_cast<char>(bytes[at] ^ 0x5A);
      if (::pwrite(fd, &flipped, 1, static_cast<off_t>(at)) == 1) ++damaged;
    }
    ::fsync(fd);
    ::close(fd);
  }
  return damaged;
}

}  // namespace

// TIER_CAP_CHECKSUMS: damaged stored bytes are never returned. For a persistent provider whose
// files live under {tmpdir}, one byte of every stored copy of a segment is flipped; the restore
// must complete with DATA_LOSS (or the entry, found damaged at open, is gone) and the entry is
// dropped.
TEST_P(AbiConformance, DamagedStoredBytesAreDataLossNeverWrongBytes) {
  SKIP_IF_ABSENT();
  if ((info().capabilities & TIER_CAP_CHECKSUMS) == 0) {
    GTEST_SKIP() << GetParam().name << " does not claim TIER_CAP_CHECKSUMS";
  }
  if (!persistent()) {
    GTEST_SKIP() << GetParam().name
                 << " claims TIER_CAP_CHECKSUMS but not TIER_CAP_PERSISTENT: its "
                 << "stored bytes live in its process, out of the suite's reach";
  }
  if (tmpdir().empty()) {
    GTEST_SKIP() << "no --tier-opt names {tmpdir}: the suite does not know where "
                 << GetParam().name << " keeps its files";
  }
  TestCheckpoint checkpoint = MakeCheckpoint("damaged", 64 * 1024);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  Close();
  // 64 bytes from the middle of the largest segment (STATE_IMAGE 0): random, found nowhere else.
  const std::vector<std::byte>& segment = checkpoint.buffers[3];
  const size_t damaged = DamageEveryCopy(
      tmpdir(), std::span<const std::byte>(segment).subspan(segment.size() / 2, 64));
  if (damaged == 0) {
    GTEST_SKIP() << "the checkpoint's bytes appear nowhere verbatim under {tmpdir} (compressed or "
                    "encrypted at rest?): the suite cannot aim the damage";
  }
  RecordProperty("copies_damaged", static_cast<int>(damaged));
  ASSERT_NE(Open(), nullptr);
  const std::vector<tier_key> listed = EnumerateKeys();
  const bool still_listed = std::any_of(
      listed.begin(), listed.end(), [&](const tier_key& k) { return SameKey(k, checkpoint.key); });
  const tier_status restored = Restore(checkpoint);
  if (restored == TIER_OK) {
    ADD_FAILURE() << "restore completed OK "
                  << (checkpoint.Matches() ? "although every stored copy of a segment was damaged"
                                           : "with damaged bytes")
                  << ": a provider claiming TIER_CAP_CHECKSUMS must verify them and complete with "
                     "TIER_DATA_LOSS";
  } else if (restored == TIER_NOT_FOUND) {
    EXPECT_FALSE(still_listed) << "enumerate lists the damaged checkpoint but restore answers "
                                  "NOT_FOUND instead of DATA_LOSS";
  } else {
    EXPECT_EQ(restored, TIER_DATA_LOSS) << tier_status_name(restored);
  }
  tier_stat_result stat{};
  stat.struct_size = sizeof(stat);
  EXPECT_EQ(table()->stat(instance(), &checkpoint.key, &stat, nullptr, 0, nullptr), TIER_NOT_FOUND)
      << "a checkpoint that failed verification is dropped";
}

// ---- The rest of what the header settles --------------------------------------------------------

// An enumerate callback may call stat and stats of the same instance (no lock of the provider's
// is held that they take). Bounded: a provider that deadlocks fails at the deadline.
TEST_P(AbiConformance, EnumerateCallbackMayCallStatAndStats) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint("enumerate-reentry", 8192);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  struct Seen {
    const tier_provider* table;
    tier_instance* instance;
    tier_status enumerated = -1, stat = -1, stats = -1;
    uint32_t segment_count = 0;
    int entries = 0;
  };
  auto seen = std::make_shared<Seen>(Seen{table(), instance()});
  ASSERT_TRUE(ReturnsWithinDeadline("enumerate whose callback calls stat and stats", [seen] {
    seen->enumerated = seen->table->enumerate(
        seen->instance,
        [](void* user, const tier_entry* entry) -> int32_t {
          auto* s = static_cast<Seen*>(user);
          tier_stat_result stat{};
          stat.struct_size = sizeof(stat);
          s->stat = s->table->stat(s->instance, &entry->key, &stat, nullptr, 0, nullptr);
          s->segment_count = stat.segment_count;
          tier_stats stats{};
          stats.struct_size = sizeof(stats);
          s->stats = s->table->stats(s->instance, &stats, nullptr);
          ++s->entries;
          return 0;
        },
        seen.get(), nullptr);
  }));
  EXPECT_EQ(seen->enumerated, TIER_OK);
  EXPECT_EQ(seen->entries, 1);
  EXPECT_EQ(seen->stat, TIER_OK) << "stat of the listed entry, from the enumerate callback";
  EXPECT_EQ(seen->segment_count, checkpoint.layout.size());
  EXPECT_EQ(seen->stats, TIER_OK) << "stats, from the enumerate callback";
}

// "" is a namespace like any other: it opens, stores, and never serves another namespace's keys.
TEST_P(AbiConformance, EmptyNamespaceIsANamespaceLikeAnyOther) {
  TestCheckpoint named = MakeCheckpoint("namespace-named", 4096);
  if (!absent() && persistent()) {
    ASSERT_EQ(Spill(named), TIER_OK);
  }
  ASSERT_NE(Open(std::string()), nullptr) << "open with namespace \"\"";
  if (absent()) return;
  TestCheckpoint unnamed = MakeCheckpoint("namespace-empty", 4096);
  ASSERT_EQ(Spill(unnamed), TIER_OK);
  ASSERT_EQ(Restore(unnamed), TIER_OK);
  EXPECT_TRUE(unnamed.Matches());
  if (!persistent()) return;
  tier_stat_result stat{};
  stat.struct_size = sizeof(stat);
  EXPECT_EQ(table()->stat(instance(), &named.key, &stat, nullptr, 0, nullptr), TIER_NOT_FOUND)
      << "namespace \"\" serves a checkpoint of namespace '" << GetParam().namespace_id << "'";
  Open();
  ASSERT_NE(instance(), nullptr);
  EXPECT_EQ(table()->stat(instance(), &unnamed.key, &stat, nullptr, 0, nullptr), TIER_NOT_FOUND)
      << "namespace '" << GetParam().namespace_id << "' serves a checkpoint of namespace \"\"";
  ASSERT_EQ(Restore(named), TIER_OK);
  EXPECT_TRUE(named.Matches());
}

// A remove of a key whose spill is in flight answers NOT_FOUND and the spill goes on; if the spill
// had already completed, the remove answers OK and the checkpoint is gone. Nothing else.
TEST_P(AbiConformance, RemoveOfASpillInFlightIsNotFoundAndTheSpillGoesOn) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint("remove-in-flight", 1 << 20);
  OpRecord record;
  auto segments = checkpoint.Segments();
  tier_error error{};
  ASSERT_EQ(table()->spill(instance(), &checkpoint.key, segments.data(),
                           static_cast<uint32_t>(segments.size()), OpRecord::Callback,
                           record.cookie(), &error),
            TIER_OK)
      << error.message;
  const tier_status removed = table()->remove(instance(), &checkpoint.key, &error);
  ASSERT_TRUE(record.Wait("spill"));
  EXPECT_EQ(record.status, TIER_OK) << record.message << ": a remove must not break a spill";
  tier_stat_result stat{};
  stat.struct_size = sizeof(stat);
  const tier_status found = table()->stat(instance(), &checkpoint.key, &stat, nullptr, 0, nullptr);
  if (removed == TIER_NOT_FOUND) {
    EXPECT_EQ(found, TIER_OK) << "remove answered NOT_FOUND while the spill was in flight, so the "
                                 "spill goes on and stores the checkpoint";
  } else if (removed == TIER_OK) {
    EXPECT_EQ(found, TIER_NOT_FOUND) << "remove answered OK, so the checkpoint is gone";
  } else {
    ADD_FAILURE() << "remove during the spill answered " << tier_status_name(removed) << " ("
                  << error.message << "): the ABI allows NOT_FOUND, or OK once the spill completed";
  }
}

// TIER_MAX_SEGMENTS is a floor as well as a ceiling: a checkpoint of exactly that many segments is
// stored and restored (one more is refused: SegmentCountsPastTheTableAreRefusedUnread).
TEST_P(AbiConformance, CheckpointOfTierMaxSegmentsRoundTrips) {
  std::vector<tier_segment_info> layout;
  for (uint32_t i = 0; i < TIER_MAX_SEGMENTS; ++i) {
    layout.push_back({TIER_SEGMENT_OTHER, i, i < 64 ? 100u + i : 0u});
  }
  TestCheckpoint checkpoint = MakeCheckpoint("max-segments", layout);
  const tier_status spilled = Spill(checkpoint);
  if (absent()) {
    EXPECT_EQ(spilled, TIER_NO_SPACE);
    return;
  }
  ASSERT_EQ(spilled, TIER_OK) << "a checkpoint of TIER_MAX_SEGMENTS segments";
  tier_stat_result stat{};
  stat.struct_size = sizeof(stat);
  ASSERT_EQ(table()->stat(instance(), &checkpoint.key, &stat, nullptr, 0, nullptr), TIER_OK);
  EXPECT_EQ(stat.segment_count, TIER_MAX_SEGMENTS);
  ASSERT_EQ(Restore(checkpoint), TIER_OK);
  EXPECT_TRUE(checkpoint.Matches());
}

std::string TargetName(const ::testing::TestParamInfo<Target>& info) {
  std::string name = info.param.name;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Provider, AbiConformance, ::testing::ValuesIn(Targets()), TargetName);

}  // namespace
}  // namespace tier::conformance
