// check.h -- `tier-host --check`: drive one provider instance through every ABI operation once.
// A smoke subset of tier-conformance's rule table (abi/README.md): one operation at a time, each
// waited for, nothing held in flight, no timing compared, so a correct provider always passes it;
// what it does not cover (in flight, concurrency, probe, sizes, capabilities) is the kit's.
#pragma once

#include <ostream>

#include <tier/host/provider_instance.h>

namespace tier {

// Spills, stats, plans, restores (byte-exact), enumerates and removes one small multi-segment
// checkpoint; a provider with capacity 0 must instead decline every step cleanly. Writes one line
// per step to `out`. Returns true when the provider behaved as it claims. Caller's thread.
bool RunProviderCheck(ProviderInstance& instance, std::ostream& out, uint64_t timeout_ns);

}  // namespace tier
