// load_run.h -- tier-bench's load mode (--concurrent-restores N --concurrent-spills M): a server's
// mix, N restores and M spills in flight at once through one provider, against fio running the
// same mix (N read jobs and M write jobs at the provider's queue depth) in the same rounds. Per
// round: a solo restore (the baseline), the mix, N restores alone and M spills alone (each timed
// with getrusage for CPU per GB), then fio's mix and fio's N readers alone.
#pragma once

#include <cstdint>
#include <ostream>

#include <nlohmann/json.hpp>

#include <tier/status.h>
#include "bench_config.h"

namespace tier::bench {

struct LoadConfig {
  uint32_t restores = 4;  // --concurrent-restores
  uint32_t spills = 2;    // --concurrent-spills
  // --dirs: the provider over this many directories (dirs=ours0,ours1,...), fio's jobs spread
  // over as many directories of its own (--directory=fio0:fio1:..., job clones assigned in turn).
  uint32_t dirs = 1;
};

// Runs the load mode and prints its figures to `out`; `*json` gets the same figures. The data kind
// is the first of --kinds; compression and the I/O path come from --tier-opt.
Status RunLoad(const BenchConfig& config, const LoadConfig& load, std::ostream& progress,
               std::ostream& out, nlohmann::json* json);

}  // namespace tier::bench
