// RadosTenant (issue 23): the cross-tenant check of tests/host/tenant_checks.h on a real pool:
// two tenants with identical prompts never hit each other's checkpoints, through a second server
// that probes the pool and after a restart that re-adopts what the pool kept.
#include "rados_test_env.h"
#include "tenant_checks.h"

namespace tier::host::test {
namespace {

class RadosTenant : public TenantTest {};

TEST_F(RadosTenant, TwoTenantsWithTheSamePromptNeverMeetOnAPoolAcrossARestart) {
  tier::rados::test::ClusterInfo c;
  RADOS_REQUIRE_CLUSTER(c);
  namespace_id_ = tier::rados::test::UniqueNamespace("tenant");
  CheckTenantsNeverMeet(TIER_RADOS_PLUGIN_PATH, tier::rados::test::Options(c), true, nullptr);
}

}  // namespace
}  // namespace tier::host::test
