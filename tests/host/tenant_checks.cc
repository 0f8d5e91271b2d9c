#include "tenant_checks.h"

#include <tier/host/identity.h>

namespace tier::host::test {

void TenantTest::ExpectMiss(const std::vector<uint64_t>& prompt, uint64_t now_s) {
  EXPECT_FALSE(Info(prompt).has_value()) << "tenant '" << tenant_ << "' sees another's entry";
  const Admission a = AdmitAndWait(prompt, now_s);
  EXPECT_EQ(a.state, AdmissionState::kRoot) << "tenant '" << tenant_ << "' was served";
  EXPECT_EQ(a.root_reason, RootReason::kNoCheckpoint);
  EXPECT_EQ(a.cached_tokens, 0u);
}

tier_key TenantTest::ExpectOwnHit(const std::vector<uint64_t>& prompt, uint64_t now_s) {
  const uint64_t mismatched_before = mismatched_;
  const Admission a = AdmitAndWait(prompt, now_s);
  EXPECT_EQ(a.state, AdmissionState::kReady) << "tenant '" << tenant_ << "' lost its checkpoint";
  EXPECT_EQ(a.cached_tokens, 512u * prompt.size());
  EXPECT_EQ(mismatched_, mismatched_before) << "the bytes (and the state, bound to the tenant's "
                                               "key) are the tenant's own";
  if (a.state == AdmissionState::kReady) Release(a);
  return a.key;
}

void TenantTest::CheckTenantsNeverMeet(const std::string& plugin, const ProviderOptions& options,
                                       bool shared,
                                       const std::function<void(HostOptions&)>& tweak) {
  const uint64_t budget = Bytes(1) * 3 / 2;
  const auto prompt = Blocks(10, 2);  // the same prompt for every tenant
  std::unique_ptr<Host> server_b;
  if (shared) {  // a second server, open before anything is sealed: it can only probe
    Open(plugin, options, budget, budget, [&](HostOptions& o) {
      if (tweak) tweak(o);
      o.metrics = nullptr;
    });
    server_b = std::move(host_);
  }
  Open(plugin, options, budget, budget, tweak);
  tenant_ = "alice";
  SealAndPushToCold(prompt);
  for (const char* other : {"bob", ""}) {
    tenant_ = other;
    ExpectMiss(prompt, 10);
    ExpectMiss({prompt[0]}, 10);  // nor a prefix of it
  }
  if (shared) {
    std::unique_ptr<Host> server_a = std::move(host_);
    host_ = std::move(server_b);
    ended_.clear();  // admission ids are per Host
    tenant_ = "bob";
    ExpectMiss(prompt, 11);
    tenant_ = "alice";
    ExpectOwnHit(prompt, 11);
    EXPECT_GE(host_->Stats().remote_hits, 1u) << "found by probing the shared tier";
    host_.reset();
    host_ = std::move(server_a);
  }
  host_.reset();  // the server stops; the cold tier keeps what it holds
  ended_.clear();
  Open(plugin, options, budget, budget, tweak);
  EXPECT_GE(host_->Stats().readopted, 1u);
  for (const char* other : {"bob", ""}) {
    tenant_ = other;
    ExpectMiss(prompt, 20);
  }
  tenant_ = "alice";
  const tier_key alice = ExpectOwnHit(prompt, 21);
  // Bob seals the same prompt: a checkpoint of his own, not "already sealed".
  tenant_ = "bob";
  const Sealed sealed = SealNow(prompt, 22);
  EXPECT_TRUE(sealed.status.ok()) << sealed.status.ToString();
  EXPECT_FALSE(sealed.existed) << "bob's seal found alice's checkpoint";
  Settle();
  const tier_key bob = ExpectOwnHit(prompt, 23);
  EXPECT_FALSE(SameKey(alice, bob));
  tenant_ = "alice";
  EXPECT_TRUE(SameKey(ExpectOwnHit(prompt, 24), alice));
}

}  // namespace tier::host::test
