// restore_probe.h -- tier-host replay --restore-cost measured at --bytes-scale N > 1: the restore
// rate of this provider measured on full-size checkpoints, so a scaled-down restore is charged
// what the same checkpoint would cost at full size (not its wall time x N, which charges the
// fixed latency of small I/O N times).
#pragma once

#include <tier/host/provider_instance.h>
#include <tier/status.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tier {

struct RestoreProbeSample {
  uint64_t bytes = 0;       // the synthetic checkpoint's size (logical = stored)
  uint64_t restore_ns = 0;  // the provider's restore wall time
};

struct RestoreProbe {
  std::vector<RestoreProbeSample> samples;
  // restore_ns ~ fixed_ns + bytes / bytes_per_second (least squares over the samples; fixed_ns
  // 0 and the overall rate when the fit is not positive).
  double bytes_per_second = 0;
  uint64_t fixed_ns = 0;
  std::string namespace_id;  // the scratch namespace the probe used (emptied after)
  // The charge at `bytes` logical bytes.
  uint64_t ChargeNs(uint64_t bytes) const;
};

// Opens `plugin` with `options` (its capacity_bytes raised to hold the largest sample) over
// `namespace_id`, spills, restores and removes one synthetic checkpoint per size in
// `sample_bytes` (a restore reads into the buffer the spill wrote from: memory is the largest
// size), closes the instance and fits the rate. The instance is closed before it returns (a
// disk provider's directory lock is free again). Main thread.
Result<RestoreProbe> ProbeRestores(const std::string& plugin, ProviderOptions options,
                                   const std::string& namespace_id,
                                   const std::vector<uint64_t>& sample_bytes, uint64_t timeout_ns);

}  // namespace tier
