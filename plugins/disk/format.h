// format.h -- the on-disk checkpoint format, version 2 (layout table in plugins/disk/README.md).
//
// One file per checkpoint:  [header region, padded to 4 KiB][chunk][chunk]...  Every chunk starts
// at a 4 KiB-aligned offset and is padded to 4 KiB, so every read and write may use O_DIRECT.
// The header region holds a fixed 128-byte header, the namespace, the segment table, the chunk
// table and the opaque manifest, all covered by one XXH3-64 checksum; each chunk carries the
// XXH3-64 of its logical (uncompressed) bytes, seeded (version 2) with its identity: the key, its
// segment's kind and index, and its index within the segment (ChunkSeed), so a chunk found in any
// other place fails verification. Version 1 (unseeded chunk checksums) is still read. All
// integers are little-endian.
//
// The functions here are pure (no I/O, no globals): ParseHeader is the fuzzing target.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tier_provider.h"

namespace tier::disk {

inline constexpr uint8_t kMagic[8] = {'T', 'I', 'E', 'R', 'C', 'K', 'P', 'T'};
inline constexpr uint32_t kFormatVersion = 2;        // what this build writes
inline constexpr uint32_t kOldestFormatVersion = 1;  // the oldest it reads
inline constexpr uint64_t kBlockBytes = 4096;  // alignment of the header region and every chunk
inline constexpr uint32_t kFixedHeaderBytes = 128;
inline constexpr uint32_t kSegmentRecordBytes = 48;
inline constexpr uint32_t kChunkRecordBytes = 24;
inline constexpr uint32_t kMaxNamespaceBytes = 1024;
inline constexpr uint64_t kMaxHeaderBytes = 64ull << 20;  // bounds segment/chunk tables
inline constexpr uint32_t kMinChunkBytes = 64u << 10;
inline constexpr uint32_t kMaxChunkBytes = 64u << 20;
inline constexpr uint64_t kHeaderChecksumOffset = 16;

// Codec of a segment (SegmentRecord::codec) or of one chunk (ChunkRecord::codec). A compressed
// segment's chunks are each either raw or compressed with the segment's codec.
enum : uint32_t {
  kCodecRaw = 0,     // stored as is
  kCodecZstd = 1,    // segment: chunks are zstd frames or raw; chunk: one zstd frame
  kCodecInline = 2,  // segment only: the manifest, stored inside the header region
  // zstd frame of the chunk's byte planes (tier::shuffle::ByteShuffle) for 2-byte elements
  // (BF16/FP16: the exponent bytes together) or 4-byte elements (FP32); unshuffled on restore.
  kCodecZstdShuffle2 = 3,
  kCodecZstdShuffle4 = 4,
};

// True for the codecs whose chunks are zstd frames.
constexpr bool IsZstdCodec(uint32_t codec) {
  return codec == kCodecZstd || codec == kCodecZstdShuffle2 || codec == kCodecZstdShuffle4;
}
// Element bytes of the byte-plane shuffle under a codec (0: none).
constexpr uint32_t ShuffleElementBytes(uint32_t codec) {
  return codec == kCodecZstdShuffle2 ? 2u : codec == kCodecZstdShuffle4 ? 4u : 0u;
}

using KeyBytes = std::array<uint8_t, TIER_KEY_BYTES>;

struct ChunkRecord {
  uint64_t file_offset = 0;    // multiple of kBlockBytes, >= data_offset
  uint32_t stored_bytes = 0;   // bytes of the frame (raw: the chunk's logical length)
  uint32_t codec = kCodecRaw;  // kCodecRaw or kCodecZstd
  uint64_t checksum = 0;       // XXH3-64 of the chunk's logical bytes, seeded by ChunkSeed
};

struct SegmentRecord {
  uint32_t kind = 0;
  uint32_t index = 0;
  uint64_t logical_bytes = 0;
  uint64_t stored_bytes = 0;  // sum of the chunks' 4 KiB-padded stored bytes (0 for inline)
  uint32_t codec = kCodecRaw;
  uint32_t chunk_count = 0;  // ceil(logical_bytes / chunk_bytes); 0 for inline
  uint64_t first_chunk = 0;  // index of its first record in the chunk table
  uint64_t checksum = 0;     // XXH3-64 of its encoded chunk records (inline: of the manifest)
};

struct Header {
  uint32_t format_version = kFormatVersion;  // 1 or 2: how chunk checksums are seeded
  uint32_t chunk_bytes = 0;
  KeyBytes key{};
  std::string namespace_id;
  uint64_t logical_bytes = 0;           // sum of segment logical lengths
  uint64_t data_offset = 0;             // HeaderRegionBytes(): where chunks may start
  uint64_t file_bytes = 0;              // the file's exact length, a multiple of kBlockBytes
  uint64_t created_unix_ns = 0;         // when the spill began (CLOCK_REALTIME)
  std::vector<SegmentRecord> segments;  // in stored order
  std::vector<ChunkRecord> chunks;
  std::vector<uint8_t> manifest;  // bytes of the TIER_SEGMENT_MANIFEST segment, if any
};

// Why a header was refused: kCorrupt files are quarantined, kUnsupported (a format version newer
// than kFormatVersion) are left alone.
enum class ParseErrorKind { kCorrupt, kUnsupported };
struct ParseError {
  ParseErrorKind kind = ParseErrorKind::kCorrupt;
  std::string message;
};

constexpr uint64_t AlignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// Bytes of the checksummed header content for these counts (before padding).
uint64_t HeaderContentBytes(uint64_t namespace_bytes, uint64_t segment_count, uint64_t chunk_count,
                            uint64_t manifest_bytes);

// From the first kFixedHeaderBytes of a file: the header content length to read next, after
// checking magic, version and bounds. Pure.
bool PeekHeaderBytes(std::span<const uint8_t> prefix, uint64_t* header_bytes, ParseError* error);

// Parses and fully validates a header (every length, offset, table and checksum) from `bytes`,
// which holds at least the header content. Never reads outside `bytes`. Pure.
bool ParseHeader(std::span<const uint8_t> bytes, Header* out, ParseError* error);

// Encodes `header` (tables complete, checksums of chunks set) into `out`, which must be at least
// HeaderContentBytes(...) long; fills the segment checksums and the header checksum. Writes
// header.format_version (kFormatVersion unless a test asks for version 1). Returns the content
// length written. Pure.
uint64_t EncodeHeader(const Header& header, std::span<uint8_t> out);

// XXH3-64 of the encoded chunk records of one segment (SegmentRecord::checksum).
uint64_t ChunkTableChecksum(std::span<const ChunkRecord> chunks);

// The seed of a chunk's checksum under `format_version`: 0 for version 1; for version 2 the
// XXH3-64 of (key, segment kind u32, segment index u32, chunk index within the segment u32),
// little-endian, 44 bytes. A chunk is checksummed with XXH3_64bits_withSeed(bytes, seed). Pure.
uint64_t ChunkSeed(uint32_t format_version, const KeyBytes& key, uint32_t kind, uint32_t index,
                   uint32_t chunk_in_segment);

}  // namespace tier::disk
