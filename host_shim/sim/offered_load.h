// offered_load.h -- how much of the lanes a workload asks for before it is replayed, and the
// stretch of a trace's arrivals that keeps the lanes below saturation (--trace-time-scale auto).
#pragma once

#include <tier/host/cost_model.h>
#include <tier/status.h>

#include <cstdint>
#include <string>

#include "workload.h"

namespace tier::sim {

struct OfferedLoad {
  double work_s = 0;  // root prefill + decode of every request (no reuse assumed)
  double span_s = 0;  // open loop: first to last arrival
  uint32_t lanes = 1;
  bool closed_loop = false;  // some request waits for another's completion (agents)
  // work / (lanes x span). Open loop: the span from the first arrival to the last. Closed loop:
  // from the first session's start to the end of the longest, each session taking at least its
  // work plus its think times. With the cost model's work, an upper bound of what the replay
  // sees: reuse only lowers the work.
  double utilization = 0;
};

// The load of `workload` when request i takes `lane_s[i]` seconds of a lane (requests with a
// negative lane_s were not served: left out). Pure; any thread.
OfferedLoad MeasureOfferedLoad(const Workload& workload, const std::vector<double>& lane_s,
                               uint32_t lanes);
// The same with each request's root prefill + decode at the cost model. Pure; any thread.
OfferedLoad EstimateOfferedLoad(const Workload& workload, const CostModel& cost, uint32_t lanes);

// The factor that brings an open-loop workload's estimated utilization to `target` (0 < target
// < 1): utilization / target when above it, else 1 (a light trace keeps its own times). Closed
// loops are not stretched (1). Pure.
double AutoTimeScale(const OfferedLoad& load, double target_utilization);

// Multiplies every arrival by `factor` (> 0). INVALID_ARGUMENT when an arrival would leave the
// replay clock's 2^62 ns. Caller's thread.
Status StretchArrivals(Workload* workload, double factor);

// One line for people: "offered work 24599 s (root prefill + decode, no reuse) over 1022 s of
// arrivals on 2 lanes: utilization 12.03".
std::string DescribeOfferedLoad(const OfferedLoad& load);

}  // namespace tier::sim
