#include "compression_policy.h"

#include <sched.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "codec.h"

namespace tier::disk {
namespace {

constexpr uint64_t kSampleBytes = 64 << 10;

// Sample windows of a segment, 4-byte aligned so byte planes line up as in whole chunks.
std::vector<std::span<const uint8_t>> Samples(std::span<const uint8_t> segment) {
  if (segment.size() <= 3 * kSampleBytes) return {segment};
  const uint64_t middle = (segment.size() / 2 - kSampleBytes / 2) & ~uint64_t{3};
  const uint64_t last = (segment.size() - kSampleBytes) & ~uint64_t{3};
  return {segment.subspan(0, kSampleBytes), segment.subspan(middle, kSampleBytes),
          segment.subspan(last, kSampleBytes)};
}

// Raw restore throughput: measured (logical bytes over wall time of raw restores), else the read
// bandwidth estimate.
double RawRestoreBytesPerSecond(const RestoreEstimator& estimator) {
  const double seen = estimator.raw_restore_bytes_per_second();
  return seen > 0 ? seen : estimator.read_bytes_per_second();
}

// Rule 2: the single-thread decompression speed a segment's codec needs for the codec threads
// that can run at once (min(codec_threads, CPUs this process may use)) to keep up with raw reads.
double MinDecompressBytesPerSecond(const DiskOptions& options, const RestoreEstimator& estimator) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const int usable = sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  const double threads = std::max(1.0, std::min<double>(options.codec_threads, usable));
  return RawRestoreBytesPerSecond(estimator) / threads;
}

// Rule 3: whether the compressed restores timed so far were slower than the raw ones.
bool CompressedRestoresLag(const RestoreEstimator& estimator) {
  const double compressed = estimator.compressed_restore_bytes_per_second();
  return compressed > 0 && compressed < RawRestoreBytesPerSecond(estimator);
}

}  // namespace

namespace {

// The zstd codec whose frames of `samples` are smallest: its frames (empty where a sample did
// not compress) and their total length (raw length counted for those).
struct SampleWinner {
  uint32_t codec = kCodecZstd;
  uint64_t stored_bytes = UINT64_MAX;
  std::vector<std::vector<uint8_t>> frames;
};

SampleWinner CompressSamples(const std::vector<std::span<const uint8_t>>& samples, int level) {
  SampleWinner best;
  for (uint32_t codec : {kCodecZstd, kCodecZstdShuffle2, kCodecZstdShuffle4}) {
    std::vector<std::vector<uint8_t>> frames;
    uint64_t stored_bytes = 0;
    for (const auto& sample : samples) {
      std::vector<uint8_t> frame(ZSTD_compressBound(sample.size()));
      frame.resize(CompressChunkAs(codec, sample, frame, level));
      stored_bytes += frame.empty() ? sample.size() : frame.size();
      frames.push_back(std::move(frame));
    }
    if (stored_bytes < best.stored_bytes) best = {codec, stored_bytes, std::move(frames)};
  }
  return best;
}

// How fast the winner's frames decompress on this thread: the faster of two passes over the
// samples, in sampled bytes per second; < 0 when a frame does not decompress.
double DecompressBytesPerSecond(const std::vector<std::span<const uint8_t>>& samples,
                                const SampleWinner& winner, uint64_t sampled_bytes) {
  double best_seconds = 0;
  std::vector<uint8_t> out_buffer(kSampleBytes * 3);
  for (int pass = 0; pass < 2; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < samples.size(); ++i) {
      if (winner.frames[i].empty()) continue;  // stored raw
      std::span<uint8_t> out = std::span(out_buffer).first(samples[i].size());
      if (!DecompressChunkAs(winner.codec, winner.frames[i], out)) return -1;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (pass == 0 || seconds < best_seconds) best_seconds = seconds;
  }
  return best_seconds > 0 ? static_cast<double>(sampled_bytes) / best_seconds : 1e12;
}

}  // namespace

CodecChoice ChooseCodec(std::span<const uint8_t> segment, int level, bool require_gain,
                        double min_decompress_bytes_per_second) {
  CodecChoice choice;
  if (segment.size() < 4096) {
    choice.reason = "under 4 KiB";
    return choice;
  }
  const std::vector<std::span<const uint8_t>> samples = Samples(segment);
  uint64_t sampled_bytes = 0;
  for (const auto& sample : samples) sampled_bytes += sample.size();
  const SampleWinner winner = CompressSamples(samples, level);
  choice.sample_ratio =
      static_cast<double>(sampled_bytes) / static_cast<double>(winner.stored_bytes);
  if (require_gain && winner.stored_bytes * 10 > sampled_bytes * 9) {
    choice.reason = "saves under 10%";
    return choice;
  }
  if (min_decompress_bytes_per_second > 0) {
    choice.decompress_bytes_per_second = DecompressBytesPerSecond(samples, winner, sampled_bytes);
    if (choice.decompress_bytes_per_second < 0) return choice;  // a sample frame did not decode
    if (choice.decompress_bytes_per_second < min_decompress_bytes_per_second) {
      choice.reason = "decompresses slower than the disk reads";
      return choice;
    }
  }
  choice.codec = winner.codec;
  return choice;
}

uint32_t SegmentCodec(std::span<const uint8_t> segment, const DiskOptions& options,
                      const RestoreEstimator& estimator) {
  switch (options.compression) {
    case CompressionMode::kOff:
      return kCodecRaw;
    case CompressionMode::kZstd:
      return ChooseCodec(segment, options.zstd_level, false, 0.0).codec;
    case CompressionMode::kAuto:
      if (CompressedRestoresLag(estimator)) return kCodecRaw;
      return ChooseCodec(segment, options.zstd_level, true,
                         MinDecompressBytesPerSecond(options, estimator))
          .codec;
  }
  return kCodecRaw;
}

}  // namespace tier::disk
