// format.h -- how a checkpoint is laid out in RADOS objects, version 2 (README.md has the table).
//
// All objects of one namespace live in one RADOS namespace, NamespaceTag(): "tier." + the hex of
// XXH3-128 over (format version, prefix, namespace, the auth key's id). A checkpoint of key K
// spilled by attempt S (a random 64-bit spill id) is:
//   chunk objects  c.<K hex>.<S hex>.<seq>  [112-byte chunk header][payload]   (seq 0..n-1)
//   one header     h.<K hex>                the header content below, written last with an
//                                           exclusive create, plus xattrs tier.spill (S in hex),
//                                           tier.chunks, tier.stored (decimal) and tier.used
//   while writing  l.<K hex>.<S hex>        the spill's lease (xattr tier.lease = unix ns)
// Every piece of a checkpoint -- a chunk, or a segment stored inline in the header -- is bound to
// its place: its binding (key, spill id, segment kind and index, chunk index, seq, offset,
// lengths, codec; 96 bytes) and its logical bytes give its tag (auth.h: keyed Poly1305 or
// XXH3-128), which the header records and a chunk header repeats. The header content is covered
// by its seal (keyed HMAC-SHA256 or XXH3-128). Small segments (at most kInlineMaxBytes, the
// manifest always) live inside the header. Integers are little-endian. Everything here is pure:
// no I/O, no globals.
//
// Format 1 (magic TIERRHD1, unkeyed XXH3-64, inline segments unbound) lived in namespaces tagged
// without the version: a format-2 instance never looks there, so its checkpoints are misses, never
// read (they cannot be verified against a writer who recomputes XXH3) and never removed by it.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "auth.h"
#include "tier_provider.h"

namespace tier::rados {

using KeyBytes = std::array<uint8_t, TIER_KEY_BYTES>;

inline constexpr uint8_t kHeaderMagic[8] = {'T', 'I', 'E', 'R', 'R', 'H', 'D', '2'};
inline constexpr uint8_t kChunkMagic[8] = {'T', 'I', 'E', 'R', 'R', 'C', 'K', '2'};
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kFixedHeaderBytes = 160;
inline constexpr uint32_t kHeaderSealOffset = 16;  // kSealBytes, taken as zero when sealing
inline constexpr uint32_t kSegmentRecordBytes = 56;
inline constexpr uint32_t kChunkRecordBytes = 32;
inline constexpr uint32_t kBindingBytes = 96;  // a piece's binding: the tag covers it
inline constexpr uint32_t kChunkHeaderBytes = kBindingBytes + kTagBytes;
inline constexpr uint32_t kInlineSeq = UINT32_MAX;  // the seq in an inline segment's binding
inline constexpr uint32_t kHeaderFlagKeyed = 1;     // sealed with the auth key
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
  Tag tag{};  // of its binding and its logical bytes
};

struct SegmentRecord {
  uint32_t kind = 0;
  uint32_t index = 0;
  uint64_t logical_bytes = 0;
  uint32_t storage = kStorageChunks;
  uint32_t first_chunk = 0;    // kStorageChunks: its first record in the chunk table
  uint32_t chunk_count = 0;    // ceil(logical_bytes / object_bytes)
  uint64_t inline_offset = 0;  // kStorageInline: where its bytes start in the inline area
  Tag tag{};                   // kStorageInline: of its binding (InlineBinding) and its bytes
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

// What one piece's binding says (and must say) about its bytes: a chunk object's header, or the
// binding of an inline segment (InlineBinding).
struct ChunkBinding {
  KeyBytes key{};
  uint64_t spill_id = 0;
  uint32_t kind = 0;
  uint32_t index = 0;
  uint32_t chunk_index = 0;  // within its segment
  uint32_t seq = 0;          // within the checkpoint (the object name's last part); kInlineSeq
  uint64_t offset = 0;       // within its segment
  uint32_t logical_bytes = 0;
  uint32_t stored_bytes = 0;
  uint32_t codec = kCodecRaw;
  Tag tag{};
};

std::string Hex(std::span<const uint8_t> bytes);
std::string Hex64(uint64_t value);  // 16 lowercase hex digits
bool ParseHex64(std::string_view text, uint64_t* out);

// The RADOS namespace of (prefix, namespace, auth key id): "tier." + 32 hex digits.
std::string NamespaceTag(const std::string& prefix, const std::string& namespace_id,
                         const std::string& key_id = "");
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
// Encodes `header` (tables and tags complete); the seal is computed here with `sealer`.
std::vector<uint8_t> EncodeHeader(const Header& header, const Sealer& sealer);
// Parses and validates every length and table, the seal (keyed exactly when `sealer` is) and the
// tag of every inline segment. False with a reason otherwise.
bool ParseHeader(std::span<const uint8_t> bytes, const Sealer& sealer, Header* out,
                 std::string* why);

// The binding of the inline segment `s` of `header`: chunk index 0, seq kInlineSeq, offset 0.
ChunkBinding InlineBinding(const Header& header, const SegmentRecord& s);
// The tag of `binding` (its tag field ignored) over the piece's logical bytes.
Tag PieceTag(const Sealer& sealer, const ChunkBinding& binding, std::span<const uint8_t> logical);

// The 112-byte chunk header for `binding` (the binding, then its tag as given).
void EncodeChunkHeader(const ChunkBinding& binding, uint8_t out[kChunkHeaderBytes]);
// Parses a chunk header (magic, version); false when it is not one.
bool ParseChunkHeader(std::span<const uint8_t> bytes, ChunkBinding* out);
// Whether two tags are equal (in a time independent of where they differ).
bool SameTag(const Tag& a, const Tag& b);
// Whether two bindings name the same chunk of the same spill (tag included).
bool SameBinding(const ChunkBinding& a, const ChunkBinding& b);

}  // namespace tier::rados
