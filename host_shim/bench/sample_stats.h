// sample_stats.h -- medians and percentiles of a handful of timings (nearest rank: with 3 rounds
// p99 is the slowest round, said so in the report).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace tier::bench {

// Nearest-rank percentile (p in (0, 100]) of `values`; 0 when empty.
double Percentile(std::vector<double> values, double p);
// The median (mean of the two middle values for an even count); 0 when empty.
double Median(std::vector<double> values);
// Median of a[i] / b[i] over the pairs where both exist and b[i] > 0; nullopt when none.
std::optional<double> MedianRatio(const std::vector<double>& a, const std::vector<double>& b);

// Bytes per second for `bytes` moved in each of `ns`, as GB/s (1e9 bytes per second).
std::vector<double> GigabytesPerSecond(uint64_t bytes, const std::vector<uint64_t>& ns);
std::vector<double> Milliseconds(const std::vector<uint64_t>& ns);

}  // namespace tier::bench
