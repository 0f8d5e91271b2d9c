// leaky_provider.cc -- linked into the reference provider to prove check-provider-symbols.sh
// catches a provider that carries host code (ProviderSymbols.Catches...): a function in
// tier::host, kept though nothing calls it, and (in the exporting variant) a second exported
// symbol.
#include "tier_provider.h"

namespace tier::host {

__attribute__((used)) int LeakedHostFunction(int x) {
  return x * 3 + 1;
}

}  // namespace tier::host

#if defined(LEAKY_EXPORTS_MORE)
extern "C" TIER_EXPORT int leaky_second_export(int x) {
  return tier::host::LeakedHostFunction(x);
}
#endif
