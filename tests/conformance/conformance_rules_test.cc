// conformance_rules_test.cc -- AbiConformance checks of the rules ABI 1.1 added or the rule table
// settled (rules.cc): probe, TIER_CAP_SHARED, entry times, instances side by side, persistent
// removes, guarded buffers, large segments, re-entrant completions of every size, a tier filled to
// its budget, stored-byte accounting, checksums of an in-memory store; and the in-flight rules
// checked while the provider's completion threads are held (CompletionHold), so a fast or a slow
// provider cannot hide a defect.
#include <dlfcn.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <tier/host/model_profile.h>
#include "checkpoint_bytes.h"
#include "checkpoint_shape.h"
#include "conformance_fixture.h"
#include "conformance_tools.h"
#include "rules.h"

namespace tier::conformance {
namespace {

#define SKIP_WITHOUT_PROBE()                                        \
  if (!TIER_HAS_SLOT(table(), tier_provider, probe))                \
  GTEST_SKIP() << GetParam().name                                   \
               << " has no probe slot (optional since 1.1), so no " \
                  "probe rule applies"

constexpr uint64_t kMs = 1000000ull;

tier_status StatOf(const tier_provider* table, tier_instance* instance, const tier_key& key) {
  tier_stat_result stat{};
  stat.struct_size = sizeof(stat);
  return table->stat(instance, &key, &stat, nullptr, 0, nullptr);
}

tier_status StatsOf(const tier_provider* table, tier_instance* instance) {
  tier_stats stats{};
  stats.struct_size = sizeof(stats);
  return table->stats(instance, &stats, nullptr);
}

bool Listed(const std::vector<tier_key>& keys, const tier_key& key) {
  return std::any_of(keys.begin(), keys.end(), [&](const tier_key& k) { return SameKey(k, key); });
}

// Probes `keys` (in calls of at most TIER_PROBE_MAX_KEYS) with found prefilled 0xEE.
std::vector<uint8_t> ProbeKeys(const tier_provider* table, tier_instance* instance,
                               const std::vector<tier_key>& keys, tier_status* status) {
  std::vector<uint8_t> found(keys.size(), 0xEE);
  *status = TIER_OK;
  for (size_t at = 0; at < keys.size(); at += TIER_PROBE_MAX_KEYS) {
    const auto n = static_cast<uint32_t>(std::min<size_t>(TIER_PROBE_MAX_KEYS, keys.size() - at));
    tier_error error{};
    const tier_status s = table->probe(instance, keys.data() + at, n, found.data() + at, &error);
    if (s != TIER_OK) {
      *status = s;
      ADD_FAILURE() << "probe of " << n << " keys: " << tier_status_name(s) << ": "
                    << error.message;
      return found;
    }
  }
  return found;
}

// The segments of `layout`, each in an anonymous mapping of its own (a segment of 2^31 bytes
// meets no heap limit), filled with `key`'s bytes; unmapped on destruction.
class MappedSegments {
 public:
  MappedSegments(const tier_key& key, const std::vector<tier_segment_info>& layout)
      : key_(key), layout_(layout) {
    for (const auto& s : layout_) {
      void* p =
          ::mmap(nullptr, MapBytes(s), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) return;
      maps_.push_back(p);
      sim::FillSegmentBytes(key_, s.kind, s.index, {static_cast<std::byte*>(p), s.length_bytes});
      segments_.push_back({s.kind, s.index, s.length_bytes, p});
    }
  }
  ~MappedSegments() { Unmap(); }
  MappedSegments(const MappedSegments&) = delete;
  MappedSegments& operator=(const MappedSegments&) = delete;

  bool mapped() const { return maps_.size() == layout_.size(); }  // every mapping succeeded
  std::vector<tier_segment>& segments() { return segments_; }
  void Zero() {
    for (size_t i = 0; i < maps_.size(); ++i) std::memset(maps_[i], 0, layout_[i].length_bytes);
  }
  // Segment `i` holds `key`'s bytes.
  bool Matches(size_t i) const {
    return sim::SegmentBytesMatch(
        key_, layout_[i].kind, layout_[i].index,
        {static_cast<const std::byte*>(maps_[i]), layout_[i].length_bytes});
  }
  void Unmap() {
    for (size_t i = 0; i < maps_.size(); ++i) ::munmap(maps_[i], MapBytes(layout_[i]));
    maps_.clear();
    segments_.clear();
  }

 private:
  static uint64_t MapBytes(const tier_segment_info& s) {
    return std::max<uint64_t>(1, s.length_bytes);
  }
  const tier_key key_;
  const std::vector<tier_segment_info> layout_;
  std::vector<void*> maps_;
  std::vector<tier_segment> segments_;
};

// Spills `m` under `key`, zeroes its buffers and restores into them: both complete OK.
void RoundTripInPlace(const tier_provider* table, tier_instance* instance, const tier_key& key,
                      MappedSegments& m) {
  std::vector<tier_segment>& segments = m.segments();
  OpRecord spill;
  ASSERT_EQ(table->spill(instance, &key, segments.data(), static_cast<uint32_t>(segments.size()),
                         OpRecord::Callback, spill.cookie(), nullptr),
            TIER_OK);
  ASSERT_TRUE(spill.Wait("spill"));
  ASSERT_EQ(spill.status, TIER_OK) << spill.message;
  m.Zero();
  OpRecord restore;
  ASSERT_EQ(table->restore(instance, &key, segments.data(), static_cast<uint32_t>(segments.size()),
                           OpRecord::Callback, restore.cookie(), nullptr),
            TIER_OK);
  ASSERT_TRUE(restore.Wait("restore"));
  ASSERT_EQ(restore.status, TIER_OK) << restore.message;
}

// Spills `checkpoints` with at most `window` in flight; returns how many completed OK.
size_t SpillAll(const tier_provider* table, tier_instance* instance,
                std::vector<TestCheckpoint>& checkpoints, uint32_t window) {
  size_t ok = 0;
  for (size_t at = 0; at < checkpoints.size(); at += window) {
    const size_t n = std::min<size_t>(window, checkpoints.size() - at);
    std::vector<OpRecord> records(n);
    std::vector<std::vector<tier_segment>> segments(n);
    std::vector<tier_status> accepted(n);
    for (size_t i = 0; i < n; ++i) {
      segments[i] = checkpoints[at + i].Segments();
      accepted[i] = table->spill(instance, &checkpoints[at + i].key, segments[i].data(),
                                 static_cast<uint32_t>(segments[i].size()), OpRecord::Callback,
                                 records[i].cookie(), nullptr);
    }
    for (size_t i = 0; i < n; ++i) {
      if (accepted[i] == TIER_BUSY) {  // retried alone
        tier_status again = TIER_BUSY;
        OpRecord retry;
        again = table->spill(instance, &checkpoints[at + i].key, segments[i].data(),
                             static_cast<uint32_t>(segments[i].size()), OpRecord::Callback,
                             retry.cookie(), nullptr);
        if (again == TIER_OK && retry.Wait("spill") && retry.status == TIER_OK) ++ok;
        continue;
      }
      if (accepted[i] != TIER_OK) continue;
      if (!records[i].Wait("spill")) return ok;
      if (records[i].status == TIER_OK) ++ok;
    }
  }
  return ok;
}

// ---- the entry point and the tables -------------------------------------------------------------

TEST_P(AbiConformance, EntryPointAcceptsEveryMinorAndRefusesAnotherMajor) {
  void* handle = ::dlopen(GetParam().path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << ::dlerror();
  auto entry =
      reinterpret_cast<tier_provider_entry_fn>(::dlsym(handle, TIER_PROVIDER_ENTRY_SYMBOL));
  ASSERT_NE(entry, nullptr) << "no " << TIER_PROVIDER_ENTRY_SYMBOL;
  for (uint32_t minor : {0u, TIER_ABI_VERSION_MINOR, 99u}) {
    SCOPED_TRACE("host 1." + std::to_string(minor));
    const tier_provider* provider = nullptr;
    ASSERT_EQ(entry(TIER_ABI_VERSION_MAJOR, minor, host_.table(), &provider), TIER_OK);
    ASSERT_NE(provider, nullptr);
    EXPECT_EQ(provider, table()) << "the entry point is stateless: the same static table";
    EXPECT_EQ(provider->abi_major, TIER_ABI_VERSION_MAJOR);
    EXPECT_GE(provider->struct_size, TIER_PROVIDER_V1_0_SIZE) << "covers every 1.0 slot";
    EXPECT_NE(provider->name, nullptr);
    EXPECT_NE(provider->version, nullptr);
    EXPECT_TRUE(provider->open && provider->close && provider->info && provider->stats &&
                provider->stat && provider->spill && provider->restore && provider->remove &&
                provider->enumerate && provider->plan_restore)
        << "every 1.0 slot is required";
  }
  for (uint32_t major : {0u, TIER_ABI_VERSION_MAJOR + 1}) {
    const tier_provider* provider = nullptr;
    EXPECT_EQ(entry(major, 0, host_.table(), &provider), TIER_UNSUPPORTED)
        << "a host of major " << major;
  }
  ::dlclose(handle);
}

TEST_P(AbiConformance, OpenWithAHostTableWithoutTheClockUsesNoMissingService) {
  // A 1.0 host table cut before monotonic_ns (and the slot NULL behind it): a provider must test
  // TIER_HAS_SLOT before every service it calls.
  tier_host_services short_table = *host_.table();
  short_table.struct_size = offsetof(tier_host_services, monotonic_ns);
  short_table.monotonic_ns = nullptr;
  tier_instance* other = nullptr;
  tier_error error{};
  Close();  // one instance at a time: some providers hold their directory exclusively
  ASSERT_EQ(TryOpenWith(&short_table, std::nullopt, {}, &other, &error), TIER_OK) << error.message;
  instance_ = other;  // closed by TearDown, while short_table still lives
  if (absent()) return;
  TestCheckpoint checkpoint = MakeCheckpoint("short-host-table", 8192);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  ASSERT_EQ(Restore(checkpoint), TIER_OK);
  EXPECT_TRUE(checkpoint.Matches());
  Close();
}

TEST_P(AbiConformance, OpenRefusesAnUnknownOptionNamingIt) {
  const std::string option = "tier_conformance_no_such_option";
  tier_instance* other = nullptr;
  tier_error error{};
  Close();
  const tier_status got = TryOpenWith(host_.table(), std::nullopt, {option + "=1"}, &other, &error);
  if (got == TIER_OK) table()->close(other);
  EXPECT_EQ(got, TIER_INVALID_ARGUMENT) << "open with an unknown option";
  EXPECT_NE(std::string(error.message).find(option), std::string::npos)
      << "the message names the option: '" << error.message << "'";
}

TEST_P(AbiConformance, LongNamespaceIsStoredOrRefused) {
  const std::string long_namespace(64 * 1024, 'n');
  tier_instance* other = nullptr;
  tier_error error{};
  Close();
  const tier_status got = TryOpenWith(host_.table(), long_namespace, {}, &other, &error);
  if (got != TIER_OK) {
    EXPECT_EQ(got, TIER_INVALID_ARGUMENT) << error.message;
    EXPECT_NE(error.message[0], '\0');
    return;
  }
  instance_ = other;
  if (absent()) return;
  TestCheckpoint checkpoint = MakeCheckpoint("long-namespace", 4096);
  const tier_status spilled = Spill(checkpoint);
  EXPECT_TRUE(spilled == TIER_OK || spilled == TIER_INVALID_ARGUMENT)
      << "a namespace open accepted works like any other: " << tier_status_name(spilled);
  if (spilled == TIER_OK) {
    ASSERT_EQ(Restore(checkpoint), TIER_OK);
    EXPECT_TRUE(checkpoint.Matches());
  }
}

// ---- probe
// ----------------------------------------------------------------------------------------

TEST_P(AbiConformance, ProbeRefusesKeyCountsOutsideTheRangeUnread) {
  SKIP_WITHOUT_PROBE();
  // One key, then a guard page; one found byte, then a guard page: a probe that reads a second key
  // or writes a second byte faults, in every build.
  const std::vector<tier_segment_info> layout = {{TIER_SEGMENT_OTHER, 0, sizeof(tier_key)},
                                                 {TIER_SEGMENT_OTHER, 1, 1}};
  GuardedBuffers buffers(layout, 1);
  const tier_key key = KeyFromText("conformance:probe-count");
  std::memcpy(buffers.data(0).data(), &key, sizeof(key));
  auto* keys = reinterpret_cast<const tier_key*>(buffers.data(0).data());
  auto* found = reinterpret_cast<uint8_t*>(buffers.data(1).data());
  for (uint32_t count : {0u, TIER_PROBE_MAX_KEYS + 1, 0xFFFFFFFFu}) {
    SCOPED_TRACE("key_count " + std::to_string(count));
    *found = 0xEE;
    tier_error error{};
    EXPECT_EQ(table()->probe(instance(), keys, count, found, &error), TIER_INVALID_ARGUMENT);
    EXPECT_NE(error.message[0], '\0') << "a refusal says why";
    EXPECT_EQ(*found, 0xEE) << "a refused probe wrote found";
    EXPECT_EQ(table()->probe(instance(), keys, count, found, nullptr), TIER_INVALID_ARGUMENT);
  }
  tier_error error{};
  EXPECT_EQ(table()->probe(instance(), nullptr, 1, found, &error), TIER_INVALID_ARGUMENT);
  EXPECT_EQ(table()->probe(instance(), keys, 1, nullptr, &error), TIER_INVALID_ARGUMENT);
  EXPECT_EQ(table()->probe(nullptr, keys, 1, found, &error), TIER_INVALID_ARGUMENT);
  *found = 0xEE;
  ASSERT_EQ(table()->probe(instance(), keys, 1, found, &error), TIER_OK) << error.message;
  EXPECT_EQ(*found, 0) << "a key never stored";
}

TEST_P(AbiConformance, ProbeFindsExactlyTheStoredKeysAmongCollidingOnes) {
  SKIP_WITHOUT_PROBE();
  constexpr size_t kStored = 400;
  const std::vector<tier_key> keys = CollidingKeys(GetParam().name, kStored);
  std::set<std::string> stored_set;
  for (const tier_key& k : keys) stored_set.emplace(reinterpret_cast<const char*>(k.bytes), 32);
  // Near misses: each stored key with one bit flipped, never a stored key itself.
  std::vector<tier_key> misses;
  for (size_t i = 0; i < keys.size(); ++i) {
    for (size_t bit = i * 7;; bit += 13) {
      tier_key k = keys[i];
      k.bytes[(bit / 8) % TIER_KEY_BYTES] ^= static_cast<uint8_t>(1u << (bit % 8));
      if (stored_set.count(std::string(reinterpret_cast<const char*>(k.bytes), 32)) == 0) {
        misses.push_back(k);
        break;
      }
    }
  }
  std::vector<tier_key> mixed;  // stored and missing interleaved: 800 keys in one call
  for (size_t i = 0; i < keys.size(); ++i) {
    mixed.push_back(i % 2 == 0 ? keys[i] : misses[i]);
    mixed.push_back(i % 2 == 0 ? misses[i] : keys[i]);
  }
  tier_status status = TIER_OK;
  std::vector<uint8_t> found = ProbeKeys(table(), instance(), mixed, &status);
  ASSERT_EQ(status, TIER_OK);
  for (size_t i = 0; i < found.size(); ++i) {
    ASSERT_EQ(found[i], 0) << "found[" << i << "] of an empty tier: every miss is written 0";
  }
  if (absent()) return;
  std::vector<TestCheckpoint> checkpoints;
  for (const tier_key& k : keys) {
    TestCheckpoint c = MakeCheckpoint("probe", {{TIER_SEGMENT_MAIN_KV, 0, 64}});
    c.key = k;
    sim::FillSegmentBytes(k, TIER_SEGMENT_MAIN_KV, 0, c.buffers[0]);
    checkpoints.push_back(std::move(c));
  }
  ASSERT_EQ(SpillAll(table(), instance(), checkpoints, std::min(32u, InflightCap(info()))),
            kStored);
  found = ProbeKeys(table(), instance(), mixed, &status);
  ASSERT_EQ(status, TIER_OK);
  size_t wrong_hits = 0, missed = 0, unwritten = 0;
  for (size_t i = 0; i < mixed.size(); ++i) {
    const bool stored =
        stored_set.count(std::string(reinterpret_cast<const char*>(mixed[i].bytes), 32)) > 0;
    if (found[i] != 0 && found[i] != 1) ++unwritten;
    if (found[i] == 1 && !stored) ++wrong_hits;
    if (found[i] == 0 && stored) ++missed;
  }
  EXPECT_EQ(unwritten, 0u) << "found[i] left unwritten (neither 0 nor 1) for " << unwritten
                           << " of " << mixed.size() << " keys: a probe writes every found[i]";
  EXPECT_EQ(missed, 0u) << "probe missed " << missed << " of " << kStored
                        << " stored keys among colliding ones (shared prefixes, suffixes, first 8 "
                           "bytes): it must look up every key, comparing it in full";
  EXPECT_EQ(wrong_hits, 0u) << "probe found " << wrong_hits
                            << " keys that differ from a stored one in one bit";
  // A call of exactly TIER_PROBE_MAX_KEYS keys, the stored ones last.
  std::vector<tier_key> full(misses.begin(), misses.end());
  full.insert(full.end(), keys.begin(), keys.end());
  while (full.size() < TIER_PROBE_MAX_KEYS) full.insert(full.begin(), misses[full.size() % 400]);
  full.resize(TIER_PROBE_MAX_KEYS);
  found = ProbeKeys(table(), instance(), full, &status);
  ASSERT_EQ(status, TIER_OK);
  size_t hits = 0;
  for (uint8_t f : found) hits += f == 1 ? 1 : 0;
  EXPECT_EQ(hits, kStored) << "a call of TIER_PROBE_MAX_KEYS keys, the stored ones last";
  // Half removed: found no more.
  for (size_t i = 0; i < kStored; i += 2) {
    ASSERT_EQ(table()->remove(instance(), &keys[i], nullptr), TIER_OK) << i;
  }
  found = ProbeKeys(table(), instance(), keys, &status);
  ASSERT_EQ(status, TIER_OK);
  for (size_t i = 0; i < kStored; ++i) {
    EXPECT_EQ(found[i], i % 2 == 0 ? 0 : 1) << "key " << i << (i % 2 == 0 ? " removed" : " kept");
  }
}

// A probe never finds a spill in flight (held: it cannot complete while the check runs), nor a key
// whose remove returned, also while removes run on another thread and while an accepted restore
// still reads the removed checkpoint.
TEST_P(AbiConformance, ProbeNeverFindsASpillInFlightOrARemovedKey) {
  SKIP_WITHOUT_PROBE();
  SKIP_IF_ABSENT();
  TestCheckpoint stored = MakeCheckpoint("probe-restored", 1 << 20);
  ASSERT_EQ(Spill(stored), TIER_OK);
  TestCheckpoint subject = MakeCheckpoint("probe-in-flight", 64 * 1024);
  OpRecord spill, restore;
  auto spill_segments = subject.Segments();
  TestCheckpoint into = stored;
  auto restore_segments = into.EmptySegments();
  tier_status spill_accepted = -1, restore_accepted = -1, removed = -1;
  std::vector<uint8_t> found(2, 0xEE);
  tier_status stat_subject = -1, stat_stored = -1;
  std::vector<tier_key> listed;
  {
    CompletionHold hold(table(), instance(), info().max_inflight_ops);
    if (!hold.held()) SkipRule("PROBE-VISIBLE", "in flight: " + hold.why_not_held());
    spill_accepted = table()->spill(instance(), &subject.key, spill_segments.data(),
                                    static_cast<uint32_t>(spill_segments.size()),
                                    OpRecord::Callback, spill.cookie(), nullptr);
    restore_accepted = table()->restore(instance(), &stored.key, restore_segments.data(),
                                        static_cast<uint32_t>(restore_segments.size()),
                                        OpRecord::Callback, restore.cookie(), nullptr);
    if (restore_accepted == TIER_OK) removed = table()->remove(instance(), &stored.key, nullptr);
    const tier_key both[2] = {subject.key, stored.key};
    tier_error error{};
    EXPECT_EQ(table()->probe(instance(), both, 2, found.data(), &error), TIER_OK) << error.message;
    stat_subject = StatOf(table(), instance(), subject.key);
    stat_stored = StatOf(table(), instance(), stored.key);
    listed = EnumerateKeys();
  }  // released
  if (spill_accepted == TIER_OK) {
    ASSERT_TRUE(spill.Wait("spill"));
  }
  if (restore_accepted == TIER_OK) {
    ASSERT_TRUE(restore.Wait("restore"));
  }
  if (spill_accepted == TIER_OK && found[0] == 1) {
    EXPECT_TRUE(stat_subject == TIER_OK && Listed(listed, subject.key))
        << "probe found a checkpoint whose spill was still in flight (stat "
        << tier_status_name(stat_subject) << ", enumerate "
        << (Listed(listed, subject.key) ? "lists" : "does not list")
        << " it): probe sees a spill in flight";
  }
  if (removed == TIER_OK) {
    EXPECT_EQ(found[1], 0) << "probe found a checkpoint whose remove had returned OK (an accepted "
                              "restore still reads it)";
    EXPECT_EQ(stat_stored, TIER_NOT_FOUND) << "stat of a removed checkpoint";
  }
  EXPECT_TRUE(found[0] <= 1 && found[1] <= 1) << "probe wrote every found[i], 0 or 1";

  // Removes on one thread, probes on another: a key whose remove returned before a probe began is
  // never found by it; a key never removed is always found.
  std::vector<TestCheckpoint> checkpoints;
  for (int i = 0; i < 64; ++i) {
    checkpoints.push_back(
        MakeCheckpoint("probe-remove-" + std::to_string(i), {{TIER_SEGMENT_MAIN_KV, 0, 64}}));
  }
  ASSERT_EQ(SpillAll(table(), instance(), checkpoints, std::min(16u, InflightCap(info()))),
            checkpoints.size());
  std::vector<tier_key> keys;
  for (const auto& c : checkpoints) keys.push_back(c.key);
  std::vector<std::atomic<bool>> gone(keys.size());
  std::thread remover([&] {
    for (size_t i = 0; i < keys.size(); i += 2) {
      if (table()->remove(instance(), &keys[i], nullptr) == TIER_OK) gone[i].store(true);
    }
  });
  int violations = 0;
  for (int round = 0; round < 50; ++round) {
    std::vector<bool> before(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) before[i] = gone[i].load();
    std::vector<uint8_t> f(keys.size(), 0xEE);
    if (table()->probe(instance(), keys.data(), static_cast<uint32_t>(keys.size()), f.data(),
                       nullptr) != TIER_OK) {
      ++violations;
      continue;
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      if (before[i] && f[i] != 0) ++violations;
      if (i % 2 == 1 && f[i] != 1) ++violations;
    }
  }
  remover.join();
  EXPECT_EQ(violations, 0) << "while removes ran: a probe found a key removed before it began, "
                              "missed a key never removed, or failed";
}

// ---- in flight, held
// ------------------------------------------------------------------------------

// A spill held in flight (every completion thread blocked) is not found by stat, not counted by
// stats, not listed, not removed (NOT_FOUND), and goes on to complete and be stored. info, stats,
// stat and plan_restore answer while every completion thread is blocked.
TEST_P(AbiConformance, HeldSpillIsInvisibleUncountedAndRemoveIsNotFound) {
  SKIP_IF_ABSENT();
  TestCheckpoint subject = MakeCheckpoint("held-spill", 64 * 1024);
  OpRecord record;
  auto segments = subject.Segments();
  tier_status accepted = -1, stat = -1, removed = -1, plan_status = -1;
  uint64_t counted = 0;
  std::vector<tier_key> listed;
  bool waited_for_the_gate = false;
  {
    CompletionHold hold(table(), instance(), info().max_inflight_ops);
    if (!hold.held()) {
      for (const char* rule : {"STAT-INFLIGHT", "STATS-ENTRIES", "REMOVE-INFLIGHT", "THR-NOWAIT"})
        SkipRule(rule, "held in flight: " + hold.why_not_held());
    }
    tier_error error{};
    accepted = table()->spill(instance(), &subject.key, segments.data(),
                              static_cast<uint32_t>(segments.size()), OpRecord::Callback,
                              record.cookie(), &error);
    ASSERT_EQ(accepted, TIER_OK) << error.message;
    // In this order: what stat found, and every entry stats counted, is visible to the enumerate
    // after (visibility only grows while nothing is removed).
    stat = StatOf(table(), instance(), subject.key);
    counted = Stats().entries;
    listed = EnumerateKeys();
    tier_info i{};
    i.struct_size = sizeof(i);
    EXPECT_EQ(table()->info(instance(), &i, nullptr), TIER_OK);
    tier_plan plan{};
    plan.struct_size = sizeof(plan);
    plan_status = table()->plan_restore(instance(), &subject.key, 1000000000ull, &plan, nullptr);
    removed = table()->remove(instance(), &subject.key, &error);
    waited_for_the_gate = hold.timed_out();
  }
  ASSERT_TRUE(record.Wait("spill"));
  EXPECT_FALSE(waited_for_the_gate)
      << "a call waited until a blocked completion gave up: info, stats, stat, plan_restore, "
         "enumerate or remove waited for a completion thread";
  EXPECT_EQ(plan_status, TIER_OK);
  EXPECT_LE(counted, listed.size())
      << "stats counted " << counted << " entries while an enumerate right after listed "
      << listed.size() << ": entries counts a spill still in flight";
  if (stat == TIER_OK) {
    EXPECT_TRUE(Listed(listed, subject.key))
        << "stat found the held checkpoint but enumerate did not list it: stat sees a spill "
           "still in flight";
  } else {
    EXPECT_EQ(stat, TIER_NOT_FOUND);
  }
  // NOT_FOUND while in flight (the spill goes on and stores it), or OK once it was stored (gone).
  EXPECT_TRUE(removed == TIER_NOT_FOUND || removed == TIER_OK) << tier_status_name(removed);
  EXPECT_EQ(record.status, TIER_OK) << record.message << ": the held spill goes on";
  if (record.status == TIER_OK && removed == TIER_NOT_FOUND) {
    EXPECT_EQ(StatOf(table(), instance(), subject.key), TIER_OK)
        << "a remove during the spill answered NOT_FOUND, so the spill goes on and stores it";
  } else if (removed == TIER_OK) {
    EXPECT_EQ(StatOf(table(), instance(), subject.key), TIER_NOT_FOUND)
        << "remove answered OK, so the checkpoint is gone";
  }
}

// A restore held in flight survives a remove of its checkpoint: it completes OK, byte-exact.
TEST_P(AbiConformance, HeldRestoreSurvivesARemove) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint("held-restore", 1 << 20);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  OpRecord record;
  auto segments = checkpoint.EmptySegments();
  tier_status removed = -1;
  {
    CompletionHold hold(table(), instance(), info().max_inflight_ops);
    if (!hold.held()) SkipRule("RESTORE-REMOVE", "held in flight: " + hold.why_not_held());
    tier_error error{};
    ASSERT_EQ(table()->restore(instance(), &checkpoint.key, segments.data(),
                               static_cast<uint32_t>(segments.size()), OpRecord::Callback,
                               record.cookie(), &error),
              TIER_OK)
        << error.message;
    removed = table()->remove(instance(), &checkpoint.key, &error);
  }
  ASSERT_TRUE(record.Wait("restore"));
  EXPECT_TRUE(removed == TIER_OK || removed == TIER_BUSY) << tier_status_name(removed);
  EXPECT_EQ(record.status, TIER_OK)
      << record.message << ": a remove during an accepted restore broke it";
  EXPECT_TRUE(record.status != TIER_OK || checkpoint.Matches());
}

// Close with operations held in flight: close returns only after every accepted operation's
// completion ran (and returned), blockers included; nothing calls back after it returned.
TEST_P(AbiConformance, CloseWithHeldOperationsCompletesEachBeforeReturning) {
  SKIP_IF_ABSENT();
  constexpr int kOps = 3;
  std::vector<TestCheckpoint> checkpoints;
  for (int i = 0; i < kOps; ++i) {
    checkpoints.push_back(MakeCheckpoint("close-held-" + std::to_string(i), 64 * 1024));
  }
  std::vector<std::unique_ptr<OpRecord>> records;
  std::vector<std::vector<tier_segment>> segments(kOps);
  std::vector<tier_status> accepted(kOps, -1);
  auto hold = std::make_unique<CompletionHold>(table(), instance(), info().max_inflight_ops);
  if (!hold->held()) SkipRule("CLOSE-WAITS", "held in flight: " + hold->why_not_held());
  for (int i = 0; i < kOps; ++i) {
    records.push_back(std::make_unique<OpRecord>());
    segments[i] = checkpoints[i].Segments();
    accepted[i] = table()->spill(instance(), &checkpoints[i].key, segments[i].data(),
                                 static_cast<uint32_t>(segments[i].size()), OpRecord::Callback,
                                 records[i]->cookie(), nullptr);
  }
  // close on another thread; the gate opens once close returned or 300 ms passed.
  struct Closing {
    std::mutex mutex;
    std::condition_variable cv;
    bool returned = false;
    std::vector<int> calls_at_return;
    int blocked_at_return = 0;
  };
  auto closing = std::make_shared<Closing>();
  std::vector<OpRecord*> raw;
  for (auto& r : records) raw.push_back(r.get());
  tier_instance* const instance = std::exchange(instance_, nullptr);
  std::shared_ptr<PluginLibrary> library = library_;
  CompletionHold* const hold_raw = hold.get();
  std::thread closer([library, instance, closing, raw, hold_raw] {
    hold_raw->PassOnThisThread();
    library->table()->close(instance);
    std::lock_guard lock(closing->mutex);
    for (OpRecord* r : raw) closing->calls_at_return.push_back(r->calls.load());
    closing->blocked_at_return = hold_raw->blocked();
    closing->returned = true;
    closing->cv.notify_all();
  });
  {
    std::unique_lock lock(closing->mutex);
    closing->cv.wait_for(lock, std::chrono::milliseconds(300), [&] { return closing->returned; });
  }
  const bool early = [&] {
    std::lock_guard lock(closing->mutex);
    return closing->returned;
  }();
  hold->Release();
  {
    std::unique_lock lock(closing->mutex);
    ASSERT_TRUE(closing->cv.wait_for(lock, OpDeadline(), [&] { return closing->returned; }))
        << "close did not return within the deadline";
  }
  closer.join();
  EXPECT_FALSE(early && closing->blocked_at_return > 0)
      << "close returned while " << closing->blocked_at_return
      << " completion(s) of accepted operations were still running";
  for (int i = 0; i < kOps; ++i) {
    if (accepted[i] != TIER_OK) continue;
    EXPECT_EQ(closing->calls_at_return[i], 1)
        << "close returned before the completion of accepted spill " << i << " ran";
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int i = 0; i < kOps; ++i) {
    if (accepted[i] != TIER_OK) continue;
    EXPECT_EQ(records[i]->calls.load(), 1) << "spill " << i;
    EXPECT_TRUE(records[i]->status == TIER_OK || records[i]->status == TIER_CANCELLED)
        << tier_status_name(records[i]->status);
  }
  hold.reset();
}

// ---- instances side by side
// -----------------------------------------------------------------------

TEST_P(AbiConformance, TwoInstancesOfDifferentNamespacesAreIsolated) {
  tier_instance* other = nullptr;
  tier_error error{};
  const tier_status opened =
      TryOpenWith(host_.table(), std::string("conformance-other-model"), {}, &other, &error);
  if (opened == TIER_BUSY) {  // legal: an exclusive resource (OPEN-DISTINCT), with a message
    EXPECT_NE(error.message[0], '\0') << "a refusal says why";
    SkipRule("OPEN-NAMESPACE", std::string("side by side: a second instance on the same options is "
                                           "refused BUSY (") +
                                   error.message + ")");
    return;
  }
  ASSERT_EQ(opened, TIER_OK) << error.message;
  EXPECT_NE(other, instance()) << "open returned the instance already open (another namespace)";
  if (other == instance()) return;  // closing it twice would be worse
  auto close_other = [&] {
    if (other != nullptr) table()->close(std::exchange(other, nullptr));
  };
  if (absent()) {
    close_other();
    return;
  }
  TestCheckpoint mine = MakeCheckpoint("isolated-mine", 8192);
  TestCheckpoint theirs = MakeCheckpoint("isolated-theirs", 8192);
  ASSERT_EQ(Spill(mine), TIER_OK);
  {
    OpRecord record;
    auto segments = theirs.Segments();
    ASSERT_EQ(
        table()->spill(other, &theirs.key, segments.data(), static_cast<uint32_t>(segments.size()),
                       OpRecord::Callback, record.cookie(), &error),
        TIER_OK)
        << error.message;
    ASSERT_TRUE(record.Wait("spill"));
    ASSERT_EQ(record.status, TIER_OK);
  }
  EXPECT_EQ(StatOf(table(), other, mine.key), TIER_NOT_FOUND)
      << "the other namespace's instance finds this namespace's checkpoint";
  EXPECT_EQ(StatOf(table(), instance(), theirs.key), TIER_NOT_FOUND)
      << "this namespace's instance finds the other namespace's checkpoint";
  if (TIER_HAS_SLOT(table(), tier_provider, probe)) {
    uint8_t found = 0xEE;
    EXPECT_EQ(table()->probe(other, &mine.key, 1, &found, nullptr), TIER_OK);
    EXPECT_EQ(found, 0) << "probe across namespaces";
  }
  EXPECT_FALSE(Listed(EnumerateKeys(), theirs.key));
  close_other();
  ASSERT_EQ(Restore(mine), TIER_OK) << "closing the other instance left this one working";
  EXPECT_TRUE(mine.Matches());
}

// TIER_CAP_SHARED: another instance of the same namespace (another host) finds a completed spill
// at once, restores it, and its remove is seen by the first.
TEST_P(AbiConformance, SharedInstancesSeeEachOthersCompletedSpills) {
  SKIP_IF_ABSENT();
  if ((info().capabilities & TIER_CAP_SHARED) == 0) {
    GTEST_SKIP() << GetParam().name << " does not claim TIER_CAP_SHARED";
  }
  tier_instance* other = nullptr;
  tier_error error{};
  ASSERT_EQ(TryOpenWith(host_.table(), std::nullopt, {}, &other, &error), TIER_OK)
      << "a shared provider opens a second instance of one namespace: " << error.message;
  TestCheckpoint checkpoint = MakeCheckpoint("shared", 64 * 1024);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  if (TIER_HAS_SLOT(table(), tier_provider, probe)) {
    uint8_t found = 0xEE;
    EXPECT_EQ(table()->probe(other, &checkpoint.key, 1, &found, &error), TIER_OK) << error.message;
    EXPECT_EQ(found, 1) << "another instance's probe does not find a completed spill: "
                           "TIER_CAP_SHARED claimed over a store that is not shared";
  }
  EXPECT_EQ(StatOf(table(), other, checkpoint.key), TIER_OK)
      << "another instance's stat does not find a completed spill";
  {
    TestCheckpoint copy = checkpoint;
    auto segments = copy.EmptySegments();
    OpRecord record;
    const tier_status accepted =
        table()->restore(other, &copy.key, segments.data(), static_cast<uint32_t>(segments.size()),
                         OpRecord::Callback, record.cookie(), &error);
    EXPECT_EQ(accepted, TIER_OK) << "restore from another instance: " << error.message;
    if (accepted == TIER_OK) {
      ASSERT_TRUE(record.Wait("restore"));
      EXPECT_EQ(record.status, TIER_OK) << record.message;
      EXPECT_TRUE(record.status != TIER_OK || copy.Matches());
    }
  }
  EXPECT_EQ(table()->remove(other, &checkpoint.key, &error), TIER_OK) << error.message;
  EXPECT_EQ(StatOf(table(), instance(), checkpoint.key), TIER_NOT_FOUND)
      << "a remove by another instance is not seen";
  table()->close(other);
}

// ---- entry times
// ----------------------------------------------------------------------------------

struct EntryTimes {
  bool listed = false;
  bool has_times = false;  // the entry's struct_size covers them
  uint64_t created = 0;
  uint64_t last_used = 0;
};

EntryTimes TimesOf(const tier_provider* table, tier_instance* instance, const tier_key& key) {
  struct Walk {
    tier_key key;
    EntryTimes times;
  } walk{key, {}};
  table->enumerate(
      instance,
      [](void* user, const tier_entry* entry) -> int32_t {
        auto* w = static_cast<Walk*>(user);
        if (!SameKey(entry->key, w->key)) return 0;
        w->times.listed = true;
        w->times.has_times = TIER_HAS_FIELD(entry, tier_entry, last_used_unix_ns);
        if (w->times.has_times) {
          w->times.created = entry->created_unix_ns;
          w->times.last_used = entry->last_used_unix_ns;
        }
        return 1;
      },
      &walk, nullptr);
  return walk.times;
}

TEST_P(AbiConformance, EntryTimesFollowTheWallClockAndRestores) {
  SKIP_IF_ABSENT();
  constexpr uint64_t kSkewNs = 1000 * kMs;      // wall-clock comparisons
  constexpr uint64_t kPrecisionNs = 100 * kMs;  // how finely a provider records them (settled)
  TestCheckpoint checkpoint = MakeCheckpoint("times", 8192);
  const uint64_t before_spill = WallNowNs();
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  const uint64_t spilled = WallNowNs();
  const EntryTimes first = TimesOf(table(), instance(), checkpoint.key);
  ASSERT_TRUE(first.listed);
  if (!first.has_times || (first.created == 0 && first.last_used == 0)) {
    const std::string why = !first.has_times ? "enumerate's tier_entry is a 1.0 one (no times)"
                                             : "times not recorded (both 0)";
    SkipRule("ENTRY-LASTUSED", why);
    SkipRule("ENTRY-NOTMOVED", why);
    if (!first.has_times) SkipRule("ENTRY-TIMES", why);
    return;
  }
  EXPECT_NE(first.created, 0u) << "last_used is set, created is not: both or neither";
  EXPECT_NE(first.last_used, 0u) << "created is set, last_used is not: both or neither";
  EXPECT_LE(first.created, spilled + kSkewNs) << "created_unix_ns is in the future";
  EXPECT_GE(first.created + kSkewNs, before_spill) << "created_unix_ns is before the spill";
  EXPECT_LE(first.last_used, spilled + kSkewNs) << "last_used_unix_ns is in the future";
  EXPECT_GE(first.last_used + kPrecisionNs, first.created) << "last_used before created";
  // Calls that are not a use: stat, plan_restore, probe, stats, enumerate.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(StatOf(table(), instance(), checkpoint.key), TIER_OK);
  tier_plan plan{};
  plan.struct_size = sizeof(plan);
  EXPECT_EQ(
      table()->plan_restore(instance(), &checkpoint.key, 3600ull * 1000000000ull, &plan, nullptr),
      TIER_OK);
  if (TIER_HAS_SLOT(table(), tier_provider, probe)) {
    uint8_t found = 0;
    EXPECT_EQ(table()->probe(instance(), &checkpoint.key, 1, &found, nullptr), TIER_OK);
  }
  Stats();
  EnumerateKeys();
  const EntryTimes looked = TimesOf(table(), instance(), checkpoint.key);
  EXPECT_LE(looked.last_used, spilled + kPrecisionNs)
      << "last_used moved " << (looked.last_used - first.last_used) / kMs
      << " ms by stat, plan_restore, probe, stats or enumerate (not a use)";
  // A restore is a use: last_used moves to after its acceptance (at once or soon after).
  const uint64_t before_restore = WallNowNs();
  ASSERT_EQ(Restore(checkpoint), TIER_OK);
  const auto give_up = std::chrono::steady_clock::now() + OpDeadline();
  EntryTimes used = TimesOf(table(), instance(), checkpoint.key);
  while (used.last_used + kPrecisionNs < before_restore &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    used = TimesOf(table(), instance(), checkpoint.key);
  }
  EXPECT_GE(used.last_used + kPrecisionNs, before_restore)
      << "last_used_unix_ns not moved by a completed restore (still "
      << (before_restore - std::min(before_restore, used.last_used)) / kMs << " ms before it, "
      << OpDeadline().count() << " s after)";
  EXPECT_LE(used.last_used, WallNowNs() + kSkewNs) << "last_used_unix_ns is in the future";
  EXPECT_EQ(used.created, first.created) << "created_unix_ns moved";
}

// ---- state and accounting
// -------------------------------------------------------------------------

TEST_P(AbiConformance, PersistentRemoveSurvivesReopen) {
  SKIP_IF_ABSENT();
  if (!persistent()) GTEST_SKIP() << GetParam().name << " does not claim TIER_CAP_PERSISTENT";
  TestCheckpoint removed = MakeCheckpoint("persist-removed", 8192);
  TestCheckpoint kept = MakeCheckpoint("persist-kept", 8192);
  ASSERT_EQ(Spill(removed), TIER_OK);
  ASSERT_EQ(Spill(kept), TIER_OK);
  ASSERT_EQ(table()->remove(instance(), &removed.key, nullptr), TIER_OK);
  const uint64_t used = Stats().used_bytes;
  Close();
  ASSERT_NE(Open(), nullptr);
  const auto keys = EnumerateKeys();
  EXPECT_FALSE(Listed(keys, removed.key)) << "a removed checkpoint came back after reopen";
  EXPECT_EQ(StatOf(table(), instance(), removed.key), TIER_NOT_FOUND)
      << "a removed checkpoint came back after reopen";
  EXPECT_TRUE(Listed(keys, kept.key));
  EXPECT_EQ(Stats().used_bytes, used) << "used_bytes after reopen counts a removed checkpoint";
  ASSERT_EQ(Restore(kept), TIER_OK);
  EXPECT_TRUE(kept.Matches());
}

TEST_P(AbiConformance, StoredBytesAgreeAcrossStatStatsCompletionAndEnumerate) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint("stored-bytes", 64 * 1024);
  const uint64_t used_before = Stats().used_bytes;
  OpRecord record;
  auto segments = checkpoint.Segments();
  ASSERT_EQ(table()->spill(instance(), &checkpoint.key, segments.data(),
                           static_cast<uint32_t>(segments.size()), OpRecord::Callback,
                           record.cookie(), nullptr),
            TIER_OK);
  ASSERT_TRUE(record.Wait("spill"));
  ASSERT_EQ(record.status, TIER_OK);
  tier_stat_result stat{};
  stat.struct_size = sizeof(stat);
  ASSERT_EQ(table()->stat(instance(), &checkpoint.key, &stat, nullptr, 0, nullptr), TIER_OK);
  uint64_t listed_stored = 0;
  table()->enumerate(
      instance(),
      [](void* user, const tier_entry* entry) -> int32_t {
        *static_cast<uint64_t*>(user) += entry->stored_bytes;
        return 0;
      },
      &listed_stored, nullptr);
  EXPECT_EQ(stat.stored_bytes, record.stored_bytes)
      << "stat's stored_bytes differs from the spill completion's: stat's stored_bytes includes "
         "the provider's overhead like the completion and tier_stats";
  EXPECT_EQ(Stats().used_bytes - used_before, stat.stored_bytes)
      << "used_bytes grew by other than stat's stored_bytes";
  EXPECT_EQ(listed_stored, stat.stored_bytes) << "enumerate's stored_bytes differs from stat's";
  if ((info().capabilities & TIER_CAP_COMPRESSION) == 0) {
    EXPECT_GE(stat.stored_bytes, checkpoint.logical_bytes())
        << "fewer stored than logical bytes without TIER_CAP_COMPRESSION";
  }
}

TEST_P(AbiConformance, RestoreCompletionReportsLogicalBytes) {
  SKIP_IF_ABSENT();
  TestCheckpoint checkpoint = MakeCheckpoint("restore-logical", 64 * 1024);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  OpRecord record;
  auto segments = checkpoint.EmptySegments();
  ASSERT_EQ(table()->restore(instance(), &checkpoint.key, segments.data(),
                             static_cast<uint32_t>(segments.size()), OpRecord::Callback,
                             record.cookie(), nullptr),
            TIER_OK);
  ASSERT_TRUE(record.Wait("restore"));
  ASSERT_EQ(record.status, TIER_OK);
  EXPECT_EQ(record.logical_bytes, checkpoint.logical_bytes())
      << "a restore completion's logical_bytes is the segment bytes restored (stored: "
      << record.stored_bytes << ")";
  tier_stat_result stat{};
  stat.struct_size = sizeof(stat);
  ASSERT_EQ(table()->stat(instance(), &checkpoint.key, &stat, nullptr, 0, nullptr), TIER_OK);
  EXPECT_EQ(record.stored_bytes, stat.stored_bytes) << "a restore completion's stored_bytes";
  EXPECT_TRUE(checkpoint.Matches());
}

TEST_P(AbiConformance, CompletionDurationIsWithinTheOperation) {
  SKIP_IF_ABSENT();
  const tier_host_services* host = host_.table();
  struct Timed {
    const tier_host_services* host;
    std::atomic<uint64_t> at{0};
    OpRecord record;
  };
  auto timed = std::make_unique<Timed>();
  timed->host = host;
  TestCheckpoint checkpoint = MakeCheckpoint("duration", 1 << 20);
  auto segments = checkpoint.Segments();
  const uint64_t submitted = host->monotonic_ns(host->host_context);
  ASSERT_EQ(
      table()->spill(
          instance(), &checkpoint.key, segments.data(), static_cast<uint32_t>(segments.size()),
          [](void* user, const tier_completion* c) {
            auto* t = static_cast<Timed*>(user);
            t->at.store(t->host->monotonic_ns(t->host->host_context));
            OpRecord::Callback(t->record.cookie(), c);
          },
          timed.get(), nullptr),
      TIER_OK);
  ASSERT_TRUE(timed->record.Wait("spill"));
  // Slack for a provider on another monotonic clock (CLOCK_MONOTONIC_RAW runs at another rate).
  const uint64_t elapsed = timed->at.load() - submitted;
  EXPECT_LE(timed->record.duration_ns, elapsed + elapsed / 1000 + kMs)
      << "duration_ns is longer than the operation took on the host's monotonic clock (" << elapsed
      << " ns)";
}

// The tier filled to its budget, with incompressible and then compressible data: used_bytes never
// exceeds capacity_bytes. Tiers above TIER_CONFORMANCE_FILL_MAX_MIB (default 320) are skipped.
TEST_P(AbiConformance, FillingTheTierNeverPassesCapacity) {
  SKIP_IF_ABSENT();
  const char* env = std::getenv("TIER_CONFORMANCE_FILL_MAX_MIB");
  const uint64_t limit_bytes = (env != nullptr ? std::strtoull(env, nullptr, 10) : 320) << 20;
  const tier_stats start = Stats();
  if (start.capacity_bytes > limit_bytes) {
    GTEST_SKIP() << GetParam().name << "'s capacity of " << (start.capacity_bytes >> 20)
                 << " MiB is above TIER_CONFORMANCE_FILL_MAX_MIB=" << (limit_bytes >> 20)
                 << ": filling it costs too much here";
  }
  const uint64_t largest =
      std::min<uint64_t>(16u << 20, std::max<uint64_t>(4096, start.capacity_bytes / 8));
  std::vector<std::byte> random(largest), compressible(largest);
  sim::FillSegmentBytes(KeyFromText("conformance:fill"), TIER_SEGMENT_MAIN_KV, 0, random);
  for (size_t i = 0; i < compressible.size(); i += 4096) {
    compressible[i] = static_cast<std::byte>(i >> 12);
  }
  int serial = 0;
  for (const auto* data : {&random, &compressible}) {
    std::vector<tier_key> stored;
    uint64_t written = 0, worst_used = 0;
    for (uint64_t size = largest; size >= 1 && written < 2 * start.capacity_bytes;) {
      const tier_key key = KeyFromText("conformance:fill:" + std::to_string(serial++));
      tier_segment segment{TIER_SEGMENT_MAIN_KV, 0, size, const_cast<std::byte*>(data->data())};
      OpRecord record;
      tier_error error{};
      tier_status status = table()->spill(instance(), &key, &segment, 1, OpRecord::Callback,
                                          record.cookie(), &error);
      if (status == TIER_OK) {
        if (!record.Wait("spill")) return;
        status = record.status;
      }
      const tier_stats now = Stats();
      worst_used = std::max(worst_used, now.used_bytes);
      ASSERT_LE(now.used_bytes, now.capacity_bytes)
          << "used_bytes " << now.used_bytes << " passed capacity_bytes " << now.capacity_bytes
          << " after a spill of " << size << " bytes was admitted";
      if (status == TIER_OK) {
        stored.push_back(key);
        written += size;
      } else {
        ASSERT_TRUE(status == TIER_NO_SPACE || status == TIER_BUSY)
            << tier_status_name(status) << ": " << error.message;
        size /= 2;
      }
    }
    RecordProperty(data == &random ? "filled_random_bytes" : "filled_compressible_bytes",
                   std::to_string(worst_used));
    for (const tier_key& key : stored) {
      ASSERT_EQ(table()->remove(instance(), &key, nullptr), TIER_OK);
    }
    EXPECT_EQ(Stats().used_bytes, start.used_bytes) << "everything removed";
  }
}

// ---- segments: guard pages, sizes, re-entrancy
// ----------------------------------------------------

TEST_P(AbiConformance, GuardedBuffersAreNeverWrittenOutsideTheirSegments) {
  SKIP_IF_ABSENT();
  const std::vector<tier_segment_info> layout = {
      {TIER_SEGMENT_MAIN_KV, 0, 1},          {TIER_SEGMENT_MAIN_KV, 1, 4095},
      {TIER_SEGMENT_MAIN_KV, 2, 4096},       {TIER_SEGMENT_MAIN_KV, 3, 4097},
      {TIER_SEGMENT_SPEC_KV, 0, 65536 + 3},  {TIER_SEGMENT_STATE_IMAGE, 0, (1u << 20) + 7},
      {TIER_SEGMENT_HIDDEN_STATE, 0, 12345}, {TIER_SEGMENT_MANIFEST, 0, 301}};
  const tier_key key = KeyFromText("conformance:guarded");
  GuardedBuffers source(layout, info().buffer_alignment);
  for (size_t i = 0; i < layout.size(); ++i) {
    sim::FillSegmentBytes(key, layout[i].kind, layout[i].index, source.data(i));
  }
  source.MakeReadOnly();  // a spill only reads its buffers
  {
    auto segments = source.Segments();
    OpRecord record;
    tier_error error{};
    ASSERT_EQ(
        table()->spill(instance(), &key, segments.data(), static_cast<uint32_t>(segments.size()),
                       OpRecord::Callback, record.cookie(), &error),
        TIER_OK)
        << error.message;
    ASSERT_TRUE(record.Wait("spill"));
    ASSERT_EQ(record.status, TIER_OK) << record.message;
  }
  source.Unmap();
  for (int round = 0; round < 2; ++round) {
    GuardedBuffers into(layout, info().buffer_alignment);
    auto segments = into.Segments();
    if (round == 1) std::reverse(segments.begin(), segments.end());
    OpRecord record;
    tier_error error{};
    ASSERT_EQ(
        table()->restore(instance(), &key, segments.data(), static_cast<uint32_t>(segments.size()),
                         OpRecord::Callback, record.cookie(), &error),
        TIER_OK)
        << error.message;
    ASSERT_TRUE(record.Wait("restore"));
    ASSERT_EQ(record.status, TIER_OK) << record.message;
    EXPECT_TRUE(into.CanariesIntact()) << "a restore wrote between a segment's end and its guard";
    for (size_t i = 0; i < layout.size(); ++i) {
      EXPECT_TRUE(sim::SegmentBytesMatch(key, layout[i].kind, layout[i].index, into.data(i)))
          << "segment " << i;
    }
    into.Unmap();  // right after the completion: a late write faults
  }
}

// Segments around 32 MiB and 64 MiB, odd sizes (a 100k-token layer is 200+ MiB: the 256 MiB and
// 2^31 sizes run with TIER_CONFORMANCE_HUGE_SEGMENTS=1, see HugeSegmentsRoundTrip).

TEST_P(AbiConformance, SegmentsAroundThirtyTwoAndSixtyFourMiBRoundTrip) {
  SKIP_IF_ABSENT();
  const std::vector<tier_segment_info> layout = {{TIER_SEGMENT_MAIN_KV, 0, (32u << 20) - 1},
                                                 {TIER_SEGMENT_MAIN_KV, 1, (32u << 20) + 1},
                                                 {TIER_SEGMENT_MAIN_KV, 2, (64u << 20) + 3},
                                                 {TIER_SEGMENT_MANIFEST, 0, 100}};
  uint64_t logical = 0;
  for (const auto& s : layout) logical += s.length_bytes;
  if (Stats().capacity_bytes < logical + (logical >> 3)) {
    GTEST_SKIP() << GetParam().name << "'s capacity is below the " << (logical >> 20)
                 << " MiB this checkpoint needs";
  }
  const tier_key key = KeyFromText("conformance:large-" + GetParam().name);
  MappedSegments mapped(key, layout);
  ASSERT_TRUE(mapped.mapped());
  ASSERT_NO_FATAL_FAILURE(RoundTripInPlace(table(), instance(), key, mapped));
  for (size_t i = 0; i < layout.size(); ++i) {
    EXPECT_TRUE(mapped.Matches(i))
        << "segment of " << layout[i].length_bytes << " bytes restored with wrong bytes";
  }
  mapped.Unmap();
  EXPECT_EQ(table()->remove(instance(), &key, nullptr), TIER_OK);
}

TEST_P(AbiConformance, HugeSegmentsRoundTrip) {
  SKIP_IF_ABSENT();
  const char* env = std::getenv("TIER_CONFORMANCE_HUGE_SEGMENTS");
  if (env == nullptr || std::string(env) != "1") {
    GTEST_SKIP() << "segments of 256 MiB + 1 and 2^31 + 3 bytes (2.3 GiB written and read, ~5 GiB "
                    "of memory) run with TIER_CONFORMANCE_HUGE_SEGMENTS=1";
  }
  const std::vector<tier_segment_info> layout = {{TIER_SEGMENT_MAIN_KV, 0, (256ull << 20) + 1},
                                                 {TIER_SEGMENT_MAIN_KV, 1, (1ull << 31) + 3}};
  uint64_t logical = 0;
  for (const auto& s : layout) logical += s.length_bytes;
  if (Stats().capacity_bytes < logical + (logical >> 3)) {
    GTEST_SKIP() << GetParam().name << "'s capacity is below the " << (logical >> 20)
                 << " MiB this checkpoint needs";
  }
  const tier_key key = KeyFromText("conformance:huge");
  MappedSegments mapped(key, layout);
  ASSERT_TRUE(mapped.mapped());
  ASSERT_NO_FATAL_FAILURE(RoundTripInPlace(table(), instance(), key, mapped));
  for (size_t i = 0; i < layout.size(); ++i) {
    EXPECT_TRUE(mapped.Matches(i)) << "segment of " << layout[i].length_bytes << " bytes";
  }
}

// A real checkpoint: a shipped model profile's at TIER_CONFORMANCE_PROFILE_TOKENS tokens (default
// 100,000), with TIER_CONFORMANCE_PROFILE=path/to/profile.json (a qwen3.8-27b profile: 17 KV
// segments of ~200 MiB, 3.4 GB in all, twice that in memory): too much for CI.
TEST_P(AbiConformance, ProfileCheckpointRoundTrips) {
  SKIP_IF_ABSENT();
  const char* path = std::getenv("TIER_CONFORMANCE_PROFILE");
  if (path == nullptr || path[0] == '\0') {
    GTEST_SKIP() << "a shipped profile's 100k-token checkpoint runs with "
                    "TIER_CONFORMANCE_PROFILE=host_shim/profiles/<profile>.json";
  }
  const char* tokens_text = std::getenv("TIER_CONFORMANCE_PROFILE_TOKENS");
  const uint64_t tokens = tokens_text != nullptr ? std::strtoull(tokens_text, nullptr, 10) : 100000;
  auto profile = LoadModelProfile(path);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  const bench::CheckpointShape shape = bench::ShapeForTokens(profile.value(), tokens);
  if (Stats().capacity_bytes < shape.logical_bytes() + (shape.logical_bytes() >> 3)) {
    GTEST_SKIP() << GetParam().name << "'s capacity is below " << shape.Describe();
  }
  std::vector<tier_segment_info> layout;
  for (const auto& s : shape.segments) layout.push_back({s.kind, s.index, s.bytes});
  const tier_key key = KeyFromText("conformance:profile");
  MappedSegments mapped(key, layout);
  ASSERT_TRUE(mapped.mapped());
  ASSERT_NO_FATAL_FAILURE(RoundTripInPlace(table(), instance(), key, mapped));
  RecordProperty("checkpoint", shape.Describe());
  for (size_t i = 0; i < layout.size(); ++i) {
    EXPECT_TRUE(mapped.Matches(i))
        << shape.segments[i].name << " (" << layout[i].length_bytes << " bytes)";
  }
}

// A completion may call the provider, for every size class: tiny spills (<= 64 KiB, which a
// provider may finish inside spill()) included. The spill itself runs on a bounded thread, so a
// provider that completes under its own lock deadlocks there and fails at the deadline.
TEST_P(AbiConformance, CompletionsOfEverySizeMayCallTheProvider) {
  SKIP_IF_ABSENT();
  struct Reentry {
    const tier_provider* table;
    tier_instance* instance;
    tier_key key{};
    std::mutex mutex;
    std::condition_variable cv;
    int calls = 0;
    tier_status stat = -1, stats = -1, info = -1, plan = -1, probe = -1, status = -1;
  };
  for (uint64_t size : {uint64_t{1}, uint64_t{4096}, uint64_t{65536}, uint64_t{1} << 20}) {
    SCOPED_TRACE("a spill of " + std::to_string(size) + " bytes");
    auto checkpoint = std::make_shared<TestCheckpoint>(
        MakeCheckpoint("reentry-" + std::to_string(size), {{TIER_SEGMENT_MAIN_KV, 0, size}}));
    auto r = std::make_shared<Reentry>();
    r->table = table();
    r->instance = instance();
    r->key = checkpoint->key;
    auto segments = std::make_shared<std::vector<tier_segment>>(checkpoint->Segments());
    auto accepted = std::make_shared<std::atomic<int>>(-1);
    ASSERT_TRUE(ReturnsWithinDeadline("spill whose completion calls the provider", [=] {
      accepted->store(r->table->spill(
          r->instance, &r->key, segments->data(), 1,
          [](void* user, const tier_completion* c) {
            auto* x = static_cast<Reentry*>(user);
            const tier_status s = StatOf(x->table, x->instance, x->key);
            const tier_status st = StatsOf(x->table, x->instance);
            tier_info info{};
            info.struct_size = sizeof(info);
            const tier_status in = x->table->info(x->instance, &info, nullptr);
            tier_plan plan{};
            plan.struct_size = sizeof(plan);
            const tier_status pl = x->table->plan_restore(x->instance, &x->key, 1, &plan, nullptr);
            tier_status pr = TIER_OK;
            if (TIER_HAS_SLOT(x->table, tier_provider, probe)) {
              uint8_t found = 0;
              pr = x->table->probe(x->instance, &x->key, 1, &found, nullptr);
            }
            std::lock_guard lock(x->mutex);
            x->stat = s;
            x->stats = st;
            x->info = in;
            x->plan = pl;
            x->probe = pr;
            x->status = c->status;
            ++x->calls;
            x->cv.notify_all();
          },
          r.get(), nullptr));
    }));
    ASSERT_EQ(accepted->load(), TIER_OK);
    std::unique_lock lock(r->mutex);
    ASSERT_TRUE(r->cv.wait_for(lock, OpDeadline(), [&] { return r->calls > 0; }))
        << "the completion never finished: it deadlocked calling the provider";
    EXPECT_EQ(r->status, TIER_OK);
    EXPECT_EQ(r->stat, TIER_OK) << "stat from the completion (the checkpoint is visible)";
    EXPECT_EQ(r->stats, TIER_OK);
    EXPECT_EQ(r->info, TIER_OK);
    EXPECT_EQ(r->plan, TIER_OK);
    EXPECT_EQ(r->probe, TIER_OK);
    lock.unlock();
    // The restore of it, its completion calling stat and stats too.
    auto into = std::make_shared<TestCheckpoint>(*checkpoint);
    auto restore_segments = std::make_shared<std::vector<tier_segment>>(into->EmptySegments());
    auto back = std::make_shared<Reentry>();
    back->table = table();
    back->instance = instance();
    back->key = checkpoint->key;
    ASSERT_TRUE(ReturnsWithinDeadline("restore whose completion calls the provider", [=] {
      accepted->store(back->table->restore(
          back->instance, &back->key, restore_segments->data(), 1,
          [](void* user, const tier_completion* c) {
            auto* x = static_cast<Reentry*>(user);
            const tier_status s = StatOf(x->table, x->instance, x->key);
            const tier_status st = StatsOf(x->table, x->instance);
            std::lock_guard lock(x->mutex);
            x->stat = s;
            x->stats = st;
            x->status = c->status;
            ++x->calls;
            x->cv.notify_all();
          },
          back.get(), nullptr));
    }));
    ASSERT_EQ(accepted->load(), TIER_OK);
    std::unique_lock back_lock(back->mutex);
    ASSERT_TRUE(back->cv.wait_for(back_lock, OpDeadline(), [&] { return back->calls > 0; }))
        << "the restore's completion never finished: it deadlocked calling the provider";
    EXPECT_EQ(back->status, TIER_OK);
    EXPECT_EQ(back->stat, TIER_OK) << "stat from a restore's completion";
    EXPECT_EQ(back->stats, TIER_OK);
    EXPECT_TRUE(back->status != TIER_OK || into->Matches());
  }
}

// TIER_CAP_CHECKSUMS for a provider that keeps its bytes in this process's memory: every copy of a
// stored segment's bytes found in the process is damaged; the restore must not return OK.
TEST_P(AbiConformance, DamagedBytesInProviderMemoryAreDataLoss) {
  SKIP_IF_ABSENT();
  if ((info().capabilities & TIER_CAP_CHECKSUMS) == 0) {
    GTEST_SKIP() << GetParam().name << " does not claim TIER_CAP_CHECKSUMS";
  }
  if (persistent()) {
    GTEST_SKIP() << GetParam().name
                 << " is persistent: DamagedStoredBytesAreDataLossNeverWrongBytes "
                    "damages its files";
  }
  TestCheckpoint checkpoint = MakeCheckpoint("damaged-in-memory", 64 * 1024);
  ASSERT_EQ(Spill(checkpoint), TIER_OK);
  const std::vector<std::byte>& segment = checkpoint.buffers[3];
  std::vector<std::byte> needle(segment.begin() + static_cast<long>(segment.size() / 2),
                                segment.begin() + static_cast<long>(segment.size() / 2 + 64));
  checkpoint.EmptySegments();  // the suite's own copy is not the provider's
  const size_t damaged = DamageCopiesInProcessMemory(needle, needle);
  if (damaged == 0) {
    GTEST_SKIP() << "the checkpoint's bytes appear nowhere verbatim in this process (compressed or "
                    "encrypted in memory?): the suite cannot aim the damage";
  }
  RecordProperty("copies_damaged", static_cast<int>(damaged));
  const tier_status restored = Restore(checkpoint);
  EXPECT_NE(restored, TIER_OK) << "restore completed OK "
                               << (checkpoint.Matches() ? "although every copy was damaged"
                                                        : "with damaged bytes")
                               << ": a provider claiming TIER_CAP_CHECKSUMS must verify them and "
                                  "complete with TIER_DATA_LOSS";
  if (restored != TIER_OK) {
    EXPECT_TRUE(restored == TIER_DATA_LOSS || restored == TIER_NOT_FOUND)
        << tier_status_name(restored);
    EXPECT_EQ(StatOf(table(), instance(), checkpoint.key), TIER_NOT_FOUND)
        << "a checkpoint that failed verification is dropped";
  }
}

}  // namespace
}  // namespace tier::conformance
