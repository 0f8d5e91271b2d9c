#include "sample_stats.h"

#include <algorithm>
#include <cmath>

namespace tier::bench {

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(values.size()));
  const size_t index = static_cast<size_t>(std::clamp(rank, 1.0, double(values.size()))) - 1;
  return values[index];
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::optional<double> MedianRatio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> ratios;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (b[i] > 0) ratios.push_back(a[i] / b[i]);
  }
  if (ratios.empty()) return std::nullopt;
  return Median(ratios);
}

std::vector<double> GigabytesPerSecond(uint64_t bytes, const std::vector<uint64_t>& ns) {
  std::vector<double> out;
  for (uint64_t t : ns)
    out.push_back(t > 0 ? static_cast<double>(bytes) / static_cast<double>(t) : 0);
  return out;
}

std::vector<double> Milliseconds(const std::vector<uint64_t>& ns) {
  std::vector<double> out;
  for (uint64_t t : ns) out.push_back(static_cast<double>(t) / 1e6);
  return out;
}

}  // namespace tier::bench
