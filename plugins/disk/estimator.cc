#include "estimator.h"

#include <algorithm>

namespace tier::disk {
namespace {
constexpr double kMinBps = 1e6, kMaxBps = 1e11;
}

RestoreEstimator::RestoreEstimator(double read_bytes_per_second, double decompress_bytes_per_second,
                                   uint32_t codec_threads)
    : read_bytes_per_second_(std::clamp(read_bytes_per_second, kMinBps, kMaxBps)),
      decompress_bytes_per_second_(std::clamp(decompress_bytes_per_second, kMinBps, kMaxBps)),
      codec_threads_(std::max<uint32_t>(codec_threads, 1)) {}

uint64_t RestoreEstimator::EstimateNs(uint64_t stored_bytes, uint64_t zstd_logical_bytes) const {
  std::lock_guard lock(mu_);
  const double io_seconds = static_cast<double>(stored_bytes) / read_bytes_per_second_;
  const double codec_seconds =
      static_cast<double>(zstd_logical_bytes) / (decompress_bytes_per_second_ * codec_threads_);
  const double ns = (io_seconds + codec_seconds) * 1e9 + kFixedOverheadNs;
  return ns >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(ns);
}

void RestoreEstimator::Observe(uint64_t stored_bytes, uint64_t duration_ns,
                               uint64_t zstd_logical_bytes, uint64_t decompress_cpu_ns) {
  std::lock_guard lock(mu_);
  if (zstd_logical_bytes >= (1u << 20) && decompress_cpu_ns > 0) {
    const double observed_bytes_per_second =
        zstd_logical_bytes * 1e9 / static_cast<double>(decompress_cpu_ns);
    decompress_bytes_per_second_ =
        std::clamp((1 - kAlpha) * decompress_bytes_per_second_ + kAlpha * observed_bytes_per_second,
                   kMinBps, kMaxBps);
  }
  if (stored_bytes < (1u << 20)) return;
  // Attribute to I/O what decompression (spread over the codec threads) did not take.
  const double codec_wall_ns = static_cast<double>(decompress_cpu_ns) / codec_threads_;
  const double io_ns = std::max(static_cast<double>(duration_ns) - codec_wall_ns,
                                static_cast<double>(duration_ns) * 0.1);
  if (io_ns <= 0) return;
  const double observed_bytes_per_second = stored_bytes * 1e9 / io_ns;
  read_bytes_per_second_ = std::clamp(
      (1 - kAlpha) * read_bytes_per_second_ + kAlpha * observed_bytes_per_second, kMinBps, kMaxBps);
}

void RestoreEstimator::ObserveRestoreThroughput(uint64_t logical_bytes, uint64_t zstd_logical_bytes,
                                                uint64_t duration_ns) {
  if (logical_bytes < kMinThroughputObservation || duration_ns == 0) return;
  double* average = zstd_logical_bytes >= kMinThroughputObservation
                        ? &compressed_restore_bytes_per_second_
                    : zstd_logical_bytes == 0 ? &raw_restore_bytes_per_second_
                                              : nullptr;
  if (average == nullptr) return;  // a little of both: says nothing clear
  const double observed_bytes_per_second = logical_bytes * 1e9 / static_cast<double>(duration_ns);
  std::lock_guard lock(mu_);
  *average = *average == 0
                 ? observed_bytes_per_second
                 : std::clamp((1 - kAlpha) * *average + kAlpha * observed_bytes_per_second, kMinBps,
                              kMaxBps);
}

double RestoreEstimator::compressed_restore_bytes_per_second() const {
  std::lock_guard lock(mu_);
  return compressed_restore_bytes_per_second_;
}

double RestoreEstimator::raw_restore_bytes_per_second() const {
  std::lock_guard lock(mu_);
  return raw_restore_bytes_per_second_;
}

double RestoreEstimator::read_bytes_per_second() const {
  std::lock_guard lock(mu_);
  return read_bytes_per_second_;
}

double RestoreEstimator::decompress_bytes_per_second() const {
  std::lock_guard lock(mu_);
  return decompress_bytes_per_second_;
}

}  // namespace tier::disk
