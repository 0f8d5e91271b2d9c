// The sweep (README.md, "The sweep rule"): lists the namespace, counts its checkpoints, and
// removes the chunk objects of spills that died. A chunk group (key K, spill S) is removed only
// when (1) the lease l.K.S is absent, or stale for longer than lease_grace_s and removed by us
// with a compare on the value we read (a refresh in between makes the compare fail), and then
// (2) the header h.K, read after (1), does not hold S. A live writer refreshes its lease every
// lease_grace_s/4 and publishes only within lease_grace_s/2 of its last refresh, so a live
// spill's chunks are never removed, and a published checkpoint's never.
#include <cerrno>
#include <map>
#include <set>

#include "catalog.h"
#include "rados_provider.h"

namespace tier::rados {
namespace {

constexpr uint64_t kSecondNs = 1'000'000'000ull;

struct XattrRead {
  rados_xattrs_iter_t iter = nullptr;
  int rval = 0;
  ~XattrRead() {
    if (iter != nullptr) rados_getxattrs_end(iter);
  }
};

std::map<std::string, std::string> Collect(XattrRead& read) {
  std::map<std::string, std::string> out;
  if (read.iter == nullptr || read.rval < 0) return out;
  for (;;) {
    const char* name = nullptr;
    const char* value = nullptr;
    size_t len = 0;
    if (rados_getxattrs_next(read.iter, &name, &value, &len) < 0 || name == nullptr) break;
    out.emplace(name, std::string(value, len));
  }
  return out;
}

struct Wave {
  std::mutex mu;
  std::condition_variable cv;
  uint32_t pending = 0;
};

}  // namespace

// The xattrs of every object in `oids` (rcs[i] = 0 or -errno), kMetadataWave reads in flight.
Status ReadXattrs(Aio* aio, const std::vector<std::string>& oids, uint64_t deadline_ns,
                  std::vector<int>* rcs, std::vector<std::map<std::string, std::string>>* out) {
  rcs->assign(oids.size(), 0);
  out->assign(oids.size(), {});
  for (size_t first = 0; first < oids.size(); first += RadosProvider::kMetadataWave) {
    const size_t n = std::min<size_t>(RadosProvider::kMetadataWave, oids.size() - first);
    auto wave = std::make_shared<Wave>();
    std::vector<std::shared_ptr<XattrRead>> reads(n);
    std::vector<uint64_t> ids(n, 0);
    for (size_t i = 0; i < n; ++i) {
      reads[i] = std::make_shared<XattrRead>();
      rados_read_op_t op = rados_create_read_op();
      if (op == nullptr) return Status::Internal("rados: out of memory");
      rados_read_op_getxattrs(op, &reads[i]->iter, &reads[i]->rval);
      {
        std::lock_guard lock(wave->mu);
        ++wave->pending;
      }
      int* slot = &(*rcs)[first + i];
      const int rc = aio->Read(
          oids[first + i], op, 0,
          [wave, slot](int result) {
            std::lock_guard lock(wave->mu);
            *slot = result;
            if (--wave->pending == 0) wave->cv.notify_all();
          },
          reads[i], &ids[i]);
      if (rc < 0) {
        std::lock_guard lock(wave->mu);
        *slot = rc;
        --wave->pending;
      }
    }
    std::unique_lock lock(wave->mu);
    const uint64_t now = Aio::NowNs();
    if (!wave->cv.wait_for(lock,
                           std::chrono::nanoseconds(deadline_ns > now ? deadline_ns - now : 0),
                           [&] { return wave->pending == 0; })) {
      lock.unlock();
      for (uint64_t id : ids) aio->Cancel(id);
      lock.lock();
      wave->cv.wait(lock, [&] { return wave->pending == 0; });  // cancelled ops complete promptly
      return Status::IoError("rados: sweep: no answer within op_timeout_s");
    }
    for (size_t i = 0; i < n; ++i) {
      if ((*rcs)[first + i] == 0) (*out)[first + i] = Collect(*reads[i]);
    }
  }
  return Status::Ok();
}

bool ParseDecimal(const std::string& text, uint64_t* out) {
  if (text.empty() || text.size() > 20 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  *out = std::strtoull(text.c_str(), nullptr, 10);
  return true;
}

Result<SweepReport> RadosProvider::SweepNow() {
  return Sweep(uint64_t{options_.op_timeout_s} * 4 * kSecondNs);
}

void RadosProvider::HousekeepingLoop() {
  for (;;) {
    {
      std::unique_lock lock(housekeeping_mu_);
      const uint64_t interval_s =
          options_.sweep_interval_s == 0 ? 86400 : options_.sweep_interval_s;
      housekeeping_cv_.wait_for(lock, std::chrono::seconds(interval_s),
                                [&] { return stop_housekeeping_; });
      if (stop_housekeeping_) return;
    }
    if (options_.sweep_interval_s == 0) continue;
    Result<SweepReport> report = Sweep(uint64_t{options_.op_timeout_s} * 4 * kSecondNs);
    if (!report.ok()) {
      Log(TIER_LOG_WARN, "rados: periodic sweep: " + report.status().message());
    } else if (report->orphan_objects > 0) {
      Log(TIER_LOG_INFO, "rados: sweep removed " + std::to_string(report->orphan_objects) +
                             " objects of " + std::to_string(report->orphan_groups) +
                             " dead spills");
    }
  }
}

Result<SweepReport> RadosProvider::Sweep(uint64_t time_budget_ns) {
  std::lock_guard sweep_lock(sweep_mu_);
  SweepReport report;
  const uint64_t deadline = Aio::NowNs() + time_budget_ns;
  std::vector<KeyBytes> headers;
  std::map<std::pair<KeyBytes, uint64_t>, std::vector<uint32_t>> groups;  // chunk seqs
  TIER_RETURN_IF_ERROR(ListObjects(
      cluster_->io(), kSweepMaxObjects, deadline,
      [&](const std::string& name) {
        ++report.objects_listed;
        const ObjectName o = ParseObjectName(name);
        if (o.kind == ObjectName::Kind::kHeader) headers.push_back(o.key);
        if (o.kind == ObjectName::Kind::kChunk) groups[{o.key, o.spill_id}].push_back(o.seq);
        if (o.kind == ObjectName::Kind::kLease) groups[{o.key, o.spill_id}];
        return !closing_.load();  // a close does not wait for a whole pass
      },
      &report.truncated));
  if (closing_.load()) return report;  // a partial listing: neither count nor remove

  // Count the checkpoints (tier.stored of each header).
  std::vector<std::string> oids;
  for (const KeyBytes& key : headers) oids.push_back(HeaderName(key));
  std::vector<int> rcs;
  std::vector<std::map<std::string, std::string>> xattrs;
  TIER_RETURN_IF_ERROR(ReadXattrs(aio_.get(), oids, Deadline(), &rcs, &xattrs));
  for (size_t i = 0; i < oids.size(); ++i) {
    uint64_t stored = 0;
    auto it = xattrs[i].find(kXattrStored);
    if (rcs[i] != 0 || it == xattrs[i].end() || !ParseDecimal(it->second, &stored)) continue;
    ++report.checkpoints;
    report.stored_bytes += stored;
  }
  if (!report.truncated) {
    std::lock_guard lock(mu_);
    counted_bytes_ = report.stored_bytes;
    counted_entries_ = report.checkpoints;
  }

  if (closing_.load()) return report;
  // (1) Leases, for every chunk group.
  std::vector<std::pair<KeyBytes, uint64_t>> candidates;
  oids.clear();
  for (const auto& [group, seqs] : groups) {
    candidates.push_back(group);
    oids.push_back(LeaseName(group.first, group.second));
  }
  TIER_RETURN_IF_ERROR(ReadXattrs(aio_.get(), oids, Deadline(), &rcs, &xattrs));
  const uint64_t now_unix = UnixNowNs();
  const uint64_t grace_ns = uint64_t{options_.lease_grace_s} * kSecondNs;
  std::vector<std::pair<KeyBytes, uint64_t>> dead;
  for (size_t i = 0; i < candidates.size() && !closing_.load(); ++i) {
    if (rcs[i] == -ENOENT) {
      dead.push_back(candidates[i]);
      continue;
    }
    auto it = xattrs[i].find(kXattrLease);
    uint64_t lease_ns = 0;
    if (rcs[i] != 0 || it == xattrs[i].end() || !ParseDecimal(it->second, &lease_ns) ||
        now_unix < lease_ns + grace_ns) {
      ++report.live_spills;  // fresh, or unreadable now: leave it
      continue;
    }
    // Stale: remove the lease only if nobody refreshed it since we read it.
    rados_write_op_t op = rados_create_write_op();
    if (op == nullptr) return Status::Internal("rados: out of memory");
    rados_write_op_cmpxattr(op, kXattrLease, LIBRADOS_CMPXATTR_OP_EQ, it->second.data(),
                            it->second.size());
    rados_write_op_remove(op);
    const int rc = aio_->WriteSync(oids[i], op, LIBRADOS_OPERATION_FULL_FORCE, Deadline());
    if (rc == 0 || rc == -ENOENT) {
      dead.push_back(candidates[i]);
      ++report.orphan_objects;  // the lease
    } else {
      ++report.live_spills;  // refreshed meanwhile (ECANCELED), or no answer
    }
  }
  // (2) Headers, read after the leases: a dead group is an orphan unless its spill was published.
  oids.clear();
  for (const auto& group : dead) oids.push_back(HeaderName(group.first));
  TIER_RETURN_IF_ERROR(ReadXattrs(aio_.get(), oids, Deadline(), &rcs, &xattrs));
  std::vector<std::string> orphans;
  for (size_t i = 0; i < dead.size(); ++i) {
    if (rcs[i] == 0) {
      uint64_t holder = 0;
      auto it = xattrs[i].find(kXattrSpill);
      // Published (or a header we cannot read: keep its chunks for a restore to judge).
      if (it == xattrs[i].end() || !ParseHex64(it->second, &holder) || holder == dead[i].second) {
        continue;
      }
    } else if (rcs[i] != -ENOENT) {
      continue;  // no answer: next pass
    }
    const auto& seqs = groups[dead[i]];
    if (seqs.empty()) continue;  // a lease alone (already removed above)
    {
      // A restore of this instance may still read a checkpoint another server just removed.
      std::lock_guard lock(mu_);
      if (pins_.count(dead[i]) != 0) continue;
    }
    ++report.orphan_groups;
    for (uint32_t seq : seqs) orphans.push_back(ChunkName(dead[i].first, dead[i].second, seq));
  }
  report.orphan_objects += orphans.size();
  reaper_->Remove(std::move(orphans));
  const uint64_t now = Aio::NowNs();
  if (!closing_.load()) {
    reaper_->WaitIdle(deadline > now ? deadline - now : 0);  // bounded: the rest goes on meanwhile
  }
  PublishUsage();
  return report;
}

}  // namespace tier::rados
