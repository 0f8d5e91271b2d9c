#include "rules.h"

#include <cstdio>
#include <map>
#include <mutex>
#include <utility>

namespace tier::conformance {
namespace {

constexpr const char* kNoProof = "";  // no bad provider of the suite's own for this rule (yet)

std::mutex g_skip_mutex;
// (test full name, rule id) -> reason; guarded by g_skip_mutex.
std::map<std::pair<std::string, std::string>, std::string> g_rule_skips;

std::string CurrentTestFullName() {
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) return "";
  return std::string(info->test_suite_name()) + "." + info->name();
}

// "TestName/provider" -> {"TestName", "provider"}.
std::pair<std::string, std::string> SplitParamName(const std::string& name) {
  const size_t slash = name.rfind('/');
  if (slash == std::string::npos) return {name, ""};
  return {name.substr(0, slash), name.substr(slash + 1)};
}

// The first skip message of a skipped test (GoogleTest keeps it as a test part).
std::string SkipMessage(const ::testing::TestResult& result) {
  for (int i = 0; i < result.total_part_count(); ++i) {
    const ::testing::TestPartResult& part = result.GetTestPartResult(i);
    if (part.skipped()) {
      std::string text = part.message() != nullptr ? part.message() : "";
      const size_t newline = text.find('\n');
      return newline == std::string::npos ? text : text.substr(0, newline);
    }
  }
  return "skipped";
}

enum class Outcome { kNotRun, kSkipped, kChecked, kFailed };

struct Tally {
  Outcome outcome = Outcome::kNotRun;
  std::string reason;  // for kSkipped
};

class RuleSummaryPrinter : public ::testing::EmptyTestEventListener {
 public:
  void OnTestProgramEnd(const ::testing::UnitTest& unit) override {
    // provider -> test name -> (result, full name)
    std::map<std::string, std::map<std::string, const ::testing::TestInfo*>> ran;
    for (int s = 0; s < unit.total_test_suite_count(); ++s) {
      const ::testing::TestSuite* suite = unit.GetTestSuite(s);
      for (int t = 0; t < suite->total_test_count(); ++t) {
        const ::testing::TestInfo* info = suite->GetTestInfo(t);
        if (!info->should_run()) continue;
        auto [test, provider] = SplitParamName(info->name());
        ran[provider][test] = info;
      }
    }
    for (const auto& [provider, tests] : ran) PrintProvider(provider, tests);
  }

 private:
  static void PrintProvider(const std::string& provider,
                            const std::map<std::string, const ::testing::TestInfo*>& tests) {
    int checked = 0, skipped = 0, failed = 0, not_run = 0, unverifiable = 0;
    std::vector<std::string> skip_lines, fail_lines;
    for (const Rule& rule : Rules()) {
      if (rule.tests.empty()) {
        ++unverifiable;
        continue;
      }
      Tally tally = Judge(rule, tests);
      switch (tally.outcome) {
        case Outcome::kChecked:
          ++checked;
          break;
        case Outcome::kFailed:
          ++failed;
          fail_lines.push_back(std::string(rule.id));
          break;
        case Outcome::kSkipped:
          ++skipped;
          skip_lines.push_back(std::string(rule.id) + ": " + tally.reason);
          break;
        case Outcome::kNotRun:
          ++not_run;
      }
    }
    std::printf(
        "\nrules of abi/tier_provider.h for %s: %d checked, %d skipped, %d failed, %d not run "
        "(filtered out), %d not checkable black-box (of %zu; see abi/README.md)\n",
        provider.c_str(), checked, skipped, failed, not_run, unverifiable, Rules().size());
    for (const std::string& line : skip_lines) std::printf("  skipped %s\n", line.c_str());
    for (const std::string& line : fail_lines) std::printf("  FAILED  %s\n", line.c_str());
    std::fflush(stdout);
  }

  // Failed if any of its tests failed; checked if one ran and passed without skipping the rule;
  // skipped (with the first reason) if every test that ran skipped it.
  static Tally Judge(const Rule& rule,
                     const std::map<std::string, const ::testing::TestInfo*>& tests) {
    Tally tally;
    bool any_checked = false, any_failed = false;
    std::string reason;
    for (const char* name : rule.tests) {
      auto it = tests.find(name);
      if (it == tests.end()) continue;
      const ::testing::TestInfo* info = it->second;
      const ::testing::TestResult* result = info->result();
      const std::string full = std::string(info->test_suite_name()) + "." + info->name();
      if (result->Failed()) {
        any_failed = true;
      } else if (result->Skipped()) {
        if (reason.empty()) reason = std::string(name) + ": " + SkipMessage(*result);
      } else {
        std::lock_guard lock(g_skip_mutex);
        auto skip = g_rule_skips.find({full, rule.id});
        if (skip != g_rule_skips.end()) {
          if (reason.empty()) reason = std::string(name) + ": " + skip->second;
        } else {
          any_checked = true;
        }
      }
    }
    if (any_failed) {
      tally.outcome = Outcome::kFailed;
    } else if (any_checked) {
      tally.outcome = Outcome::kChecked;
    } else if (!reason.empty()) {
      tally.outcome = Outcome::kSkipped;
      tally.reason = reason;
    }
    return tally;
  }
};

}  // namespace

void SkipRule(const char* rule_id, const std::string& reason) {
  std::lock_guard lock(g_skip_mutex);
  g_rule_skips[{CurrentTestFullName(), rule_id}] = reason;
  std::printf("note: rule %s not checked: %s\n", rule_id, reason.c_str());
}

::testing::TestEventListener* NewRuleSummaryPrinter() {
  return new RuleSummaryPrinter;
}

void PrintRuleTable() {
  std::printf("| id | where | rule | checked by | proof (bad provider caught) |\n");
  std::printf("| --- | --- | --- | --- | --- |\n");
  for (const Rule& rule : Rules()) {
    std::string tests;
    for (const char* test : rule.tests) {
      if (!tests.empty()) tests += ", ";
      tests += std::string("`") + test + "`";
    }
    if (rule.tests.empty()) tests = std::string("not checkable black-box: ") + rule.unverifiable;
    const std::string proof =
        rule.proof[0] != '\0' ? std::string("`ConformanceSuite.") + rule.proof + "`" : "";
    std::printf("| %s | %s | %s | %s | %s |\n", rule.id, rule.where, rule.text, tests.c_str(),
                proof.c_str());
  }
}

const std::vector<Rule>& Rules() {
  static const std::vector<Rule> rules = {
      // ---- versioning and the entry point ----
      {"VER-ENTRY",
       "entry point",
       "one exported entry point; cheap and stateless: may be called more than once, same table",
       {"EntryPointAcceptsEveryMinorAndRefusesAnotherMajor"},
       "",
       kNoProof},
      {"VER-MAJOR",
       "versioning 2",
       "a host of another major is refused with TIER_UNSUPPORTED",
       {"EntryPointAcceptsEveryMinorAndRefusesAnotherMajor"},
       "",
       kNoProof},
      {"VER-MINOR",
       "versioning 3",
       "the minor may differ both ways: an older (1.0) and a newer (1.99) host are accepted",
       {"EntryPointAcceptsEveryMinorAndRefusesAnotherMajor"},
       "",
       kNoProof},
      {"VER-TABLE",
       "versioning 4",
       "the table names its major, covers every 1.0 slot, and every 1.0 slot is non-NULL",
       {"EntryPointAcceptsEveryMinorAndRefusesAnotherMajor"},
       "",
       kNoProof},
      {"VER-HOSTSLOT",
       "versioning 4",
       "the provider uses a host service only when it lies inside the host table's struct_size",
       {"OpenWithAHostTableWithoutTheClockUsesNoMissingService"},
       "",
       kNoProof},
      {"VER-OUTSIZE",
       "versioning 5",
       "a callee writes only the out-structure fields that lie inside the caller's struct_size",
       {"OutStructuresHonourStructSize", "ShortOutStructuresGetOnlyTheFieldsTheyHave"},
       "",
       kNoProof},
      {"VER-NOEXC",
       "versioning 6",
       "no C++ exception, longjmp or signal crosses the boundary",
       {},
       "no black-box call can make a provider throw inside; one that escapes ends the run, so "
       "every test would report it",
       kNoProof},
      // ---- errors ----
      {"ERR-MESSAGE",
       "tier_error",
       "a refusal carries its status and a non-empty, NUL-terminated message naming the cause",
       {"BadArgumentsGetInvalidArgumentAndNoCallback", "NullInstanceIsRefusedByEveryFunction"},
       "",
       kNoProof},
      {"ERR-NULLBUF",
       "tier_error",
       "every function accepts a NULL tier_error",
       {"NullInstanceIsRefusedByEveryFunction", "ProbeRefusesKeyCountsOutsideTheRangeUnread"},
       "",
       kNoProof},
      // ---- ownership, threads, waiting ----
      {"THR-STATIC",
       "ownership",
       "the provider table and its strings stay valid until the library is unloaded",
       {},
       "a table freed too early still reads correctly until its memory is reused; only a host "
       "that unloads and reloads could notice",
       kNoProof},
      {"THR-ANYTHREAD",
       "threads",
       "every function may be called from any thread, concurrently with any other",
       {"EveryCompletionRunsExactlyOnce", "ProbeNeverFindsASpillInFlightOrARemovedKey"},
       "",
       kNoProof},
      {"THR-NOWAIT",
       "waiting",
       "spill/restore acceptance, info, stats, stat and plan_restore answer without waiting for "
       "data I/O: they return while every completion thread is blocked",
       {"HeldSpillIsInvisibleUncountedAndRemoveIsNotFound"},
       "",
       kNoProof},
      // ---- completions ----
      {"CMP-ONCE",
       "spill, restore",
       "an accepted operation's completion runs exactly once (success, error or cancelled)",
       {"EveryCompletionRunsExactlyOnce", "CloseWithOperationsInFlightCompletesEachOnce"},
       "",
       "CatchesARestoreThatNeverCompletes"},
      {"CMP-REFUSED",
       "spill, restore",
       "a refused spill or restore never calls back",
       {"BadArgumentsGetInvalidArgumentAndNoCallback", "UnknownSegmentKindsAreRefused"},
       "",
       kNoProof},
      {"CMP-MESSAGE",
       "tier_completion",
       "the completion message is never NULL, and non-empty whenever status is not OK",
       {"EveryCompletionRunsExactlyOnce", "MultiSegmentCheckpointRoundTripsByteForByte"},
       "",
       "CatchesANullCompletionMessage"},
      {"CMP-LOGICAL",
       "tier_completion",
       "logical_bytes is the bytes of segment data spilled or restored (0 unless OK)",
       {"RestoreCompletionReportsLogicalBytes"},
       "",
       "CatchesARestoreCompletionReportingStoredBytesAsLogical"},
      {"CMP-DURATION",
       "tier_completion",
       "duration_ns runs from acceptance to completion on the host's monotonic clock (or is 0)",
       {"CompletionDurationIsWithinTheOperation"},
       "",
       kNoProof},
      {"CMP-REENTRY",
       "tier_done_fn",
       "a completion may call the provider (not close); the provider holds none of its locks "
       "while calling it: for every size class, tiny spills included",
       {"CompletionMayCallTheProviderAndSeesTheCheckpoint",
        "CompletionsOfEverySizeMayCallTheProvider"},
       "",
       "CatchesTinySpillsCompletingUnderTheProvidersLock"},
      {"CMP-BUFFERS",
       "spill, restore",
       "segment buffers are borrowed until the completion: a spill only reads them, a restore "
       "writes nothing outside them",
       {"GuardedBuffersAreNeverWrittenOutsideTheirSegments"},
       "",
       "CatchesARestoreWritingPastASegment"},
      // ---- open and close ----
      {"OPEN-OPTIONS",
       "open",
       "an unknown option is refused with TIER_INVALID_ARGUMENT and a message naming it",
       {"OpenRefusesAnUnknownOptionNamingIt"},
       "",
       kNoProof},
      {"OPEN-NAMESPACE",
       "open",
       "checkpoints of another namespace are never served, also with both instances open at once",
       {"AnotherNamespaceIsNeverServed", "TwoInstancesOfDifferentNamespacesAreIsolated"},
       "",
       "CatchesOpenReturningTheInstanceOfAnotherNamespace"},
      {"OPEN-DISTINCT",
       "open (settled)",
       "every open that succeeds returns a new instance, even for equal options (a provider "
       "holding an exclusive resource refuses the second with TIER_BUSY instead)",
       {"TwoInstancesOfDifferentNamespacesAreIsolated"},
       "",
       "CatchesOpenReturningTheInstanceOfAnotherNamespace"},
      {"OPEN-EMPTYNS",
       "open",
       "\"\" is a namespace like any other",
       {"EmptyNamespaceIsANamespaceLikeAnyOther"},
       "",
       kNoProof},
      {"OPEN-NSLONG",
       "open",
       "a namespace longer than the provider can store is refused with TIER_INVALID_ARGUMENT "
       "(else it works like any other)",
       {"LongNamespaceIsStoredOrRefused"},
       "",
       kNoProof},
      {"CLOSE-WAITS",
       "close",
       "close completes every accepted operation (OK or CANCELLED) before it returns; nothing "
       "calls back afterwards",
       {"CloseWithOperationsInFlightCompletesEachOnce",
        "CloseWithRestoresInFlightCompletesEachOnce",
        "CloseWithHeldOperationsCompletesEachBeforeReturning"},
       "",
       "CatchesCloseReturningBeforeItsOperationsComplete"},
      {"CLOSE-KEEPS",
       "close",
       "a persistent provider's stored checkpoints stay, whole, across close",
       {"PersistentCheckpointsSurviveReopen", "CloseWithOperationsInFlightCompletesEachOnce"},
       "",
       kNoProof},
      // ---- info and stats ----
      {"INFO-FIELDS",
       "tier_info",
       "name equals the table's, version and io_path non-NULL, buffer_alignment a power of two",
       {"InfoDescribesTheProvider"},
       "",
       kNoProof},
      {"INFO-MAXINFLIGHT",
       "tier_info",
       "at most max_inflight_ops (0 = no limit) spills and restores are accepted and not "
       "completed; "
       "one more is refused TIER_BUSY",
       {"NoMoreOperationsInFlightThanDeclared"},
       "",
       "CatchesMaxInflightOpsNeverEnforced"},
      {"STATS-USED",
       "tier_stats",
       "used_bytes grows by each completed spill's stored bytes and falls back on remove",
       {"StatsTrackUsage"},
       "",
       kNoProof},
      {"STATS-CAPACITY",
       "tier_stats (settled)",
       "used_bytes <= capacity_bytes always, for compressible and incompressible data filled to "
       "the budget",
       {"FillingTheTierNeverPassesCapacity"},
       "",
       "CatchesAdmissionByLogicalBytes"},
      {"STATS-ENTRIES",
       "tier_stats",
       "entries counts complete, visible checkpoints, never a spill in flight",
       {"SpillInFlightIsNeitherFoundNorCounted",
        "HeldSpillIsInvisibleUncountedAndRemoveIsNotFound"},
       "",
       "CatchesEntriesCountingSpillsInFlight"},
      {"STATS-INFLIGHT",
       "tier_stats",
       "inflight_ops counts accepted operations whose completion has not started (never above "
       "max_inflight_ops)",
       {"NoMoreOperationsInFlightThanDeclared"},
       "",
       kNoProof},
      // ---- stat ----
      {"STAT-RESULT",
       "stat",
       "TIER_OK with the full segment count and the first min(count, capacity) segments, or "
       "TIER_NOT_FOUND",
       {"MultiSegmentCheckpointRoundTripsByteForByte", "StatFillsNoMoreSegmentsThanTheCapacity",
        "UnknownKeyIsNotFound"},
       "",
       kNoProof},
      {"STAT-INFLIGHT",
       "stat",
       "a checkpoint still being spilled is not found",
       {"SpillInFlightIsNeitherFoundNorCounted",
        "HeldSpillIsInvisibleUncountedAndRemoveIsNotFound"},
       "",
       "CatchesStatSeeingASpillInFlight"},
      {"STAT-STORED",
       "stat (settled)",
       "stat's stored_bytes includes the provider's overhead: it equals the spill completion's, "
       "enumerate's and used_bytes' growth; without TIER_CAP_COMPRESSION it is >= logical",
       {"StoredBytesAgreeAcrossStatStatsCompletionAndEnumerate"},
       "",
       "CatchesStatStoredBytesWithoutOverhead"},
      // ---- spill ----
      {"SPILL-VISIBLE",
       "spill",
       "all segments or nothing visible; visible to stat/restore/enumerate only once it completed "
       "OK (by the time its completion runs)",
       {"CompletionMayCallTheProviderAndSeesTheCheckpoint",
        "CloseWithOperationsInFlightCompletesEachOnce", "RemoveMakesTheKeyNotFound"},
       "",
       kNoProof},
      {"SPILL-DUP",
       "spill / TIER_ALREADY_EXISTS",
       "a key stored or being stored is refused (or completes) TIER_ALREADY_EXISTS",
       {"SpillOfAnExistingKeyIsAlreadyExists", "ConcurrentSpillsOfOneKeyStoreItOnce"},
       "",
       kNoProof},
      {"SPILL-NOSPACE",
       "spill",
       "over capacity is TIER_NO_SPACE, refused before a byte is read (or completed with it), and "
       "uses nothing",
       {"OversizedCheckpointIsNoSpace", "OversizedSegmentsAreRefusedBeforeAnyByteIsRead"},
       "",
       kNoProof},
      {"SPILL-ARGS",
       "spill",
       "NULL key, segments or callback, zero segments, NULL data are TIER_INVALID_ARGUMENT",
       {"BadArgumentsGetInvalidArgumentAndNoCallback"},
       "",
       kNoProof},
      // ---- segments and keys ----
      {"SEG-COUNT",
       "TIER_MAX_SEGMENTS",
       "1..TIER_MAX_SEGMENTS segments accepted; more refused before the table is read",
       {"CheckpointOfTierMaxSegmentsRoundTrips", "SegmentCountsPastTheTableAreRefusedUnread"},
       "",
       kNoProof},
      {"SEG-KINDS",
       "tier_segment",
       "unknown kinds, a repeated (kind, index), a second manifest or one over "
       "TIER_MANIFEST_MAX_BYTES are refused",
       {"UnknownSegmentKindsAreRefused", "BadArgumentsGetInvalidArgumentAndNoCallback",
        "OversizedSegmentsAreRefusedBeforeAnyByteIsRead"},
       "",
       kNoProof},
      {"SEG-BYTES",
       "tier_segment",
       "every segment length round-trips byte for byte: 0 bytes, odd sizes, around 32 and 64 MiB "
       "(256 MiB and 2^31 with TIER_CONFORMANCE_HUGE_SEGMENTS=1, a profile's 100k-token checkpoint "
       "with "
       "TIER_CONFORMANCE_PROFILE)",
       {"MultiSegmentCheckpointRoundTripsByteForByte", "ZeroLengthSegmentsRoundTrip",
        "SegmentsAroundThirtyTwoAndSixtyFourMiBRoundTrip", "HugeSegmentsRoundTrip",
        "ProfileCheckpointRoundTrips"},
       "",
       "CatchesARestoreWrongPast32MiB"},
      {"KEY-EXACT",
       "tier_key",
       "keys are compared byte for byte: a key differing in one byte, or sharing a hash, is a "
       "different checkpoint",
       {"KeysDifferingInOneByteAreDifferentCheckpoints",
        "ProbeFindsExactlyTheStoredKeysAmongCollidingOnes"},
       "",
       "CatchesAProbeComparingOnlyTheHeadOfAHashChain"},
      // ---- restore ----
      {"RESTORE-TABLE",
       "restore",
       "segments list exactly the stored ones (same count, kinds, indexes, lengths, any order), "
       "else TIER_INVALID_ARGUMENT",
       {"RestoreNeedsTheExactSegmentTable", "RestoreIntoWrongSizedOrMissingBuffersIsRefused"},
       "",
       kNoProof},
      {"RESTORE-NOTFOUND",
       "restore",
       "a key not stored is refused TIER_NOT_FOUND, or completes with it (both legal)",
       {"UnknownKeyIsNotFound", "RemoveMakesTheKeyNotFound"},
       "",
       kNoProof},
      {"RESTORE-REMOVE",
       "restore",
       "a remove arriving meanwhile does not break a restore already accepted",
       {"RemoveDuringRestoreDoesNotBreakTheRestore", "HeldRestoreSurvivesARemove"},
       "",
       "CatchesARemoveThatBreaksAnAcceptedRestore"},
      {"RESTORE-RACE-CLOSE",
       "close",
       "an operation racing close completes OK (buffers filled / stored) or CANCELLED",
       {"CloseWithRestoresInFlightCompletesEachOnce",
        "CloseWithHeldOperationsCompletesEachBeforeReturning"},
       "",
       kNoProof},
      // ---- remove ----
      {"REMOVE-RESULT",
       "remove",
       "TIER_OK and the key is gone (stat, restore, enumerate), or TIER_NOT_FOUND; it can be "
       "stored again",
       {"RemoveMakesTheKeyNotFound", "EnumerateListsExactlyWhatIsStored"},
       "",
       kNoProof},
      {"REMOVE-INFLIGHT",
       "remove",
       "a key whose spill is in flight is NOT_FOUND and that spill goes on",
       {"RemoveOfASpillInFlightIsNotFoundAndTheSpillGoesOn",
        "HeldSpillIsInvisibleUncountedAndRemoveIsNotFound"},
       "",
       kNoProof},
      {"REMOVE-PERSIST",
       "remove (settled)",
       "a persistent provider's completed remove survives close and reopen (a restart)",
       {"PersistentRemoveSurvivesReopen"},
       "",
       "CatchesARemoveLostAtReopen"},
      // ---- enumerate ----
      {"ENUM-LIST",
       "enumerate",
       "every complete, visible checkpoint of the namespace, with segment table and manifest; "
       "non-zero from the callback stops",
       {"EnumerateListsExactlyWhatIsStored", "PersistentCheckpointsSurviveReopen"},
       "",
       kNoProof},
      {"ENUM-REENTRY",
       "tier_enumerate_fn",
       "the callback may call info, stats, stat, plan_restore and probe of the same instance",
       {"EnumerateCallbackMayCallStatAndStats"},
       "",
       kNoProof},
      // ---- plan_restore ----
      {"PLAN-DECISION",
       "plan_restore",
       "RESTORE (CHEAPER) only when the estimate is lower; otherwise SKIP_TO_ROOT with MISS or "
       "COST; a miss is a plan (TIER_OK)",
       {"PlanRestoreWeighsCostAgainstPrefill"},
       "",
       kNoProof},
      {"PLAN-COUNT",
       "plan_restore",
       "counts every decision",
       {},
       "a metric of the provider's own naming through the host services, not an ABI result",
       kNoProof},
      // ---- probe (1.1) ----
      {"PROBE-COUNT",
       "probe (settled)",
       "key_count outside 1..TIER_PROBE_MAX_KEYS is refused TIER_INVALID_ARGUMENT before keys "
       "is read or found written",
       {"ProbeRefusesKeyCountsOutsideTheRangeUnread"},
       "",
       "CatchesAProbeThatReadsPastItsKeys"},
      {"PROBE-EXACT",
       "probe",
       "found[i] is written for every i, 1 exactly when keys[i] is stored, complete and visible, "
       "over hundreds of keys with colliding patterns",
       {"ProbeFindsExactlyTheStoredKeysAmongCollidingOnes"},
       "",
       "CatchesAProbeThatLeavesAMissUnwritten"},
      {"PROBE-VISIBLE",
       "probe",
       "a spill in flight and a removed key (also one a restore still reads) are not found",
       {"ProbeNeverFindsASpillInFlightOrARemovedKey"},
       "",
       "CatchesAProbeSeeingASpillInFlight"},
      // ---- capabilities ----
      {"CAP-PERSISTENT",
       "TIER_CAP_PERSISTENT",
       "checkpoints survive close (and a restart)",
       {"PersistentCheckpointsSurviveReopen"},
       "",
       kNoProof},
      {"CAP-CHECKSUMS",
       "TIER_CAP_CHECKSUMS",
       "damaged stored bytes are never returned as OK: DATA_LOSS and the entry dropped (or gone)",
       {"DamagedStoredBytesAreDataLossNeverWrongBytes", "DamagedBytesInProviderMemoryAreDataLoss"},
       "",
       "CatchesChecksumsClaimedButNeverVerified"},
      {"CAP-ZERO",
       "TIER_CAP_ZERO_CAPACITY",
       "an absent tier declines every spill with NO_SPACE and finds nothing",
       {"MultiSegmentCheckpointRoundTripsByteForByte", "StatsTrackUsage",
        "RemoveMakesTheKeyNotFound"},
       "",
       kNoProof},
      {"CAP-SHARED",
       "TIER_CAP_SHARED (settled)",
       "another instance of the same namespace finds (probe, stat), restores and removes a "
       "checkpoint once its spill completed, with no bound to wait",
       {"SharedInstancesSeeEachOthersCompletedSpills"},
       "",
       "CatchesSharedClaimedOverAPrivateStore"},
      // ---- entry times (1.1) ----
      {"ENTRY-TIMES",
       "tier_entry (settled)",
       "created and last_used are wall-clock Unix ns: both 0 (not recorded) or both set, never in "
       "the future, last_used >= created",
       {"EntryTimesFollowTheWallClockAndRestores"},
       "",
       "CatchesEntryTimesInTheFuture"},
      {"ENTRY-LASTUSED",
       "tier_entry",
       "a completed restore moves last_used (to a time after its acceptance)",
       {"EntryTimesFollowTheWallClockAndRestores"},
       "",
       "CatchesLastUsedNeverMovedByARestore"},
      {"ENTRY-NOTMOVED",
       "tier_entry (settled)",
       "stat, plan_restore, probe, stats and enumerate do not move last_used",
       {"EntryTimesFollowTheWallClockAndRestores"},
       "",
       "CatchesLastUsedMovedByStat"},
  };
  return rules;
}

}  // namespace tier::conformance
