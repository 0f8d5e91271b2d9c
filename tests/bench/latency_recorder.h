// latency_recorder.h -- per-call latencies inside a Google Benchmark loop, reported as p50/p99
// counters (Google Benchmark itself reports means).
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace tier::bench {

class LatencyRecorder {
 public:
  explicit LatencyRecorder(size_t expected) { ns_.reserve(expected); }
  void Add(std::chrono::steady_clock::duration d) {
    ns_.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  }
  // Sets counters p50_us, p99_us and max_us on `state`.
  void Report(benchmark::State& state) {
    if (ns_.empty()) return;
    std::sort(ns_.begin(), ns_.end());
    auto at = [&](double p) {
      const size_t i = std::min(ns_.size() - 1, static_cast<size_t>(p * double(ns_.size())));
      return double(ns_[i]) / 1e3;
    };
    state.counters["p50_us"] = at(0.50);
    state.counters["p99_us"] = at(0.99);
    state.counters["max_us"] = double(ns_.back()) / 1e3;
  }

 private:
  std::vector<int64_t> ns_;
};

}  // namespace tier::bench
