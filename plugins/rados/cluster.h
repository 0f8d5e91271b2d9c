// cluster.h -- the connection to a Ceph cluster: librados handle configured from the options
// (conf, client id, keyring, timeouts, client throttle), connected within op_timeout_s, an I/O
// context on the pool and the instance's RADOS namespace, and the cluster's object limits.
#pragma once

#include <rados/librados.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <tier/status.h>

#include "format.h"
#include "options.h"

namespace tier::rados {

struct ClusterLimits {
  uint64_t max_object_bytes = 128ull << 20;  // osd_max_object_size
  uint64_t max_write_bytes = 90ull << 20;    // osd_max_write_size (MiB in the config)
  std::string source;                        // "mon" or "client defaults (...)"
};

class Cluster {
 public:
  using Logger = std::function<void(tier_log_level, const std::string&)>;

  // Creates the handle, reads the conf, applies our settings, connects (bounded by
  // op_timeout_s: a cluster that is down fails with one line naming mon_host), opens the pool and
  // sets `rados_namespace`, and asks the mon for the object limits. Any thread.
  static Result<std::unique_ptr<Cluster>> Connect(const RadosOptions& options,
                                                  const std::string& rados_namespace,
                                                  const Logger& log);
  ~Cluster();  // destroys the I/O context and shuts the client down

  rados_ioctx_t io() const { return io_; }
  rados_t handle() const { return cluster_; }
  const ClusterLimits& limits() const { return limits_; }
  const std::string& mon_host() const { return mon_host_; }
  const std::string& conf_path() const { return conf_path_; }

  // The value of a client config option ("" when unknown). Any thread.
  std::string ConfGet(const char* name) const;

 private:
  Cluster() = default;
  Status Configure(const RadosOptions& options);
  Status ReadLimits(const Logger& log);
  // `ceph config get osd NAME` through the mon; false when the mon refuses (caps) or fails.
  bool MonConfigGet(const std::string& name, std::string* value, std::string* error) const;

  rados_t cluster_ = nullptr;
  rados_ioctx_t io_ = nullptr;
  ClusterLimits limits_;
  std::string mon_host_;
  std::string conf_path_;
};

}  // namespace tier::rados
