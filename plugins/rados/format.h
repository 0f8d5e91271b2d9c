// format.h -- how a checkpoint is laid out in RADOS objects, version 1 (README.md has the table).
//
// All objects of one namespace live in one RADOS namespace, NamespaceTag(): "tier." + the hex of
// XXH3-128 over (prefix, namespace). A checkpoint of key K spilled by attempt S (a random 64-bit
// spill id) is:
//   chunk objects  c.<K hex>.<S hex>.<seq>  [96-byte chunk header][payload]   (seq 0..n-1)
//   one header     h.<K hex>                the header content below, written last with an
//                                           exclusive create, plus xattrs tier.spill (S in hex),
//                                           tier.chunks, tier.stored (decimal) and tier.used
//   while writing  l.<K hex>.<S hex>        the spill's lease (xattr tier.lease = unix ns)
// A chunk header binds its payload to (key, spill id, segment kind, segment index, chunk index,
// offset, lengths); its checksum is XXH3-64 over those 88 bytes and the logical payload, and the
// same checksum sits in the header's chunk table. The header content is covered by its own
// XXH3-64. Small segments (at most kInlineMaxBytes, the manifest always) live inside the header.
// Integers are little-endian. Everything here is pure: no I/O, no globals.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tier_provider.h"

namespace tier::rados {

using KeyBytes = std::array<uint8_t, TIER_KEY_BYTES>;

inline constexpr uint8_t kHeaderMagic[8] = {'T', 'I', 'E', 'R', 'R', 'H', 'D', '1'};
inline constexpr uint8_t kChunkMagic[8] = {'T', 'I', 'E', 'R', 'R', 'C', 'K', '1'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint32_t kFixedHeaderBytes = 128;
inline constexpr uint32_t kSegmentRecordBytes = 40;
inline constexpr uint32_t kChunkRecordBytes = 24;
inline constexpr uint32_t kChunkHeaderBytes = 96;
inline constexpr uint32_t kChunkChecksumOffset = 88;  // the checksum covers bytes [0, 88)
// What one chunk write adds to its payload, with room for the message: object_mib must leave it
// under osd_max_object_size and osd_max_write_size.
inline constexpr uint64_t kChunkOverheadBytes = 4096;
inline constexpr uint32_t kMaxNamespaceBytes = 8192;      // prefix + namespace
inline constexpr uint64_t kMaxHeaderBytes = 32ull << 20;  // bounds the tables (and one write)
inline constexpr uint64_t kInlineMaxBytes = 64u << 10;    // a segment this small is inline
inline constexpr uint64_t kInlineBudgetBytes = 1u << 20;  // inline bytes per checkpoint

// xattr names on the header and lease objects.
inline constexpr const char* kXattrSpill = "tier.spill";
inline constexpr const char* kXattrChunks = "tier.chunks";
inline constexpr const char* kXattrStored = "tier.stored";
inline constexpr const char* kXattrUsed = "tier.used";
inline constexpr const char* kXattrLease = "tier.lease";

enum : uint32_t { kCodecRaw = 0, kCodecZstd = 1 };
enum : uint32_t { kStorageChunks = 0, kStorageInline = 1 };

struct ChunkRecord {
  uint32_t logical_bytes = 0;
  uint32_t stored_bytes = 0;  // payload bytes in the object (after the chunk header)
  uint32_t codec = kCodecRaw;
  uint64_t checksum = 0;  // XXH3-64 of the chunk header's first 88 bytes + the logical payload
};

struct SegmentRecord {
  uint32_t kind = 0;
  uint32_t index = 0;
  uint64_t logical_bytes = 0;
  uint32_t storage = kStorageChunks;
  uint32_t first_chunk = 0;    // kStorageChunks: its first record in the chunk table
  uint32_t chunk_count = 0;    // ceil(logical_bytes / object_bytes)
  uint64_t inline_offset = 0;  // kStorageInline: where its bytes start in the inline area
};

struct Header {
  uint64_t spill_id = 0;
  KeyBytes key{};
  std::string prefix;        // namespace_prefix option
  std::string namespace_id;  // the host's namespace
  uint64_t created_unix_ns = 0;
  uint64_t logical_bytes = 0;           // sum of segment lengths
  uint64_t stored_bytes = 0;            // chunk objects (headers included) + this header's content
  uint32_t object_bytes = 0;            // payload bytes of a full chunk
  std::vector<SegmentRecord> segments;  // in spill order
  std::vector<ChunkRecord> chunks;
  std::vector<uint8_t> inline_bytes;
};

// What one chunk object's header says (and must say) about its payload.
struct ChunkBinding {
  KeyBytes key{};
  uint64_t spill_id = 0;
  uint32_t kind = 0;
  uint32_t index = 0;
  uint32_t chunk_index = 0;  // within its segment
  uint32_t seq = 0;          // within the checkpoint (the object name's last part)
  uint64_t offset = 0;       // within its segment
  uint32_t logical_bytes = 0;
  uint32_t stored_bytes = 0;
  uint32_t codec = kCodecRaw;
  uint64_t checksum = 0;
};

std::string Hex(std::span<const uint8_t> bytes);
std::string Hex64(uint64_t value);  // 16 lowercase hex digits
bool ParseHex64(std::string_view text, uint64_t* out);

// The RADOS namespace of (prefix, namespace): "tier." + 32 hex digits.
std::string NamespaceTag(const std::string& prefix, const std::string& namespace_id);
std::string HeaderName(const KeyBytes& key);
std::string ChunkName(const KeyBytes& key, uint64_t spill_id, uint32_t seq);
std::string LeaseName(const KeyBytes& key, uint64_t spill_id);

// A parsed object name of this format (anything else: kind kOther).
struct ObjectName {
  enum class Kind { kHeader, kChunk, kLease, kOther } kind = Kind::kOther;
  KeyBytes key{};
  uint64_t spill_id = 0;
  uint32_t seq = 0;
};
ObjectName ParseObjectName(std::string_view name);

// Bytes of the header content for a checkpoint with these counts.
uint64_t HeaderContentBytes(uint64_t namespace_bytes, uint64_t segment_count, uint64_t chunk_count,
                            uint64_t inline_bytes);
// Encodes `header` (tables complete); the header checksum is computed here.
std::vector<uint8_t> EncodeHeader(const Header& header);
// Parses and validates every length, table and the checksum. False with a reason otherwise.
bool ParseHeader(std::span<const uint8_t> bytes, Header* out, std::string* why);

// The 96-byte chunk header for `binding` (checksum included as given).
void EncodeChunkHeader(const ChunkBinding& binding, uint8_t out[kChunkHeaderBytes]);
// Parses a chunk header (magic, version); false when it is not one.
bool ParseChunkHeader(std::span<const uint8_t> bytes, ChunkBinding* out);
// Whether two bindings name the same chunk of the same spill (checksum included).
bool SameBinding(const ChunkBinding& a, const ChunkBinding& b);

}  // namespace tier::rados
