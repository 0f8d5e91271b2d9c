// tenant_checks.h -- the cross-tenant check (issue 23) shared by the disk suite (HostTenant) and
// the rados one (RadosTenant): two tenants seal and ask for identical prompts on one cold tier;
// neither is ever served the other's checkpoint (nor is a request without a tenant), through a
// second server that finds checkpoints by probing a shared tier, and after a restart that
// re-adopts what the tier kept.
#pragma once

#include "host_fixture.h"

namespace tier::host::test {

class TenantTest : public HostTest {
 protected:
  // Runs the whole check on `plugin` with `options` (a persistent cold tier; `shared`: one that
  // a second server sees at once, so the probe path is checked too). `tweak` applies to every
  // Open (e.g. a namespace unique to the run).
  void CheckTenantsNeverMeet(const std::string& plugin, const ProviderOptions& options, bool shared,
                             const std::function<void(HostOptions&)>& tweak);

 private:
  // `tenant_` asks for `prompt`: nothing is found (a root prefill, no checkpoint).
  void ExpectMiss(const std::vector<uint64_t>& prompt, uint64_t now_s);
  // `tenant_` asks for `prompt`: its own checkpoint, restored byte-exact. Returns its key.
  tier_key ExpectOwnHit(const std::vector<uint64_t>& prompt, uint64_t now_s);
};

}  // namespace tier::host::test
