// fleet.h -- one byte budget for every server of a namespace (README.md, "Fleet budget"). The
// accounting is one small object of the namespace, `b.fleet`, that every server updates with a
// compare-and-swap write op: read it, change it, write it back only if its version xattr is still
// the one read (`cmpxattr` + `write_full` + `setxattr`, one atomic op on one object; a loser
// reads again). It holds what the fleet committed (stored bytes of published checkpoints), each
// live server's reservation for its spills in flight with its lease, the keys being restored
// (pins) and the keys being evicted. A server whose lease is older than fleet_lease_s is dead:
// the next update by anyone drops it, its reservation, its pins and its evictions.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <tier/status.h>

#include "aio.h"

namespace tier::rados {

struct FleetLedger {
  uint64_t version = 0;
  uint64_t committed_bytes = 0;  // published checkpoints (errs high after a crash; reconciled)
  uint64_t commits = 0;          // changes of committed_bytes so far (a reconcile compares it)
  struct Server {
    uint64_t lease_unix_ns = 0;
    uint64_t reserved_bytes = 0;  // worst case of its spills in flight
  };
  std::map<uint64_t, Server> servers;
  std::map<std::pair<std::string, uint64_t>, uint32_t> pins;  // (key hex, server): restores
  std::map<std::string, uint64_t> evicting;                   // key hex -> server
  std::vector<std::string> other_lines;  // kinds a later version adds (tenants): kept as read

  uint64_t TotalBytes() const;  // committed + every reservation
  bool Pinned(const std::string& key_hex) const;
  std::string Encode() const;
  static bool Parse(const std::string& text, FleetLedger* out);
};

class FleetBudget {
 public:
  static constexpr const char* kObject = "b.fleet";
  using Mutation = std::function<Status(FleetLedger*)>;

  FleetBudget(Aio* aio, uint64_t budget_bytes, uint32_t lease_s, uint64_t server_id,
              uint32_t op_timeout_s);

  uint64_t budget_bytes() const { return budget_bytes_; }
  uint64_t server_id() const { return server_id_; }
  // Creates the ledger when absent (committed = `counted_bytes`) and registers this server.
  Status Join(uint64_t counted_bytes);
  // Reads, drops dead servers, applies `mutate` (which sees this server registered), writes back
  // if nobody else wrote meanwhile; retries until the deadline. A mutation's error is returned
  // and nothing is written. Blocking; any thread.
  Status Update(const Mutation& mutate, FleetLedger* after = nullptr);
  Result<FleetLedger> Read();

  // The operations the provider uses (each one Update).
  Status Reserve(uint64_t bytes, uint64_t* total_bytes);          // NO_SPACE when past the budget
  Status Commit(uint64_t reserved_bytes, uint64_t stored_bytes);  // before the publish
  Status Release(uint64_t reserved_bytes, uint64_t committed_bytes);
  Status Pin(const std::string& key_hex);  // NOT_FOUND while it is being evicted
  Status Unpin(const std::string& key_hex);
  Status BeginEvict(const std::string& key_hex);  // BUSY while it is pinned or evicted
  Status EndEvict(const std::string& key_hex, uint64_t removed_bytes);
  Status Refresh();  // this server's lease = now
  Status Leave();    // a clean close gives everything back at once

 private:
  static uint64_t UnixNowNs();
  Aio* const aio_;
  const uint64_t budget_bytes_;
  const uint64_t lease_ns_;
  const uint64_t server_id_;
  const uint32_t op_timeout_s_;
};

}  // namespace tier::rados
