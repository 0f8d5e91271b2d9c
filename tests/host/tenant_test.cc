// HostTenant (issue 23): a tenant (AdmitRequest/SealRequest::tenant, vLLM's cache_salt) is part of
// the identity. Two tenants with identical prompts never hit each other's checkpoints: on disk
// across a restart, and through a second server probing a shared tier (the scripted provider's
// shared store). The rados suite runs the same check on a real pool (tests/rados).
#include <dlfcn.h>
#include <tier/host/identity.h>
#include <tier/host/plugin_loader.h>
#include <unistd.h>

#include <cmath>
#include <set>

#include "tenant_checks.h"
#include "test_support.h"

namespace tier::host::test {
namespace {

TEST(TenantBlocks, EmptyTenantIsTheIdentityAndTenantsNeverShareIds) {
  const std::vector<uint64_t> blocks = {1, 2, 3, 0, ~0ull};
  EXPECT_EQ(TenantBlocks("", blocks), blocks) << "untenanted checkpoints keep their keys";
  const auto a = TenantBlocks("alice", blocks), b = TenantBlocks("bob", blocks);
  std::set<uint64_t> ids(a.begin(), a.end());
  ids.insert(b.begin(), b.end());
  ids.insert(blocks.begin(), blocks.end());
  EXPECT_EQ(ids.size(), 3 * blocks.size()) << "distinct ids stay distinct, tenants apart";
  EXPECT_EQ(TenantBlocks("alice", blocks), a) << "pure";
  EXPECT_FALSE(SameKey(PrefixKey("ns", a), PrefixKey("ns", b)));
}

class HostTenant : public TenantTest {
 protected:
  int BobsOnDeviceAfterAlicesBurst(double share);
};

TEST_F(HostTenant, TwoTenantsWithTheSamePromptNeverMeetOnDiskAcrossARestart) {
  tier::test::ScopedTempDir dir;
  const ProviderOptions disk = {
      {"dir", dir.path() + "/cold"}, {"capacity_bytes", "67108864"}, {"chunk_kib", "64"}};
  CheckTenantsNeverMeet("disk", disk, false, nullptr);
}

TEST_F(HostTenant, TwoTenantsWithTheSamePromptNeverMeetThroughASharedTiersProbe) {
  // The scripted provider's shared store lives in the library: held loaded here so it outlives
  // every server of the test, as a shared tier does (a clang build unloads the library when the
  // last Host closes; GCC's unique symbols happened to keep it loaded).
  void* library = ::dlopen(tier::ResolvePluginPath("scripted").c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(library, nullptr) << ::dlerror();
  const std::string store = "tenants-" + std::to_string(::getpid());
  CheckTenantsNeverMeet("scripted", {{"store", store}}, true, nullptr);
  ::dlclose(library);
}

TEST_F(HostTenant, MetricsNameOnlyTheTenantsTheOperatorAllows) {
  Open("", {}, Bytes(4), Bytes(4), [](HostOptions& o) { o.metrics_tenants = {"alice"}; });
  for (const char* tenant : {"alice", "alice", "bob", "carol", ""}) {
    tenant_ = tenant;
    ASSERT_TRUE(Seal(Blocks(10, 1), 1));
    Admission a = AdmitAndWait(Blocks(10, 1), 2);
    ASSERT_EQ(a.state, AdmissionState::kReady) << tenant;
    Release(a);
  }
  EXPECT_EQ(Counter("tier_tenant_admissions_total{tenant=\"alice\"}"), 2);
  EXPECT_EQ(Counter("tier_tenant_admissions_total{tenant=\"other\"}"), 2) << "bob and carol";
  EXPECT_EQ(Counter("tier_tenant_admissions_total{tenant=\"none\"}"), 1);
  EXPECT_EQ(Counter("tier_tenant_seals_total{tenant=\"alice\"}"), 2);
  const std::string text = registry_.ExpositionText();
  EXPECT_EQ(text.find("bob"), std::string::npos) << "an unlisted tenant is never a label";
}

TEST_F(HostTenant, NoTenantSeriesUnlessTheOperatorAsks) {
  Open("", {}, Bytes(4), Bytes(4));
  tenant_ = "alice";
  ASSERT_TRUE(Seal(Blocks(10, 1), 1));
  EXPECT_EQ(registry_.ExpositionText().find("tier_tenant_"), std::string::npos);
}

// HostOptions::tenant_share: Device holds 4 checkpoints, Host 1, no Cold. bob seals 2, then alice
// a burst of 6 newer ones. Returns how many of bob's stay on Device.
int HostTenant::BobsOnDeviceAfterAlicesBurst(double share) {
  std::vector<std::vector<uint64_t>> bobs, alices;
  tenant_ = "bob";
  for (uint64_t i = 0; i < 2; ++i) {
    bobs.push_back(Blocks(100 + 10 * i, 1));
    EXPECT_TRUE(Seal(bobs.back(), 1 + i));
  }
  tenant_ = "alice";
  for (uint64_t i = 0; i < 6; ++i) {
    alices.push_back(Blocks(1000 + 10 * i, 1));
    EXPECT_TRUE(Seal(alices.back(), 3 + i));
  }
  int alices_on_device = 0;
  for (const auto& blocks : alices) alices_on_device += (PlacementsOf(blocks) & kD) != 0;
  if (share > 0) {
    EXPECT_EQ(alices_on_device, 2) << "alice keeps her share of Device: 2 of 4";
  }
  tenant_ = "bob";
  int bobs_on_device = 0;
  for (const auto& blocks : bobs) bobs_on_device += (PlacementsOf(blocks) & kD) != 0;
  return bobs_on_device;
}

TEST_F(HostTenant, ABurstOfOneTenantTakesFromItsOwnCheckpointsFirst) {
  Open("", {}, 4 * Bytes(1), Bytes(1), [](HostOptions& o) { o.tenant_share = 0.5; });
  EXPECT_EQ(BobsOnDeviceAfterAlicesBurst(0.5), 2)
      << "alice's burst pushed bob's checkpoints off Device although she held over her share";
}

TEST_F(HostTenant, WithoutATenantShareTheBurstTakesTheOldestWhoeverHoldsThem) {
  // The control of the test above: the same calls, value order alone.
  Open("", {}, 4 * Bytes(1), Bytes(1));
  EXPECT_EQ(BobsOnDeviceAfterAlicesBurst(0), 0);
}

TEST_F(HostTenant, TenantShareOutsideZeroToOneIsRefusedNamingIt) {
  for (double bad : {-0.1, 1.5, std::nan("")}) {
    auto opened = TryOpen("", {}, [&](HostOptions& o) { o.tenant_share = bad; });
    ASSERT_FALSE(opened.ok()) << bad;
    EXPECT_EQ(opened.status().code(), TIER_INVALID_ARGUMENT);
    EXPECT_NE(opened.status().message().find("tenant_share"), std::string::npos)
        << opened.status().message();
  }
}

}  // namespace
}  // namespace tier::host::test
