#include "offered_load.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include <tier/check.h>

namespace tier::sim {
namespace {

constexpr double kMaxArrivalNs = 4611686018427387904.0;  // 2^62, as the trace loader

}  // namespace

OfferedLoad MeasureOfferedLoad(const Workload& workload, const std::vector<double>& lane_s,
                               uint32_t lanes) {
  TIER_CHECK(lane_s.size() == workload.requests.size());
  OfferedLoad load;
  load.lanes = std::max<uint32_t>(1, lanes);
  double first_s = INFINITY, last_s = 0;
  std::vector<size_t> head(workload.requests.size());
  std::map<size_t, double> session_s;  // head -> work + think (a closed loop's least duration)
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    const Request& r = workload.requests[i];
    head[i] = r.after ? head[*r.after] : i;
    load.closed_loop = load.closed_loop || r.after.has_value();
    if (lane_s[i] < 0) continue;
    load.work_s += lane_s[i];
    session_s[head[i]] += lane_s[i] + static_cast<double>(r.think_ns) / 1e9;
  }
  for (const auto& [h, duration_s] : session_s) {
    const double start_s = static_cast<double>(workload.requests[h].arrival_ns) / 1e9;
    first_s = std::min(first_s, start_s);
    last_s = std::max(last_s, load.closed_loop ? start_s + duration_s : start_s);
  }
  if (session_s.empty()) return load;
  load.span_s = last_s - first_s;
  load.utilization = load.work_s / (load.lanes * std::max(load.span_s, 1e-9));
  return load;
}

OfferedLoad EstimateOfferedLoad(const Workload& workload, const CostModel& cost, uint32_t lanes) {
  std::vector<double> lane_s;
  for (const Request& r : workload.requests) {
    lane_s.push_back(
        static_cast<double>(cost.RootPrefillNs(r.input_tokens) + cost.DecodeNs(r.output_tokens)) /
        1e9);
  }
  return MeasureOfferedLoad(workload, lane_s, lanes);
}

double AutoTimeScale(const OfferedLoad& load, double target_utilization) {
  if (load.closed_loop || !(target_utilization > 0) || load.utilization <= target_utilization) {
    return 1;
  }
  return load.utilization / target_utilization;
}

Status StretchArrivals(Workload* workload, double factor) {
  if (!(factor > 0) || !std::isfinite(factor)) {
    return Status::InvalidArgument("arrival stretch must be a finite number > 0");
  }
  for (const Request& r : workload->requests) {
    if (!(static_cast<double>(r.arrival_ns) * factor <= kMaxArrivalNs)) {
      return Status::InvalidArgument(
          "stretching the arrivals by " + std::to_string(factor) +
          " takes them past 2^62 ns of the replay clock (--trace-time-scale)");
    }
  }
  for (Request& r : workload->requests) {
    r.arrival_ns = static_cast<uint64_t>(static_cast<double>(r.arrival_ns) * factor);
  }
  return Status::Ok();
}

std::string DescribeOfferedLoad(const OfferedLoad& load) {
  char text[256];
  if (load.closed_loop) {
    std::snprintf(text, sizeof(text),
                  "offered work %.0f s (root prefill + decode, no reuse) in closed-loop sessions "
                  "spanning at least %.0f s on %u lanes: utilization %.2f",
                  load.work_s, load.span_s, load.lanes, load.utilization);
  } else {
    std::snprintf(text, sizeof(text),
                  "offered work %.0f s (root prefill + decode, no reuse) over %.0f s of "
                  "arrivals on %u lanes: utilization %.2f",
                  load.work_s, load.span_s, load.lanes, load.utilization);
  }
  return text;
}

}  // namespace tier::sim
