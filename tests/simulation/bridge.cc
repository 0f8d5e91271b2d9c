// bridge.cc -- libtier_sim_bridge.so: the Host loads providers with dlopen, so the simulation's
// in-process provider (sim_provider.h, linked into the test) is reached through this module. Its
// entry point answers with the table whose address the test put in TIER_SIM_PROVIDER_TABLE (hex)
// before opening a Host; every call then goes straight to the test's code.
#include <cstdint>
#include <cstdlib>

#include "tier_provider.h"

extern "C" TIER_EXPORT tier_status tier_provider_entry(uint32_t major, uint32_t,
                                                       const tier_host_services*,
                                                       const tier_provider** out) {
  if (out == nullptr) return TIER_INVALID_ARGUMENT;
  const char* table = std::getenv("TIER_SIM_PROVIDER_TABLE");
  if (table == nullptr) return TIER_UNSUPPORTED;
  *out = reinterpret_cast<const tier_provider*>(std::strtoull(table, nullptr, 16));
  return major == TIER_ABI_VERSION_MAJOR ? TIER_OK : TIER_UNSUPPORTED;
}
