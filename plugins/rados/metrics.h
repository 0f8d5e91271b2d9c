// metrics.h -- the rados provider's metric series: the shared cold-tier families
// (tier::provider::ColdMetrics) with its one I/O path, librados. Thread-safe; a no-op when the
// host gave no metrics.
#pragma once

#include <tier/provider/cold_metrics.h>

namespace tier::rados {

using provider::DataLossWhere;

class RadosMetrics : public provider::ColdMetrics {
 public:
  // Registers every family and series. `host` must outlive this object. Any thread, once.
  explicit RadosMetrics(const tier_host_services* host)
      : ColdMetrics(host, "rados", {TIER_IO_PATH_LIBRADOS}) {
    SetIoPath(TIER_IO_PATH_LIBRADOS);  // the only path this provider has
  }
};

}  // namespace tier::rados
