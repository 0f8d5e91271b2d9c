#include "compression_policy.h"

#include <sched.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <limits>
#include <thread>
#include <vector>

#include "codec.h"

namespace tier::disk {
namespace {

constexpr uint64_t kSampleBytes = 64 << 10;
constexpr int kCapacityPasses = 8;  // ~1 ms each

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

int UsableCpus() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  return sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? std::max(1, CPU_COUNT(&cpus)) : 1;
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
    choice.decision = CodecDecision::kUnder4KiB;
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
    choice.decision = CodecDecision::kSavesUnder10Pct;
    return choice;
  }
  if (min_decompress_bytes_per_second > 0) {
    choice.decompress_bytes_per_second = DecompressBytesPerSecond(samples, winner, sampled_bytes);
    if (choice.decompress_bytes_per_second < 0 ||  // a sample frame did not decode
        choice.decompress_bytes_per_second < min_decompress_bytes_per_second) {
      choice.reason = "decompresses slower than the disk reads";
      choice.decision = CodecDecision::kDecompressSlow;
      return choice;
    }
  }
  choice.codec = winner.codec;
  return choice;
}

const char* CodecDecisionName(CodecDecision decision) {
  switch (decision) {
    case CodecDecision::kCompressed:
      return "compressed";
    case CodecDecision::kUnder4KiB:
      return "raw_under_4k";
    case CodecDecision::kSavesUnder10Pct:
      return "raw_saves_under_10pct";
    case CodecDecision::kDecompressSlow:
      return "raw_decompress_slower_than_reads";
    case CodecDecision::kRestoresLagged:
      return "raw_compressed_restores_lagged";
    case CodecDecision::kOff:
      return "raw_off";
  }
  return "?";
}

CodecCapacity MeasureCodecCapacity(int level, uint32_t codec_threads) {
  CodecCapacity capacity;
  const int threads = std::max(1, std::min<int>(static_cast<int>(codec_threads), UsableCpus()));
  const auto mean_rate = [level] {  // over kCapacityPasses probes
    double seconds_per_byte = 0;
    for (int pass = 0; pass < kCapacityPasses; ++pass) {
      seconds_per_byte += 1.0 / ProbeDecompressBytesPerSecond(level);
    }
    return kCapacityPasses / seconds_per_byte;
  };
  const double one = mean_rate();
  std::vector<double> each(static_cast<size_t>(threads), 0.0);
  std::vector<std::thread> workers;
  std::atomic<int> ready{0};
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&each, &ready, &mean_rate, t, threads] {
      ready.fetch_add(1);
      while (ready.load() < threads) std::this_thread::yield();  // start together
      each[static_cast<size_t>(t)] = mean_rate();
    });
  }
  for (auto& worker : workers) worker.join();
  double together = 0;
  for (double rate : each) together += rate;
  capacity.parallel_cores =
      std::clamp(together / std::max(one, 1.0), 0.25, static_cast<double>(threads));

  std::vector<uint8_t> block(1 << 20, 0x5a);
  for (size_t i = 0; i < block.size(); i += 7) block[i] = static_cast<uint8_t>(i);
  double best_seconds = 0;
  uint64_t sink = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = std::chrono::steady_clock::now();
    sink += Checksum(block, static_cast<uint64_t>(pass));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (pass == 0 || seconds < best_seconds) best_seconds = seconds;
  }
  if (best_seconds > 0 && sink != 1) {  // sink keeps the checksums from being optimized out
    capacity.checksum_bytes_per_second = std::clamp(block.size() / best_seconds, 1e8, 1e11);
  }
  return capacity;
}

double MinDecompressBytesPerSecond(double raw_bytes_per_second, const CodecCapacity& capacity) {
  // Per logical byte: a raw restore takes max(1/R, 1/(c*P)); a compressed one needs
  // (1/d + 1/c)/P <= that, with R raised by the headroom.
  const double read_s = 1.0 / (std::max(raw_bytes_per_second, 1.0) * kDecompressHeadroom);
  const double cores = std::max(capacity.parallel_cores, 0.25);
  const double checksum_s = 1.0 / capacity.checksum_bytes_per_second;
  const double raw_s = std::max(read_s, checksum_s / cores);
  const double slack_s = cores * raw_s - checksum_s;
  if (slack_s <= 0) return std::numeric_limits<double>::infinity();
  return 1.0 / slack_s;
}

CodecChoice SegmentCodec(std::span<const uint8_t> segment, const DiskOptions& options,
                         const RestoreEstimator& estimator, const CodecCapacity& capacity) {
  CodecChoice raw;
  switch (options.compression) {
    case CompressionMode::kOff:
      raw.decision = CodecDecision::kOff;
      raw.reason = "compression=off";
      return raw;
    case CompressionMode::kZstd:
      return ChooseCodec(segment, options.zstd_level, false, 0.0);
    case CompressionMode::kAuto:
      if (CompressedRestoresLag(estimator)) {
        raw.decision = CodecDecision::kRestoresLagged;
        raw.reason = "compressed restores were slower than raw ones";
        return raw;
      }
      return ChooseCodec(
          segment, options.zstd_level, true,
          MinDecompressBytesPerSecond(RawRestoreBytesPerSecond(estimator), capacity));
  }
  return raw;
}

}  // namespace tier::disk
