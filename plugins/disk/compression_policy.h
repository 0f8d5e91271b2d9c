// compression_policy.h -- which codec a segment is stored with: the whole of `compression=zstd`
// and `compression=auto` (the README's "Compression" section describes the same rules).
//
//  * zstd: the best of zstd alone and zstd over 2- or 4-byte planes, judged on three 64 KiB
//    samples (start, middle, end) of the segment.
//  * auto: the same winner, kept only if (1) it saves at least 10% on the samples, (2) its samples
//    decompress on one thread at least as fast as raw restore throughput divided by the codec
//    threads that can run at once (restore is pipelined: decompression must keep up with reading),
//    and (3) the compressed restores this instance has timed were not slower than its raw ones
//    (what the samples cannot see: codec threads sharing a CPU with other work). Before the first
//    raw restore is timed, the read bandwidth estimate stands in for raw restore throughput.
#pragma once

#include <cstdint>
#include <span>

#include "estimator.h"
#include "format.h"
#include "options.h"

namespace tier::disk {

struct CodecChoice {
  uint32_t codec = kCodecRaw;
  double sample_ratio = 1.0;  // sampled bytes / compressed bytes, for the best zstd codec
  double decompress_bytes_per_second = 0;  // that codec's samples decompressed, one thread
  const char* reason = "";                 // why raw, or "" when compressed
};

// The sample test alone: with `require_gain`, raw unless the best zstd codec saves at least 10%;
// with `min_decompress_bytes_per_second` > 0, raw unless its samples decompress (and unshuffle)
// at least that fast on one thread. Segments under 4 KiB are raw. Any thread; ~1-2 ms a segment.
CodecChoice ChooseCodec(std::span<const uint8_t> segment, int level, bool require_gain,
                        double min_decompress_bytes_per_second);

// The codec `segment` is stored with under `options.compression` (rules above), judged against
// what `estimator` has measured so far. Any thread.
uint32_t SegmentCodec(std::span<const uint8_t> segment, const DiskOptions& options,
                      const RestoreEstimator& estimator);

}  // namespace tier::disk
