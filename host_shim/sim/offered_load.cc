#include "offered_load.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace tier::sim {
namespace {

constexpr double kMaxArrivalNs = 4611686018427387904.0;  // 2^62, as the trace loader

}  // namespace

OfferedLoad EstimateOfferedLoad(const Workload& workload, const CostModel& cost, uint32_t lanes) {
  OfferedLoad load;
  load.lanes = std::max<uint32_t>(1, lanes);
  uint64_t first = UINT64_MAX, last = 0;
  std::vector<size_t> head(workload.requests.size());
  std::map<size_t, std::pair<double, double>> sessions;  // head -> (work s, think s)
  for (size_t i = 0; i < workload.requests.size(); ++i) {
    const Request& r = workload.requests[i];
    const double work_s =
        static_cast<double>(cost.RootPrefillNs(r.input_tokens) + cost.DecodeNs(r.output_tokens)) /
        1e9;
    load.work_s += work_s;
    head[i] = r.after ? head[*r.after] : i;
    load.closed_loop = load.closed_loop || r.after.has_value();
    sessions[head[i]].first += work_s;
    sessions[head[i]].second += static_cast<double>(r.think_ns) / 1e9;
    if (!r.after) {
      first = std::min(first, r.arrival_ns);
      last = std::max(last, r.arrival_ns);
    }
  }
  if (workload.requests.empty()) return load;
  load.span_s = first <= last ? static_cast<double>(last - first) / 1e9 : 0;
  if (load.closed_loop) {
    double demand = 0;
    for (const auto& [h, s] : sessions) demand += s.first / std::max(1e-9, s.first + s.second);
    load.utilization = demand / load.lanes;
  } else {
    load.utilization = load.work_s / (load.lanes * std::max(load.span_s, 1e-9));
  }
  return load;
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
                  "on %u lanes: utilization %.2f",
                  load.work_s, load.lanes, load.utilization);
  } else {
    std::snprintf(text, sizeof(text),
                  "offered work %.0f s (root prefill + decode, no reuse) over %.0f s of "
                  "arrivals on %u lanes: utilization %.2f",
                  load.work_s, load.span_s, load.lanes, load.utilization);
  }
  return text;
}

}  // namespace tier::sim
