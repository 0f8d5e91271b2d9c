// The fleet budget in the provider (README.md, "Fleet budget"): a spill reserves its worst case
// in the shared ledger (fleet.h) before it writes, evicting the least recently used checkpoints
// of the namespace (by the shared tier.used) when the fleet is full; it moves the reservation to
// the committed count before its header is published, so a crash leaves the count high, never
// low. A restore pins its key in the ledger while it reads; an eviction marks the key first, so
// the two exclude each other through the ledger's compare-and-swap. A background loop refreshes
// this server's lease, evicts down to a low watermark, and reconciles the count with the pool.
#include <algorithm>
#include <chrono>

#include "catalog.h"
#include "job.h"
#include "rados_provider.h"

namespace tier::rados {
namespace {

constexpr uint64_t kSecondNs = 1'000'000'000ull;

struct Stored {
  uint64_t used_unix_ns = 0;
  KeyBytes key{};
  uint64_t spill_id = 0;
  uint64_t stored_bytes = 0;
  uint32_t chunks = 0;
};

std::string KeyHex(const KeyBytes& key) {
  return Hex({key.data(), key.size()});
}

}  // namespace

Status RadosProvider::FleetReserve(SpillJob* job) {
  for (int pass = 0; pass < 8; ++pass) {
    uint64_t total = 0;
    Status status = fleet_->Reserve(job->worst_case_bytes, &total);
    if (status.ok()) {
      job->fleet_reserved_bytes = job->worst_case_bytes;
      return status;
    }
    if (status.code() != TIER_NO_SPACE) return status;
    const uint64_t need = total + job->worst_case_bytes - fleet_->budget_bytes();
    if (EvictLeastRecentlyUsed(need) == 0) return status;  // everything left is being restored
  }
  return Status::NoSpace("rados: fleet budget: evictions by other servers kept the fleet full");
}

void RadosProvider::FleetSettleSpill(SpillJob* job, const Status& status) {
  const uint64_t reserved = job->fleet_reserved_bytes;
  const uint64_t uncommit = status.ok() ? 0 : job->fleet_committed_bytes;
  if (reserved == 0 && uncommit == 0) return;
  Status given = fleet_->Release(reserved, uncommit);
  if (!given.ok()) {
    Log(TIER_LOG_WARN,
        "rados: fleet: could not give back a spill's budget (the lease returns "
        "it): " +
            given.message());
  }
}

void RadosProvider::FleetGiveBack(uint64_t stored_bytes) {
  if (!fleet_ || stored_bytes == 0) return;
  Status given = fleet_->Release(0, stored_bytes);
  if (!given.ok()) {
    Log(TIER_LOG_WARN,
        "rados: fleet: a removed checkpoint's bytes stay counted until the next "
        "reconcile: " +
            given.message());
  }
}

uint64_t RadosProvider::EvictLeastRecentlyUsed(uint64_t need_bytes) {
  if (!fleet_) return 0;
  std::lock_guard evict_lock(evict_mu_);
  const uint64_t deadline = Aio::NowNs() + uint64_t{options_.op_timeout_s} * 2 * kSecondNs;
  std::vector<std::string> oids;
  bool truncated = false;
  Status listed = ListObjects(
      cluster_->io(), kSweepMaxObjects, deadline,
      [&](const std::string& name) {
        const ObjectName o = ParseObjectName(name);
        if (o.kind == ObjectName::Kind::kHeader) oids.push_back(name);
        return !closing_.load();
      },
      &truncated);
  if (!listed.ok()) {
    Log(TIER_LOG_WARN, "rados: fleet: eviction: " + listed.message());
    return 0;
  }
  std::vector<int> rcs;
  std::vector<std::map<std::string, std::string>> xattrs;
  if (!ReadXattrs(aio_.get(), oids, deadline, &rcs, &xattrs).ok()) return 0;
  std::vector<Stored> stored;
  for (size_t i = 0; i < oids.size(); ++i) {
    if (rcs[i] != 0) continue;
    Stored s;
    s.key = ParseObjectName(oids[i]).key;
    uint64_t chunks = 0;
    auto& x = xattrs[i];
    if (!ParseDecimal(x[kXattrStored], &s.stored_bytes) ||
        !ParseHex64(x[kXattrSpill], &s.spill_id) || !ParseDecimal(x[kXattrChunks], &chunks)) {
      continue;
    }
    ParseDecimal(x[kXattrUsed], &s.used_unix_ns);  // absent: oldest
    s.chunks = static_cast<uint32_t>(chunks);
    stored.push_back(s);
  }
  std::sort(stored.begin(), stored.end(),
            [](const Stored& a, const Stored& b) { return a.used_unix_ns < b.used_unix_ns; });
  uint64_t freed = 0;
  for (const Stored& s : stored) {
    if (freed >= need_bytes || closing_.load()) break;
    {
      // A restore of this instance accepted but not yet pinned in the ledger: its chunks would
      // outlive the header (DropChunks waits for it) while the bytes were given back.
      std::lock_guard lock(mu_);
      if (pins_.count({s.key, s.spill_id}) != 0) continue;
    }
    const std::string hex = KeyHex(s.key);
    if (!fleet_->BeginEvict(hex).ok()) continue;  // being restored (or evicted) somewhere
    const Status removed = RemoveHeaderIf(s.key, s.spill_id, Deadline());
    uint64_t gone = 0;
    if (removed.ok()) {
      ForgetHeader(s.key, 0);
      DropChunks(s.key, s.spill_id, s.chunks);
      // The chunks go before the bytes are given back: the pool never holds more than counted.
      const uint64_t now = Aio::NowNs();
      reaper_->WaitIdle(deadline > now ? deadline - now : 0);
      gone = s.stored_bytes;
      std::lock_guard lock(mu_);
      counted_bytes_ -= std::min(counted_bytes_, gone);
      if (counted_entries_ > 0) --counted_entries_;
    }
    Status ended = fleet_->EndEvict(hex, gone);
    if (!ended.ok()) Log(TIER_LOG_WARN, "rados: fleet: eviction: " + ended.message());
    freed += gone;
  }
  if (freed > 0) PublishUsage();
  return freed;
}

void RadosProvider::FleetReconcile() {
  // The committed count errs high after a crash (committed before the publish, given back after
  // the remove). Recount while nothing moves: no reservation, no eviction, no commit between the
  // read before the listing and the write after it.
  Result<FleetLedger> before = fleet_->Read();
  if (!before.ok() || !before->evicting.empty()) return;
  for (const auto& [id, s] : before->servers) {
    if (s.reserved_bytes != 0) return;
  }
  Result<SweepReport> counted = Sweep(uint64_t{options_.op_timeout_s} * 2 * kSecondNs);
  if (!counted.ok() || counted->truncated) return;
  const uint64_t was = before->committed_bytes;
  if (counted->stored_bytes == was) return;
  Status status = fleet_->Update([&](FleetLedger* l) {
    if (l->committed_bytes != was || !l->evicting.empty() || l->commits != before->commits) {
      return Status::Busy("moved");
    }
    for (const auto& [id, s] : l->servers) {
      if (s.reserved_bytes != 0) return Status::Busy("moved");
    }
    l->committed_bytes = counted->stored_bytes;
    return Status::Ok();
  });
  if (status.ok()) {
    Log(TIER_LOG_INFO, "rados: fleet: committed count reconciled from " + std::to_string(was) +
                           " to " + std::to_string(counted->stored_bytes) + " bytes");
  }
}

void RadosProvider::FleetLoop() {
  const uint64_t tick_ms = std::max<uint64_t>(500, uint64_t{options_.fleet_lease_s} * 1000 / 4);
  for (uint64_t tick = 1;; ++tick) {
    {
      std::unique_lock lock(housekeeping_mu_);
      housekeeping_cv_.wait_for(lock, std::chrono::milliseconds(tick_ms),
                                [&] { return stop_housekeeping_; });
      if (stop_housekeeping_) return;
    }
    FleetLedger ledger;
    Status refreshed = fleet_->Update([](FleetLedger*) { return Status::Ok(); }, &ledger);
    if (!refreshed.ok()) {
      Log(TIER_LOG_WARN, "rados: fleet: lease refresh: " + refreshed.message());
      continue;
    }
    // Continuous: past 95% of the budget, evict down to 90% so spills rarely wait for it.
    const uint64_t budget = fleet_->budget_bytes();
    const uint64_t total = ledger.TotalBytes();
    if (total > budget / 20 * 19) EvictLeastRecentlyUsed(total - budget / 10 * 9);
    if (tick % 4 == 0) FleetReconcile();
  }
}

}  // namespace tier::rados
