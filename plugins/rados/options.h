// options.h -- the rados provider's key=value options (README.md has the table). Parsing is a
// pure function: no cluster access, no side effects; what needs the cluster (object_mib against
// osd_max_object_size and osd_max_write_size, the pool) is checked at open by cluster.cc.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <tier/status.h>

#include "tier_provider.h"

namespace tier::rados {

enum class CompressionMode { kOff, kZstd, kAuto };

struct RadosOptions {
  std::string conf;  // ceph.conf path; "" = librados's own search (CEPH_CONF, /etc/ceph)
  std::string pool;  // required
  std::string client = "admin";  // the cephx id: "tier" or "client.tier" (stored without "client.")
  std::string keyring;           // "" = what the conf says
  uint64_t capacity_bytes = 0;   // required (capacity_bytes or capacity_gib)
  uint32_t object_bytes = 4u << 20;  // object_mib: payload bytes of one chunk object
  uint32_t queue_depth = 16;         // chunk operations in flight per instance
  CompressionMode compression = CompressionMode::kOff;
  int zstd_level = 1;               // [-7, 19]
  uint32_t op_timeout_s = 30;       // bound on every cluster operation
  uint32_t threads = 4;             // worker threads (checksums, zstd, completions)
  uint32_t lease_grace_s = 300;     // a spill's lease older than this is dead (sweep rule)
  uint32_t sweep_interval_s = 300;  // periodic orphan sweep; 0 = only at open
  std::string namespace_prefix;     // put before the host's namespace (separate fleets, tests)
  std::string auth_key_file;        // the fleet's secret: seals and tags keyed ("" = unkeyed)
  std::string admin_socket;  // librados admin socket path ("" = none, whatever the conf says)
  uint64_t fleet_budget_bytes = 0;  // one budget for every server of the namespace (0 = off)
  uint32_t fleet_lease_s = 30;      // a server silent this long gives its fleet budget back

  // The cluster name of the client ("client.tier").
  std::string client_name() const { return "client." + client; }
};

// Parses `options`. Unknown keys, duplicates, malformed values and missing required keys give
// TIER_INVALID_ARGUMENT with a message naming the option. Pure; any thread.
Result<RadosOptions> ParseOptions(std::span<const tier_option> options);

const char* CompressionName(CompressionMode mode);

}  // namespace tier::rados
