// estimator.h -- restore-time estimate for plan_restore: stored bytes over a moving average of the
// measured read bandwidth, plus zstd decompression over the codec threads, plus a fixed per-restore
// overhead. Seeded at open by a short read probe and a decompression probe. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>

namespace tier::disk {

class RestoreEstimator {
 public:
  // Seeds: read bandwidth from the open probe, single-thread decompression speed, codec threads.
  RestoreEstimator(double read_bytes_per_second, double decompress_bytes_per_second,
                   uint32_t codec_threads);

  // Estimated nanoseconds to restore a checkpoint occupying `stored_bytes`, of which
  // `zstd_logical_bytes` logical bytes must be decompressed. Any thread.
  uint64_t EstimateNs(uint64_t stored_bytes, uint64_t zstd_logical_bytes) const;

  // Feeds one successful restore: its stored bytes, wall time, and the decompression CPU time it
  // spent (summed over codec threads) on `zstd_logical_bytes`. Restores under 1 MiB are ignored
  // for bandwidth (latency-dominated). Any thread.
  void Observe(uint64_t stored_bytes, uint64_t duration_ns, uint64_t zstd_logical_bytes,
               uint64_t decompress_cpu_ns);

  // Feeds the logical throughput (logical bytes over wall time) of one successful restore of at
  // least kMinThroughputObservation bytes, into the average of compressed restores (it
  // decompressed at least that much) or of raw ones (it decompressed nothing): what compression
  // really costs here, CPU contention included, against the same measure without it. Any thread.
  void ObserveRestoreThroughput(uint64_t logical_bytes, uint64_t zstd_logical_bytes,
                                uint64_t duration_ns);

  double read_bytes_per_second() const;
  double decompress_bytes_per_second() const;
  // Moving averages of ObserveRestoreThroughput's compressed and raw restores; 0 before the first.
  double compressed_restore_bytes_per_second() const;
  double raw_restore_bytes_per_second() const;

  static constexpr uint64_t kMinThroughputObservation = 32ull << 20;

  static constexpr uint64_t kFixedOverheadNs = 500'000;  // open, header read, scheduling
  static constexpr double kAlpha = 0.25;                 // EWMA weight of a new observation

 private:
  mutable std::mutex mu_;
  double read_bytes_per_second_;
  double decompress_bytes_per_second_;  // per codec thread
  double compressed_restore_bytes_per_second_ = 0;
  double raw_restore_bytes_per_second_ = 0;
  const uint32_t codec_threads_;
};

}  // namespace tier::disk
