// stability_test.cc -- ReplayStability: an overloaded replay is flagged with its offered
// utilization, a stretched one is not; --trace-time-scale auto's factor (AutoTimeScale) is above
// 1 for an overloaded trace and 1 for a light one; closed loops are judged per session.
#include <tier/device/cpu_transfer_engine.h>

#include "host_fixture.h"
#include "offered_load.h"
#include "replay.h"
#include "workload.h"

namespace tier::host::test {
namespace {

// `count` requests of 2048 prompt tokens (4 blocks, the first two shared) and 50 output tokens,
// one every `gap_ms`. With TinyProfile a request takes ~73 ms of a lane (23 ms prefill, 50 ms
// decode).
sim::Workload Trace(size_t count, uint64_t gap_ms) {
  sim::Workload w;
  w.name = "synthetic";
  for (size_t i = 0; i < count; ++i) {
    sim::Request r;
    r.arrival_ns = i * gap_ms * 1000000;
    r.input_tokens = 2048;
    r.output_tokens = 50;
    r.blocks = {1, 2, 1000 + i, 2000 + i};
    r.seal_blocks = r.blocks;
    w.requests.push_back(r);
  }
  return w;
}

// A replay through its own Host over the null provider (Device and Host only).
sim::ReplayReport Replay(const sim::Workload& w) {
  const ModelProfile profile = TinyProfile();
  auto engine = device::MakeCpuTransferEngine({});
  EXPECT_TRUE(engine.ok());
  std::shared_ptr<device::TransferEngine> shared(std::move(engine).value());
  auto pool = sim::KvPool::Create(shared.get(), profile, 1, 4096);
  EXPECT_TRUE(pool.ok());
  HostOptions o;
  o.plugin = "null";
  o.namespace_id = "stability-test";
  o.profile = profile;
  o.pool = pool.value()->view();
  o.engine = shared;
  o.device_capacity_bytes = 4 << 20;
  o.host_capacity_bytes = 8 << 20;
  auto host = Host::Open(std::move(o));
  EXPECT_TRUE(host.ok()) << host.status().ToString();
  sim::ReplayOptions options;
  options.progress = false;
  options.prefetch_lead_s = 0;
  CostModel cost(profile);
  sim::ReplayReport report =
      sim::RunReplay(w, *host.value(), *pool.value(), cost, nullptr, options);
  host.value().reset();
  return report;
}

TEST(ReplayStability, AnOverloadedTraceIsFlaggedWithItsOfferedUtilization) {
  const sim::Workload w = Trace(200, 5);  // ~73 ms of work every 5 ms on 2 lanes
  const sim::ReplayReport r = Replay(w);
  EXPECT_EQ(r.completed, 200u);
  EXPECT_TRUE(r.unstable);
  EXPECT_GT(r.offered_utilization, 1.0);
  EXPECT_NE(r.unstable_reason.find("offered load"), std::string::npos) << r.unstable_reason;
  EXPECT_TRUE(r.queue_grew) << "first quarter " << r.queue_first_quarter_s << " s, last "
                            << r.queue_last_quarter_s << " s";
  EXPECT_GT(r.queue_last_quarter_s, r.queue_first_quarter_s);
}

TEST(ReplayStability, TheAutoStretchMakesItStable) {
  sim::Workload w = Trace(200, 5);
  const CostModel cost(TinyProfile());
  const sim::OfferedLoad load = sim::EstimateOfferedLoad(w, cost, 2);
  EXPECT_FALSE(load.closed_loop);
  EXPECT_GT(load.utilization, 1.0);
  const double factor = sim::AutoTimeScale(load, 0.7);
  EXPECT_GT(factor, 1.0);
  EXPECT_NEAR(load.utilization / factor, 0.7, 1e-9);
  ASSERT_TRUE(sim::StretchArrivals(&w, factor).ok());
  EXPECT_NEAR(sim::EstimateOfferedLoad(w, cost, 2).utilization, 0.7, 1e-6);
  const sim::ReplayReport r = Replay(w);
  EXPECT_FALSE(r.unstable) << r.unstable_reason;
  EXPECT_LT(r.offered_utilization, 1.0);
  EXPECT_FALSE(r.queue_grew);
}

TEST(ReplayStability, ALightTraceKeepsItsOwnTimes) {
  const sim::Workload w = Trace(50, 1000);  // 73 ms of work a second
  const sim::OfferedLoad load = sim::EstimateOfferedLoad(w, CostModel(TinyProfile()), 2);
  EXPECT_LT(load.utilization, 0.1);
  EXPECT_DOUBLE_EQ(sim::AutoTimeScale(load, 0.7), 1.0);
  EXPECT_FALSE(Replay(w).unstable);
}

TEST(ReplayStability, StretchingPastTheClockIsRefused) {
  sim::Workload w = Trace(2, 1000);
  w.requests[1].arrival_ns = uint64_t{1} << 61;
  const Status s = sim::StretchArrivals(&w, 4);
  EXPECT_EQ(s.code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(s.message().find("--trace-time-scale"), std::string::npos);
}

TEST(ReplayStability, ClosedLoopsAreJudgedPerSession) {
  // Agent sessions, all starting within a second: a turn waits for the previous answer plus a
  // think time. Short thinks on few lanes saturate them; long thinks do not. Closed loops are
  // never stretched.
  sim::AgentsWorkloadOptions busy;
  busy.sessions = 12;
  busy.session_start_spread_s = 1;
  busy.mean_think_s = 0.05;
  busy.min_history_tokens = 20000;
  busy.max_history_tokens = 30000;
  sim::AgentsWorkloadOptions idle = busy;
  idle.mean_think_s = 1000;
  const CostModel cost(TinyProfile());
  const sim::OfferedLoad hot = sim::EstimateOfferedLoad(sim::GenerateAgentsWorkload(busy), cost, 2);
  const sim::OfferedLoad cool =
      sim::EstimateOfferedLoad(sim::GenerateAgentsWorkload(idle), cost, 2);
  EXPECT_TRUE(hot.closed_loop);
  EXPECT_GT(hot.utilization, 1.0);
  EXPECT_LT(cool.utilization, 0.1);
  EXPECT_DOUBLE_EQ(sim::AutoTimeScale(hot, 0.7), 1.0);
}

}  // namespace
}  // namespace tier::host::test
