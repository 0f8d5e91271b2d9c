#include <xxhash.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "format.h"
#include "fuzz_targets.h"

namespace tier::disk::fuzz {
namespace {

#define FUZZ_CHECK(cond)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "header fuzz: property violated: %s\n", #cond); \
      std::abort();                                                        \
    }                                                                      \
  } while (0)

uint64_t Get(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void Put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Recomputes the manifest, chunk-table and header checksums in place (layout as in README.md),
// wherever the ranges they cover lie inside `bytes`.
void FixChecksums(std::vector<uint8_t>& bytes) {
  const size_t n = bytes.size();
  if (n < kFixedHeaderBytes) return;
  uint8_t* p = bytes.data();
  const uint64_t header_bytes = std::min<uint64_t>(Get(p + 12, 4), n);
  const uint64_t ns = Get(p + 64, 2), segments = Get(p + 68, 4), chunks = Get(p + 72, 8),
                 manifest = Get(p + 80, 8);
  if (ns > kMaxNamespaceBytes || segments > TIER_MAX_SEGMENTS || chunks > n || manifest > n) {
    return;
  }
  const uint64_t seg_at = kFixedHeaderBytes + AlignUp(ns, 8);
  const uint64_t chunk_at = seg_at + segments * kSegmentRecordBytes;
  const uint64_t manifest_at = chunk_at + chunks * kChunkRecordBytes;
  for (uint64_t s = 0; s < segments && seg_at + (s + 1) * kSegmentRecordBytes <= n; ++s) {
    uint8_t* r = p + seg_at + s * kSegmentRecordBytes;
    if (Get(r + 24, 4) == kCodecInline) {
      if (manifest_at + manifest <= n) Put64(r + 40, XXH3_64bits(p + manifest_at, manifest));
      continue;
    }
    const uint64_t first = Get(r + 32, 8), count = Get(r + 28, 4);
    if (first <= chunks && count <= chunks - first && chunk_at + (first + count) * 24 <= n) {
      Put64(r + 40,
            XXH3_64bits(p + chunk_at + first * kChunkRecordBytes, count * kChunkRecordBytes));
    }
  }
  if (header_bytes >= kHeaderChecksumOffset + 8) {
    std::memset(p + kHeaderChecksumOffset, 0, 8);
    Put64(p + kHeaderChecksumOffset, XXH3_64bits(p, header_bytes));
  }
}

void CheckParsed(const std::vector<uint8_t>& input, const Header& h) {
  // Canonical: the encoder writes exactly the accepted bytes back.
  const uint64_t content = HeaderContentBytes(h.namespace_id.size(), h.segments.size(),
                                              h.chunks.size(), h.manifest.size());
  FUZZ_CHECK(content <= input.size());
  std::vector<uint8_t> again(content);
  FUZZ_CHECK(EncodeHeader(h, again) == content);
  FUZZ_CHECK(std::memcmp(again.data(), input.data(), content) == 0);
  // The tables describe a file that can be read: every segment's chunks cover it exactly, every
  // chunk lies inside the file, after the header, without overlap.
  FUZZ_CHECK(h.data_offset == AlignUp(content, kBlockBytes));
  FUZZ_CHECK(h.file_bytes >= h.data_offset && h.file_bytes % kBlockBytes == 0);
  uint64_t logical = 0;
  for (const SegmentRecord& s : h.segments) {
    logical += s.logical_bytes;
    FUZZ_CHECK(logical >= s.logical_bytes);  // no wrap-around
    if (s.codec == kCodecInline) {
      FUZZ_CHECK(s.logical_bytes == h.manifest.size() && s.chunk_count == 0);
      continue;
    }
    FUZZ_CHECK(s.first_chunk + s.chunk_count <= h.chunks.size());
    FUZZ_CHECK(uint64_t{s.chunk_count} * h.chunk_bytes >= s.logical_bytes);
    FUZZ_CHECK(s.chunk_count == 0 || uint64_t{s.chunk_count - 1} * h.chunk_bytes < s.logical_bytes);
    for (uint32_t c = 0; c < s.chunk_count; ++c) {
      const ChunkRecord& ch = h.chunks[s.first_chunk + c];
      FUZZ_CHECK(ch.file_offset >= h.data_offset && ch.file_offset % kBlockBytes == 0);
      FUZZ_CHECK(ch.file_offset + AlignUp(ch.stored_bytes, kBlockBytes) <= h.file_bytes);
      FUZZ_CHECK(ch.stored_bytes <= h.chunk_bytes);
    }
  }
  FUZZ_CHECK(logical == h.logical_bytes);
}

void ParseOne(const std::vector<uint8_t>& bytes) {
  uint64_t header_bytes = 0;
  ParseError error;
  const bool peeked = PeekHeaderBytes(bytes, &header_bytes, &error);
  Header h;
  const bool parsed = ParseHeader(bytes, &h, &error);
  if (parsed) {
    FUZZ_CHECK(peeked && header_bytes <= bytes.size());
    CheckParsed(bytes, h);
  } else {
    FUZZ_CHECK(!error.message.empty());
  }
}

}  // namespace

int FuzzHeaderParser(const uint8_t* data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  ParseOne(bytes);
  FixChecksums(bytes);
  ParseOne(bytes);
  return 0;
}

}  // namespace tier::disk::fuzz
