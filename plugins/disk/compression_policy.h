// compression_policy.h -- which codec a segment is stored with: the whole of `compression=zstd`
// and `compression=auto` (the README's "Compression" section describes the same rules).
//
//  * zstd: the best of zstd alone and zstd over 2- or 4-byte planes, judged on three 64 KiB
//    samples (start, middle, end) of the segment.
//  * auto: the same winner, kept only if (1) it saves at least 10% on the samples, (2) restoring it
//    would not be slower than restoring it raw on this machine: restore is pipelined (reads and the
//    codec threads overlap), so a raw restore takes max(1/R, 1/(c*P)) per logical byte and a
//    compressed one max(stored/logical/R, (1/d + 1/c)/P), with R the device's raw restore rate, d
//    the samples' single-thread decompression rate, c the checksum rate and P the codec cores
//    measured at open (CodecCapacity: the decompression probe run on every codec thread at once);
//    d is required to keep up with kDecompressHeadroom x R (the CPU a restore gets is not the
//    CPU measured at open); and (3) the compressed restores this instance has
//    timed were not slower than its raw ones (what the samples cannot see: codec threads sharing a
//    CPU with other work). Before the first raw restore is timed, the read bandwidth estimate
//    stands in for raw restore throughput.
#pragma once

#include <cstdint>
#include <span>

#include "estimator.h"
#include "format.h"
#include "options.h"

namespace tier::disk {

// Why a segment got its codec; counted in tier_cold_codec_decisions_total{decision}.
enum class CodecDecision {
  kCompressed = 0,       // a zstd codec
  kUnder4KiB = 1,        // raw: too small to save a block
  kSavesUnder10Pct = 2,  // raw (auto): the samples did not shrink by 10%
  kDecompressSlow = 3,   // raw (auto): decompression would not keep up with the device's reads
  kRestoresLagged = 4,   // raw (auto): compressed restores timed here were slower than raw ones
  kOff = 5,              // raw: compression=off
};
inline constexpr int kCodecDecisions = 6;
const char* CodecDecisionName(CodecDecision decision);  // compressed, raw_under_4k, ...

// What this machine's codec threads can do, measured once at open (MeasureCodecCapacity).
struct CodecCapacity {
  double parallel_cores = 1;  // decompression throughput of all codec threads at once / one's
  double checksum_bytes_per_second = 1e10;  // XXH3-64, one thread
};

// Runs the decompression probe on min(codec_threads, CPUs this process may use) threads at once
// and a checksum probe: a few milliseconds at open. Any thread.
CodecCapacity MeasureCodecCapacity(int level, uint32_t codec_threads);

// The smallest single-thread decompression rate (sampled bytes per second) with which a
// compressed restore is not slower than a raw one (rule 2 above, headroom included), for raw
// restores of `raw_bytes_per_second`; +infinity when none is (raw restores are CPU-bound already).
double MinDecompressBytesPerSecond(double raw_bytes_per_second, const CodecCapacity& capacity);

// How much faster than the device decompression must keep up: the codec cores a restore gets
// are not the ones measured at open or at spill (tier_disk_bench, 2 loaded vCPUs, 2026-12-02:
// compressed restores got 0.66-1.2 cores of a probe's 1-2), so decompression must keep up with
// twice the read rate before auto compresses.
inline constexpr double kDecompressHeadroom = 2.0;

struct CodecChoice {
  uint32_t codec = kCodecRaw;
  double sample_ratio = 1.0;  // sampled bytes / compressed bytes, for the best zstd codec
  double decompress_bytes_per_second = 0;  // that codec's samples decompressed, one thread
  const char* reason = "";                 // why raw, or "" when compressed
  CodecDecision decision = CodecDecision::kCompressed;
};

// The sample test alone: with `require_gain`, raw unless the best zstd codec saves at least 10%;
// with `min_decompress_bytes_per_second` > 0, raw unless its samples decompress (and unshuffle)
// at least that fast on one thread. Segments under 4 KiB are raw. Any thread; ~1-2 ms a segment.
CodecChoice ChooseCodec(std::span<const uint8_t> segment, int level, bool require_gain,
                        double min_decompress_bytes_per_second);

// The codec `segment` is stored with under `options.compression` (rules above), judged against
// what `estimator` has measured so far and the codec threads' `capacity`. Any thread.
CodecChoice SegmentCodec(std::span<const uint8_t> segment, const DiskOptions& options,
                         const RestoreEstimator& estimator, const CodecCapacity& capacity);

}  // namespace tier::disk
