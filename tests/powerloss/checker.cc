#include "checker.h"

#include <sstream>
#include <vector>

#include "derived_checkpoint.h"
#include "disk_test_util.h"

namespace tier::powerloss::test {
namespace {

using disk::test::Checkpoint;
using disk::test::Done;
using disk::test::FakeHost;
using disk::test::RestoreTarget;
using disk::test::Waiter;

struct Seen {
  std::map<uint64_t, std::string> layout_problems;  // visible seeds ("" = layout as spilled)
  std::map<uint64_t, Checkpoint> checkpoints;       // what each visible seed must restore to
  uint64_t max_segment_bytes = 0;
  uint64_t foreign = 0;
};

int32_t CollectSeen(void* user, const tier_entry* e) {
  auto* s = static_cast<Seen*>(user);
  uint64_t seed = 0;
  if (!disk::test::SeedOfKey(e->key, &seed)) {
    ++s->foreign;
    return 0;
  }
  Checkpoint& cp = s->checkpoints[seed] = disk::test::DerivedCheckpoint(seed, s->max_segment_bytes);
  s->layout_problems[seed] =
      disk::test::LayoutMatches(cp, e->segments, e->segment_count) ? "" : "segment table differs";
  return 0;
}

// Recovery finished and the index matches the files. Appends what fails to `why`.
void CheckDirectory(const std::string& dir, disk::DiskProvider& p, std::ostringstream& why) {
  uint64_t ckpt_files = 0;
  for (const std::string& n : disk::test::ListDir(dir)) {
    if (n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0) {
      why << "temporary file left after recovery: " << n << "; ";
    }
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".ckpt") == 0) ++ckpt_files;
  }
  tier_stats st{};
  st.struct_size = sizeof(st);
  if (!p.Stats(&st).ok()) why << "stats failed; ";
  const uint64_t file_bytes = disk::test::SumCheckpointFileBytes(dir);
  if (st.used_bytes != file_bytes) {
    why << "used_bytes " << st.used_bytes << " but the checkpoint files hold " << file_bytes
        << "; ";
  }
  if (st.entries != ckpt_files) {
    why << st.entries << " entries but " << ckpt_files << " checkpoint files; ";
  }
}

// The budget after a cut: what the directory holds beyond capacity may only be checkpoints removed
// under durability=none (their bytes go back at the unlink, which nothing makes durable: a cut can
// undo the unlink and keep a spill that used the bytes). Under fdatasync a remove holds its bytes
// until its directory sync, so it never leaves the directory over capacity.
void CheckBudget(disk::DiskProvider& p, const std::map<uint64_t, SeedFacts>& facts,
                 const std::map<uint64_t, std::string>& visible, const CheckConfig& config,
                 CheckResult* result, std::ostringstream& why) {
  tier_stats st{};
  st.struct_size = sizeof(st);
  if (!p.Stats(&st).ok()) return;
  uint64_t resurrected_bytes = 0;
  for (const auto& [seed, layout] : visible) {
    const auto it = facts.find(seed);
    if (it == facts.end() || !it->second.removing) continue;
    if (it->second.removed && it->second.remove_synced) continue;
    if (it->second.remove_under_fdatasync) continue;
    const tier_key key = disk::test::DerivedKey(seed);
    tier_stat_result out{};
    out.struct_size = sizeof(out);
    if (p.Stat(&key, &out, nullptr, 0).ok()) resurrected_bytes += out.stored_bytes;
  }
  result->over_capacity = st.used_bytes > config.capacity_bytes;
  if (st.used_bytes > config.capacity_bytes + resurrected_bytes) {
    why << "over budget: " << st.used_bytes << " bytes used of capacity " << config.capacity_bytes
        << " (" << resurrected_bytes << " of them checkpoints removed under durability=none); ";
  }
}

// Restores `seed` and classifies the outcome: "" whole, "data_loss", or the problem.
std::string RestoreSeed(disk::DiskProvider& p, uint64_t seed, const Checkpoint& cp) {
  RestoreTarget target = disk::test::MakeTarget(cp, seed % 3);
  const tier_key key = disk::test::DerivedKey(seed);
  Waiter w;
  const Status s = p.Restore(&key, target.segments.data(),
                             static_cast<uint32_t>(target.segments.size()), Waiter::Callback, &w);
  if (!s.ok()) return "restore refused: " + s.message();
  const Done d = w.Wait();
  if (d.status == TIER_DATA_LOSS) return "data_loss";
  if (d.status != TIER_OK)
    return std::string("restore ") + tier_status_name(d.status) + ": " + d.message;
  if (!target.Equals(cp)) return "restored WRONG BYTES";
  return "";
}

}  // namespace

CheckResult CheckCrashState(const std::string& dir, const std::map<uint64_t, SeedFacts>& facts,
                            const CheckConfig& config) {
  CheckResult result;
  FakeHost host;
  disk::test::Options options = disk::test::BaseOptions(dir, config.capacity_bytes);
  options.Set("direct_io", "off").Set("chunk_kib", std::to_string(config.chunk_kib));
  options.Set("staging_mib", "1").Set("queue_depth", "4").Set("codec_threads", "1");
  disk::Seams seams;
  seams.disable_io_uring = true;  // the check's own I/O path does not matter; threads start faster
  auto opened = disk::test::OpenDisk(host, config.ns, options, seams);
  if (!opened.ok()) {
    result.failure = "recovery did not finish: reopen failed: " + opened.status().message();
    return result;
  }
  disk::DiskProvider& p = *opened.value();
  result.quarantined_at_open = p.quarantined_at_open();
  result.temps_removed_at_open = p.temps_removed_at_open();
  std::ostringstream why;
  CheckDirectory(dir, p, why);
  Seen seen;
  seen.max_segment_bytes = config.max_segment_bytes;
  if (!p.Enumerate(CollectSeen, &seen).ok()) why << "enumerate failed; ";
  if (seen.foreign != 0) why << seen.foreign << " visible keys were never spilled; ";
  for (const auto& [seed, layout] : seen.layout_problems) {
    ++result.visible;
    const auto it = facts.find(seed);
    const SeedFacts f = it == facts.end() ? SeedFacts{} : it->second;
    if (!f.began) why << "seed " << seed << " is visible but was never spilled; ";
    if (f.removed && f.remove_synced) why << "seed " << seed << ": a completed remove came back; ";
    if (!layout.empty()) why << "seed " << seed << ": " << layout << "; ";
    const std::string restored = RestoreSeed(p, seed, seen.checkpoints.at(seed));
    if (restored.empty()) {
      result.whole.insert(seed);
    } else if (restored == "data_loss" && !f.spill_synced && !f.confirmed) {
      ++result.torn;  // an unsynced spill, torn by the power loss: a miss, never served
    } else {
      why << "seed " << seed << " (" << (f.spill_synced ? "synced" : "unsynced") << " spill"
          << (f.spilled ? ", completed" : ", not completed") << "): " << restored << "; ";
    }
  }
  CheckBudget(p, facts, seen.layout_problems, config, &result, why);
  for (const auto& [seed, f] : facts) {
    if (f.removing || result.whole.count(seed) != 0) continue;
    const bool must_survive = (f.spilled && f.spill_synced) || f.confirmed;
    if (must_survive && seen.layout_problems.count(seed) == 0) {
      why << "seed " << seed << ": "
          << (f.confirmed ? "a checkpoint seen whole before" : "a completed spill") << " is gone; ";
    }
    if (f.spilled && !f.spill_synced && !f.confirmed && !f.lost &&
        seen.layout_problems.count(seed) == 0) {
      ++result.lost_unsynced;
      result.lost.insert(seed);
    }
  }
  result.failure = why.str();
  return result;
}

}  // namespace tier::powerloss::test
