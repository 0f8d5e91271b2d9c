#include "format.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "tier/check.h"
#include "tier/provider/little_endian.h"

namespace tier::disk {
namespace {

using provider::Get16;
using provider::Get32;
using provider::Get64;
using provider::Put16;
using provider::Put32;
using provider::Put64;

// Fixed header field offsets (see README.md).
constexpr size_t kOffMagic = 0;
constexpr size_t kOffVersion = 8;
constexpr size_t kOffHeaderBytes = 12;
constexpr size_t kOffChecksum = kHeaderChecksumOffset;  // 16
constexpr size_t kOffFlags = 24;
constexpr size_t kOffChunkBytes = 28;
constexpr size_t kOffKey = 32;
constexpr size_t kOffNamespaceBytes = 64;
constexpr size_t kOffReserved16 = 66;
constexpr size_t kOffSegmentCount = 68;
constexpr size_t kOffChunkCount = 72;
constexpr size_t kOffManifestBytes = 80;
constexpr size_t kOffLogicalBytes = 88;
constexpr size_t kOffDataOffset = 96;
constexpr size_t kOffFileBytes = 104;
constexpr size_t kOffCreated = 112;
constexpr size_t kOffReserved64 = 120;
static_assert(kOffReserved64 + 8 == kFixedHeaderBytes);

void EncodeChunk(const ChunkRecord& c, uint8_t* p) {
  Put64(p, c.file_offset);
  Put32(p + 8, c.stored_bytes);
  Put32(p + 12, c.codec);
  Put64(p + 16, c.checksum);
}

ChunkRecord DecodeChunk(const uint8_t* p) {
  ChunkRecord c;
  c.file_offset = Get64(p);
  c.stored_bytes = Get32(p + 8);
  c.codec = Get32(p + 12);
  c.checksum = Get64(p + 16);
  return c;
}

void EncodeSegment(const SegmentRecord& seg, uint64_t checksum, uint8_t* p) {
  Put32(p, seg.kind);
  Put32(p + 4, seg.index);
  Put64(p + 8, seg.logical_bytes);
  Put64(p + 16, seg.stored_bytes);
  Put32(p + 24, seg.codec);
  Put32(p + 28, seg.chunk_count);
  Put64(p + 32, seg.first_chunk);
  Put64(p + 40, checksum);
}

SegmentRecord DecodeSegment(const uint8_t* p) {
  SegmentRecord seg;
  seg.kind = Get32(p);
  seg.index = Get32(p + 4);
  seg.logical_bytes = Get64(p + 8);
  seg.stored_bytes = Get64(p + 16);
  seg.codec = Get32(p + 24);
  seg.chunk_count = Get32(p + 28);
  seg.first_chunk = Get64(p + 32);
  seg.checksum = Get64(p + 40);
  return seg;
}

uint64_t HeaderChecksum(std::span<const uint8_t> content) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, content.data(), kOffChecksum);
  const uint8_t zeros[8] = {};
  XXH3_64bits_update(&state, zeros, sizeof(zeros));
  XXH3_64bits_update(&state, content.data() + kOffChecksum + 8, content.size() - kOffChecksum - 8);
  return XXH3_64bits_digest(&state);
}

bool Fail(ParseError* error, std::string message, ParseErrorKind kind = ParseErrorKind::kCorrupt) {
  if (error != nullptr) {
    error->kind = kind;
    error->message = std::move(message);
  }
  return false;
}

bool CheckedAdd(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

}  // namespace

uint64_t HeaderContentBytes(uint64_t namespace_bytes, uint64_t segment_count, uint64_t chunk_count,
                            uint64_t manifest_bytes) {
  // Callers pass bounded counts; the sum cannot overflow for counts below 2^40.
  return kFixedHeaderBytes + AlignUp(namespace_bytes, 8) + segment_count * kSegmentRecordBytes +
         chunk_count * kChunkRecordBytes + manifest_bytes;
}

uint64_t ChunkTableChecksum(std::span<const ChunkRecord> chunks) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  uint8_t record[kChunkRecordBytes];
  for (const ChunkRecord& c : chunks) {
    EncodeChunk(c, record);
    XXH3_64bits_update(&state, record, sizeof(record));
  }
  return XXH3_64bits_digest(&state);
}

uint64_t ChunkSeed(uint32_t format_version, const KeyBytes& key, uint32_t kind, uint32_t index,
                   uint32_t chunk_in_segment) {
  if (format_version < 2) return 0;
  uint8_t identity[TIER_KEY_BYTES + 12];
  std::memcpy(identity, key.data(), TIER_KEY_BYTES);
  Put32(identity + TIER_KEY_BYTES, kind);
  Put32(identity + TIER_KEY_BYTES + 4, index);
  Put32(identity + TIER_KEY_BYTES + 8, chunk_in_segment);
  return XXH3_64bits(identity, sizeof(identity));
}

bool PeekHeaderBytes(std::span<const uint8_t> prefix, uint64_t* header_bytes, ParseError* error) {
  if (prefix.size() < kFixedHeaderBytes) return Fail(error, "file shorter than the fixed header");
  if (std::memcmp(prefix.data() + kOffMagic, kMagic, sizeof(kMagic)) != 0) {
    return Fail(error, "bad magic");
  }
  const uint32_t version = Get32(prefix.data() + kOffVersion);
  if (version < kOldestFormatVersion)
    return Fail(error, "format version " + std::to_string(version));
  if (version > kFormatVersion) {
    return Fail(error,
                "format version " + std::to_string(version) + " (this build reads " +
                    std::to_string(kOldestFormatVersion) + " to " + std::to_string(kFormatVersion) +
                    ")",
                ParseErrorKind::kUnsupported);
  }
  const uint64_t bytes = Get32(prefix.data() + kOffHeaderBytes);
  if (bytes < kFixedHeaderBytes || bytes > kMaxHeaderBytes) {
    return Fail(error, "header length " + std::to_string(bytes) + " out of bounds");
  }
  *header_bytes = bytes;
  return true;
}

namespace {

// Where the variable parts of a header lie, from its fixed fields.
struct Layout {
  uint64_t namespace_bytes = 0;
  uint64_t segment_count = 0;
  uint64_t chunk_count = 0;
  uint64_t manifest_bytes = 0;
  size_t segments_at = 0;
  size_t chunks_at = 0;
  size_t manifest_at = 0;
};

// The header checksum, then the fields that must be zero.
bool CheckSeal(std::span<const uint8_t> content, ParseError* error) {
  const uint8_t* p = content.data();
  if (Get64(p + kOffChecksum) != HeaderChecksum(content)) {
    return Fail(error, "header checksum mismatch");
  }
  if (Get32(p + kOffFlags) != 0) return Fail(error, "unknown header flags");
  if (Get16(p + kOffReserved16) != 0 || Get64(p + kOffReserved64) != 0) {
    return Fail(error, "reserved header fields not zero");
  }
  return true;
}

// The fixed 128 bytes: sizes and counts within bounds, and the tables they describe exactly as
// long as the header content.
bool ParseFixedFields(std::span<const uint8_t> content, Header* h, Layout* layout,
                      ParseError* error) {
  const uint8_t* p = content.data();
  h->format_version = Get32(p + kOffVersion);
  h->chunk_bytes = Get32(p + kOffChunkBytes);
  if (h->chunk_bytes < kMinChunkBytes || h->chunk_bytes > kMaxChunkBytes ||
      h->chunk_bytes % kBlockBytes != 0) {
    return Fail(error, "chunk size " + std::to_string(h->chunk_bytes) + " out of bounds");
  }
  std::memcpy(h->key.data(), p + kOffKey, TIER_KEY_BYTES);
  layout->namespace_bytes = Get16(p + kOffNamespaceBytes);
  layout->segment_count = Get32(p + kOffSegmentCount);
  layout->chunk_count = Get64(p + kOffChunkCount);
  layout->manifest_bytes = Get64(p + kOffManifestBytes);
  if (layout->namespace_bytes > kMaxNamespaceBytes) return Fail(error, "namespace too long");
  if (layout->segment_count > TIER_MAX_SEGMENTS) return Fail(error, "too many segments");
  if (layout->chunk_count > kMaxHeaderBytes / kChunkRecordBytes) {
    return Fail(error, "too many chunks");
  }
  if (layout->manifest_bytes > TIER_MANIFEST_MAX_BYTES) return Fail(error, "manifest too long");
  if (HeaderContentBytes(layout->namespace_bytes, layout->segment_count, layout->chunk_count,
                         layout->manifest_bytes) != content.size()) {
    return Fail(error, "header length does not match its tables");
  }
  h->logical_bytes = Get64(p + kOffLogicalBytes);
  h->data_offset = Get64(p + kOffDataOffset);
  h->file_bytes = Get64(p + kOffFileBytes);
  h->created_unix_ns = Get64(p + kOffCreated);
  if (h->data_offset != AlignUp(content.size(), kBlockBytes)) return Fail(error, "bad data offset");
  if (h->file_bytes < h->data_offset || h->file_bytes % kBlockBytes != 0) {
    return Fail(error, "bad file length");
  }
  layout->segments_at = kFixedHeaderBytes + AlignUp(layout->namespace_bytes, 8);
  layout->chunks_at = layout->segments_at + layout->segment_count * kSegmentRecordBytes;
  layout->manifest_at = layout->chunks_at + layout->chunk_count * kChunkRecordBytes;
  return true;
}

// The namespace, its zero padding, and the three tables, decoded (not yet checked).
bool DecodeVariableParts(std::span<const uint8_t> content, const Layout& layout, Header* h,
                         ParseError* error) {
  const uint8_t* p = content.data();
  h->namespace_id.assign(reinterpret_cast<const char*>(p + kFixedHeaderBytes),
                         layout.namespace_bytes);
  for (uint64_t i = layout.namespace_bytes; i < AlignUp(layout.namespace_bytes, 8); ++i) {
    if (p[kFixedHeaderBytes + i] != 0) return Fail(error, "namespace padding not zero");
  }
  h->chunks.resize(layout.chunk_count);
  for (uint64_t i = 0; i < layout.chunk_count; ++i) {
    h->chunks[i] = DecodeChunk(p + layout.chunks_at + i * kChunkRecordBytes);
  }
  h->manifest.assign(p + layout.manifest_at, p + layout.manifest_at + layout.manifest_bytes);
  h->segments.resize(layout.segment_count);
  for (uint64_t s = 0; s < layout.segment_count; ++s) {
    h->segments[s] = DecodeSegment(p + layout.segments_at + s * kSegmentRecordBytes);
  }
  return true;
}

// The inline manifest's record: no chunks, the manifest's length and checksum.
bool CheckManifestSegment(const Header& h, const SegmentRecord& seg, const std::string& where,
                          ParseError* error) {
  if (seg.codec != kCodecInline || seg.logical_bytes != h.manifest.size() ||
      seg.stored_bytes != 0 || seg.chunk_count != 0 || seg.first_chunk != 0) {
    return Fail(error, where + ": bad manifest record");
  }
  if (seg.checksum != XXH3_64bits(h.manifest.data(), h.manifest.size())) {
    return Fail(error, where + ": manifest checksum mismatch");
  }
  return true;
}

// One chunk of a data segment: its codec and stored length fit its logical length, and it lies
// inside the file after the header. Adds its padded length to *stored_bytes.
bool CheckChunk(const Header& h, const SegmentRecord& seg, const ChunkRecord& chunk,
                uint64_t chunk_logical_bytes, const std::string& where, uint64_t* stored_bytes,
                ParseError* error) {
  if (chunk.codec == kCodecRaw) {
    if (chunk.stored_bytes != chunk_logical_bytes) return Fail(error, where + ": raw chunk length");
  } else if (IsZstdCodec(chunk.codec)) {
    if (seg.codec != chunk.codec) {
      return Fail(error, where + ": chunk codec differs from its segment's");
    }
    if (chunk.stored_bytes == 0 || chunk.stored_bytes > h.chunk_bytes) {
      return Fail(error, where + ": zstd chunk length");
    }
  } else {
    return Fail(error, where + ": chunk codec");
  }
  uint64_t end = 0;
  if (chunk.file_offset % kBlockBytes != 0 || chunk.file_offset < h.data_offset ||
      !CheckedAdd(chunk.file_offset, AlignUp(chunk.stored_bytes, kBlockBytes), &end) ||
      end > h.file_bytes) {
    return Fail(error, where + ": chunk offset out of the file");
  }
  *stored_bytes += AlignUp(chunk.stored_bytes, kBlockBytes);
  return true;
}

// A data segment: its chunk range continues the table at *next_chunk and covers its length
// exactly, every chunk checks, and the stored length and chunk-table checksum match.
bool CheckDataSegment(const Header& h, const SegmentRecord& seg, const std::string& where,
                      uint64_t* next_chunk, ParseError* error) {
  if (seg.codec != kCodecRaw && !IsZstdCodec(seg.codec)) return Fail(error, where + ": codec");
  // ceil(logical / chunk) without the wrap-around of (logical + chunk - 1) near 2^64.
  if (seg.chunk_count !=
      seg.logical_bytes / h.chunk_bytes + (seg.logical_bytes % h.chunk_bytes != 0)) {
    return Fail(error, where + ": chunk count does not match its length");
  }
  if (seg.first_chunk != *next_chunk || seg.chunk_count > h.chunks.size() - *next_chunk) {
    return Fail(error, where + ": chunk range out of the chunk table");
  }
  uint64_t stored_bytes = 0;
  for (uint32_t c = 0; c < seg.chunk_count; ++c) {
    const uint64_t chunk_logical_bytes =
        std::min<uint64_t>(h.chunk_bytes, seg.logical_bytes - uint64_t{c} * h.chunk_bytes);
    if (!CheckChunk(h, seg, h.chunks[*next_chunk + c], chunk_logical_bytes, where, &stored_bytes,
                    error)) {
      return false;
    }
  }
  if (stored_bytes != seg.stored_bytes) return Fail(error, where + ": stored length mismatch");
  if (seg.checksum !=
      ChunkTableChecksum(std::span(h.chunks).subspan(*next_chunk, seg.chunk_count))) {
    return Fail(error, where + ": chunk table checksum mismatch");
  }
  *next_chunk += seg.chunk_count;
  return true;
}

// Every segment record, in stored order; then what the records must say together.
bool CheckSegments(const Header& h, ParseError* error) {
  uint64_t next_chunk = 0, logical_total = 0, manifest_segments = 0;
  std::vector<std::pair<uint32_t, uint32_t>> ids;
  ids.reserve(h.segments.size());
  for (size_t s = 0; s < h.segments.size(); ++s) {
    const SegmentRecord& seg = h.segments[s];
    const std::string where = "segment " + std::to_string(s);
    if (seg.kind < TIER_SEGMENT_KIND_MIN || seg.kind > TIER_SEGMENT_KIND_MAX) {
      return Fail(error, where + ": bad kind");
    }
    ids.emplace_back(seg.kind, seg.index);
    if (!CheckedAdd(logical_total, seg.logical_bytes, &logical_total)) {
      return Fail(error, where + ": length overflow");
    }
    const bool manifest = seg.kind == TIER_SEGMENT_MANIFEST;
    manifest_segments += manifest;
    if (manifest ? !CheckManifestSegment(h, seg, where, error)
                 : !CheckDataSegment(h, seg, where, &next_chunk, error)) {
      return false;
    }
  }
  if (next_chunk != h.chunks.size()) return Fail(error, "chunk table has unused records");
  if (manifest_segments > 1) return Fail(error, "more than one manifest");
  if (manifest_segments == 0 && !h.manifest.empty()) return Fail(error, "orphan manifest bytes");
  if (logical_total != h.logical_bytes) return Fail(error, "logical length mismatch");
  std::sort(ids.begin(), ids.end());
  if (std::adjacent_find(ids.begin(), ids.end()) != ids.end()) {
    return Fail(error, "duplicate (kind, index)");
  }
  return true;
}

// Chunks must not overlap each other (CheckChunk keeps them out of the header region).
bool CheckNoOverlap(const Header& h, ParseError* error) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  ranges.reserve(h.chunks.size());
  for (const ChunkRecord& c : h.chunks) {
    ranges.emplace_back(c.file_offset, c.file_offset + AlignUp(c.stored_bytes, kBlockBytes));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) return Fail(error, "overlapping chunks");
  }
  return true;
}

}  // namespace

bool ParseHeader(std::span<const uint8_t> bytes, Header* out, ParseError* error) {
  uint64_t header_bytes = 0;
  if (!PeekHeaderBytes(bytes, &header_bytes, error)) return false;
  if (bytes.size() < header_bytes) return Fail(error, "header truncated");
  const std::span<const uint8_t> content = bytes.first(header_bytes);
  Header h;
  Layout layout;
  if (!CheckSeal(content, error) || !ParseFixedFields(content, &h, &layout, error) ||
      !DecodeVariableParts(content, layout, &h, error) || !CheckSegments(h, error) ||
      !CheckNoOverlap(h, error)) {
    return false;
  }
  *out = std::move(h);
  return true;
}

uint64_t EncodeHeader(const Header& h, std::span<uint8_t> out) {
  const uint64_t content_bytes = HeaderContentBytes(h.namespace_id.size(), h.segments.size(),
                                                    h.chunks.size(), h.manifest.size());
  // Callers size `out` from the same counts; a mismatch is a provider bug.
  TIER_CHECK(out.size() >= content_bytes);
  TIER_CHECK(h.format_version >= kOldestFormatVersion && h.format_version <= kFormatVersion);
  uint8_t* p = out.data();
  std::memset(p, 0, content_bytes);
  std::memcpy(p + kOffMagic, kMagic, sizeof(kMagic));
  Put32(p + kOffVersion, h.format_version);
  Put32(p + kOffHeaderBytes, static_cast<uint32_t>(content_bytes));
  Put32(p + kOffChunkBytes, h.chunk_bytes);
  std::memcpy(p + kOffKey, h.key.data(), TIER_KEY_BYTES);
  Put16(p + kOffNamespaceBytes, static_cast<uint16_t>(h.namespace_id.size()));
  Put32(p + kOffSegmentCount, static_cast<uint32_t>(h.segments.size()));
  Put64(p + kOffChunkCount, h.chunks.size());
  Put64(p + kOffManifestBytes, h.manifest.size());
  Put64(p + kOffLogicalBytes, h.logical_bytes);
  Put64(p + kOffDataOffset, h.data_offset);
  Put64(p + kOffFileBytes, h.file_bytes);
  Put64(p + kOffCreated, h.created_unix_ns);
  size_t at = kFixedHeaderBytes;
  std::memcpy(p + at, h.namespace_id.data(), h.namespace_id.size());
  at += AlignUp(h.namespace_id.size(), 8);
  for (const SegmentRecord& seg : h.segments) {
    const uint64_t checksum =
        seg.codec == kCodecInline
            ? XXH3_64bits(h.manifest.data(), h.manifest.size())
            : ChunkTableChecksum(std::span(h.chunks).subspan(seg.first_chunk, seg.chunk_count));
    EncodeSegment(seg, checksum, p + at);
    at += kSegmentRecordBytes;
  }
  for (const ChunkRecord& c : h.chunks) {
    EncodeChunk(c, p + at);
    at += kChunkRecordBytes;
  }
  if (!h.manifest.empty()) std::memcpy(p + at, h.manifest.data(), h.manifest.size());
  at += h.manifest.size();
  Put64(p + kOffChecksum, HeaderChecksum(std::span<const uint8_t>(p, content_bytes)));
  return at;
}

}  // namespace tier::disk
