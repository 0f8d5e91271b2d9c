// tier_fuzz_make_seeds CORPUS_DIR [REGRESSIONS_DIR]: writes the header seed corpus (valid headers
// of several shapes in the current format, one in format 1, and a few near misses) into
// CORPUS_DIR, and the header inputs of bugs found so far into REGRESSIONS_DIR. The committed
// tests/fuzz/corpus/header and tests/fuzz/regressions/header came from this (the regression input
// was found, and is kept, in format 1).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "format.h"

namespace tier::disk {
namespace {

// A valid header: `segments` data segments of `chunks_each` chunks (the last one partial, every
// other one zstd), plus a manifest when `manifest` > 0.
Header Make(const std::string& ns, uint32_t segments, uint32_t chunks_each, uint64_t manifest) {
  Header h;
  h.chunk_bytes = 64u << 10;
  for (size_t i = 0; i < h.key.size(); ++i) h.key[i] = static_cast<uint8_t>(i * 7 + segments);
  h.namespace_id = ns;
  uint64_t chunk_total = 0;
  if (manifest > 0) {
    h.manifest.assign(manifest, 0x4D);
    h.segments.push_back({TIER_SEGMENT_MANIFEST, 0, manifest, 0, kCodecInline, 0, 0, 0});
  }
  for (uint32_t s = 0; s < segments; ++s) {
    const uint64_t logical = uint64_t{chunks_each} * h.chunk_bytes - (s % 3) * 1000;
    const uint32_t codec = s % 2 ? kCodecZstd : kCodecRaw;
    h.segments.push_back(
        {TIER_SEGMENT_MAIN_KV + s % 4, s, logical, 0, codec, chunks_each, chunk_total, 0});
    chunk_total += chunks_each;
  }
  h.chunks.resize(chunk_total);
  h.data_offset =
      AlignUp(HeaderContentBytes(ns.size(), h.segments.size(), chunk_total, h.manifest.size()),
              kBlockBytes);
  uint64_t at = h.data_offset;
  for (SegmentRecord& seg : h.segments) {
    if (seg.codec == kCodecInline) continue;
    for (uint32_t c = 0; c < seg.chunk_count; ++c) {
      const uint64_t len = std::min<uint64_t>(h.chunk_bytes, seg.logical_bytes - c * h.chunk_bytes);
      const bool zstd = seg.codec == kCodecZstd && c % 2 == 0;
      const uint32_t stored =
          zstd ? static_cast<uint32_t>(len / 3 + 1) : static_cast<uint32_t>(len);
      h.chunks[seg.first_chunk + c] = {at, stored, zstd ? kCodecZstd : kCodecRaw, 1000 + c};
      seg.stored_bytes += AlignUp(stored, kBlockBytes);
      at += AlignUp(stored, kBlockBytes);
    }
    h.logical_bytes += seg.logical_bytes;
  }
  h.logical_bytes += manifest;
  h.file_bytes = at;
  return h;
}

// The checksummed header content only: the zero padding up to data_offset is not read.
std::vector<uint8_t> Encode(const Header& h) {
  std::vector<uint8_t> out(h.data_offset);
  out.resize(EncodeHeader(h, out));
  return out;
}

void Write(const std::string& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  std::ofstream(dir + "/" + name, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

}  // namespace
}  // namespace tier::disk

int main(int argc, char** argv) {
  using namespace tier::disk;
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: tier_fuzz_make_seeds CORPUS_DIR [REGRESSIONS_DIR]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::vector<uint8_t> typical = Encode(Make("qwen3.8-27b/int8-g64", 4, 3, 300));
  Write(dir, "typical.bin", typical);
  Write(dir, "one-segment.bin", Encode(Make("m", 1, 1, 0)));
  Write(dir, "no-segments.bin", Encode(Make("m", 0, 0, 0)));
  Write(dir, "manifest-only.bin", Encode(Make("ns", 0, 0, 4000)));
  Write(dir, "many-segments.bin", Encode(Make("many", 40, 1, 16)));
  Write(dir, "long-namespace.bin", Encode(Make(std::string(1024, 'n'), 2, 2, 1)));
  std::vector<uint8_t> truncated(typical.begin(), typical.begin() + typical.size() / 2);
  Write(dir, "truncated.bin", truncated);
  std::vector<uint8_t> newer = typical;
  newer[8] = kFormatVersion + 1;  // a format this build does not read yet
  Write(dir, "newer-version.bin", newer);
  Header format_one = Make("qwen3.8-27b/int8-g64", 3, 2, 100);
  format_one.format_version = 1;  // what builds before chunk identity wrote
  Write(dir, "format-1.bin", Encode(format_one));
  if (argc == 3) {
    // A segment of 2^64 - 1 bytes in zero chunks: ceil(logical / chunk) wrapped around to 0 and
    // the parser accepted it (fixed in format.cc).
    Header h = Make("ns", 1, 1, 0);
    h.format_version = 1;
    h.segments[0].logical_bytes = ~uint64_t{0};
    h.segments[0].chunk_count = 0;
    h.segments[0].stored_bytes = 0;
    h.chunks.clear();
    h.logical_bytes = ~uint64_t{0};
    h.data_offset = AlignUp(HeaderContentBytes(2, 1, 0, 0), kBlockBytes);
    h.file_bytes = h.data_offset;
    Write(argv[2], "segment-length-wraps-chunk-count.bin", Encode(h));
  }
  return 0;
}
