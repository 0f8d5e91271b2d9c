#include "format.h"

#include <xxhash.h>
#if TIER_HAVE_XXH3_DISPATCH
#include <xxh_x86dispatch.h>  // XXH3_* become xxHash's AVX2/AVX-512 dispatcher: see CMakeLists.txt
#endif

#include <cstring>
#include <set>
#include <utility>

#include "tier/provider/little_endian.h"

namespace tier::rados {
namespace {

using provider::Get32;
using provider::Get64;
using provider::Put32;
using provider::Put64;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool ParseKeyHex(std::string_view text, KeyBytes* out) {
  if (text.size() != 2 * TIER_KEY_BYTES) return false;
  for (size_t i = 0; i < TIER_KEY_BYTES; ++i) {
    const int hi = HexDigit(text[2 * i]), lo = HexDigit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return true;
}

// Splits "a.b.c" at dots.
std::vector<std::string_view> Split(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (parts.size() < 8) {
    const size_t dot = text.find('.', start);
    parts.push_back(text.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts;
}

// Header fixed-part offsets (kHeaderSealOffset: the seal).
enum : uint32_t {
  kOffVersion = 8,
  kOffFlags = 12,
  kOffContentBytes = 48,
  kOffSpillId = 56,
  kOffCreated = 64,
  kOffLogical = 72,
  kOffStored = 80,
  kOffObjectBytes = 88,
  kOffSegmentCount = 92,
  kOffChunkCount = 96,
  kOffPrefixBytes = 100,
  kOffNamespaceBytes = 104,
  kOffInlineBytes = 112,
  kOffKey = 128,
};
static_assert(kHeaderSealOffset + kSealBytes == kOffContentBytes);
static_assert(kOffKey + TIER_KEY_BYTES == kFixedHeaderBytes);

// Equal in a time independent of where they differ.
template <size_t N>
bool SameBytes(const std::array<uint8_t, N>& a, const std::array<uint8_t, N>& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < N; ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

Tag ReadTag(const uint8_t* p) {
  Tag t;
  std::memcpy(t.data(), p, kTagBytes);
  return t;
}

bool Fail(std::string* why, std::string text) {
  if (why != nullptr) *why = std::move(text);
  return false;
}

// Checks the segment and chunk tables of a parsed header against each other.
bool CheckTables(const Header& h, std::string* why) {
  std::set<std::pair<uint32_t, uint32_t>> seen;
  uint64_t next_chunk = 0, next_inline = 0, logical = 0;
  for (const SegmentRecord& s : h.segments) {
    if (s.kind < TIER_SEGMENT_KIND_MIN || s.kind > TIER_SEGMENT_KIND_MAX) {
      return Fail(why, "segment of unknown kind " + std::to_string(s.kind));
    }
    if (!seen.insert({s.kind, s.index}).second) return Fail(why, "duplicate segment");
    logical += s.logical_bytes;
    if (s.storage == kStorageInline) {
      if (s.inline_offset != next_inline || s.logical_bytes > kInlineMaxBytes) {
        return Fail(why, "inline segment out of place");
      }
      next_inline += s.logical_bytes;
      continue;
    }
    if (s.storage != kStorageChunks) return Fail(why, "unknown segment storage");
    const uint64_t want =
        s.logical_bytes / h.object_bytes + (s.logical_bytes % h.object_bytes != 0 ? 1 : 0);
    if (s.first_chunk != next_chunk || s.chunk_count != want ||
        next_chunk + s.chunk_count > h.chunks.size()) {
      return Fail(why, "segment chunk range does not match its length");
    }
    for (uint32_t c = 0; c < s.chunk_count; ++c) {
      const ChunkRecord& r = h.chunks[s.first_chunk + c];
      const uint64_t expect = std::min<uint64_t>(
          h.object_bytes, s.logical_bytes - static_cast<uint64_t>(c) * h.object_bytes);
      if (r.logical_bytes != expect || r.stored_bytes > h.object_bytes ||
          (r.codec != kCodecRaw && r.codec != kCodecZstd) ||
          (r.codec == kCodecRaw && r.stored_bytes != r.logical_bytes)) {
        return Fail(why, "chunk record " + std::to_string(s.first_chunk + c) + " is inconsistent");
      }
    }
    next_chunk += s.chunk_count;
  }
  if (next_chunk != h.chunks.size()) return Fail(why, "chunk table length mismatch");
  if (next_inline != h.inline_bytes.size()) return Fail(why, "inline area length mismatch");
  if (logical != h.logical_bytes) return Fail(why, "logical bytes mismatch");
  return true;
}

}  // namespace

std::string Hex(std::span<const uint8_t> bytes) {
  static const char* const kDigits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

std::string Hex64(uint64_t value) {
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(value >> (56 - 8 * i));
  return Hex(bytes);
}

bool ParseHex64(std::string_view text, uint64_t* out) {
  if (text.size() != 16) return false;
  uint64_t v = 0;
  for (char c : text) {
    const int d = HexDigit(c);
    if (d < 0) return false;
    v = v << 4 | static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

std::string NamespaceTag(const std::string& prefix, const std::string& namespace_id,
                         const std::string& key_id) {
  // Length-prefixed, so ("a/b", "c") and ("a", "b/c") differ. The format version and the key id
  // keep instances that cannot read each other's objects out of each other's namespace.
  std::string bound = "format " + std::to_string(kFormatVersion) + " key " + key_id + " " +
                      std::to_string(prefix.size()) + ":" + prefix + namespace_id;
  const XXH128_hash_t h = XXH3_128bits(bound.data(), bound.size());
  return "tier." + Hex64(h.high64) + Hex64(h.low64);
}

std::string HeaderName(const KeyBytes& key) {
  return "h." + Hex(key);
}

std::string ChunkName(const KeyBytes& key, uint64_t spill_id, uint32_t seq) {
  return "c." + Hex(key) + "." + Hex64(spill_id) + "." + std::to_string(seq);
}

std::string LeaseName(const KeyBytes& key, uint64_t spill_id) {
  return "l." + Hex(key) + "." + Hex64(spill_id);
}

ObjectName ParseObjectName(std::string_view name) {
  ObjectName out;
  const std::vector<std::string_view> parts = Split(name);
  if (parts.empty() || !ParseKeyHex(parts.size() > 1 ? parts[1] : "", &out.key)) return out;
  if (parts[0] == "h" && parts.size() == 2) {
    out.kind = ObjectName::Kind::kHeader;
  } else if (parts[0] == "l" && parts.size() == 3 && ParseHex64(parts[2], &out.spill_id)) {
    out.kind = ObjectName::Kind::kLease;
  } else if (parts[0] == "c" && parts.size() == 4 && ParseHex64(parts[2], &out.spill_id) &&
             !parts[3].empty() && parts[3].size() <= 10 &&
             parts[3].find_first_not_of("0123456789") == std::string_view::npos) {
    const uint64_t seq = std::stoull(std::string(parts[3]));
    if (seq <= UINT32_MAX && std::to_string(seq) == parts[3]) {
      out.kind = ObjectName::Kind::kChunk;
      out.seq = static_cast<uint32_t>(seq);
    }
  }
  return out;
}

uint64_t HeaderContentBytes(uint64_t namespace_bytes, uint64_t segment_count, uint64_t chunk_count,
                            uint64_t inline_bytes) {
  return kFixedHeaderBytes + namespace_bytes + segment_count * kSegmentRecordBytes +
         chunk_count * kChunkRecordBytes + inline_bytes;
}

std::vector<uint8_t> EncodeHeader(const Header& h, const Sealer& sealer) {
  const uint64_t ns_bytes = h.prefix.size() + h.namespace_id.size();
  const uint64_t total =
      HeaderContentBytes(ns_bytes, h.segments.size(), h.chunks.size(), h.inline_bytes.size());
  std::vector<uint8_t> out(total, 0);
  uint8_t* p = out.data();
  std::memcpy(p, kHeaderMagic, 8);
  Put32(p + kOffVersion, kFormatVersion);
  Put32(p + kOffFlags, sealer.keyed() ? kHeaderFlagKeyed : 0);
  Put64(p + kOffContentBytes, total);
  Put64(p + kOffSpillId, h.spill_id);
  Put64(p + kOffCreated, h.created_unix_ns);
  Put64(p + kOffLogical, h.logical_bytes);
  Put64(p + kOffStored, h.stored_bytes);
  Put32(p + kOffObjectBytes, h.object_bytes);
  Put32(p + kOffSegmentCount, static_cast<uint32_t>(h.segments.size()));
  Put32(p + kOffChunkCount, static_cast<uint32_t>(h.chunks.size()));
  Put32(p + kOffPrefixBytes, static_cast<uint32_t>(h.prefix.size()));
  Put32(p + kOffNamespaceBytes, static_cast<uint32_t>(h.namespace_id.size()));
  Put64(p + kOffInlineBytes, h.inline_bytes.size());
  std::memcpy(p + kOffKey, h.key.data(), TIER_KEY_BYTES);
  uint8_t* q = p + kFixedHeaderBytes;
  std::memcpy(q, h.prefix.data(), h.prefix.size());
  q += h.prefix.size();
  std::memcpy(q, h.namespace_id.data(), h.namespace_id.size());
  q += h.namespace_id.size();
  for (const SegmentRecord& s : h.segments) {
    Put32(q, s.kind);
    Put32(q + 4, s.index);
    Put64(q + 8, s.logical_bytes);
    Put32(q + 16, s.storage);
    Put32(q + 20, s.first_chunk);
    Put32(q + 24, s.chunk_count);
    Put64(q + 32, s.inline_offset);
    std::memcpy(q + 40, s.tag.data(), kTagBytes);
    q += kSegmentRecordBytes;
  }
  for (const ChunkRecord& c : h.chunks) {
    Put32(q, c.logical_bytes);
    Put32(q + 4, c.stored_bytes);
    Put32(q + 8, c.codec);
    std::memcpy(q + 16, c.tag.data(), kTagBytes);
    q += kChunkRecordBytes;
  }
  if (!h.inline_bytes.empty()) std::memcpy(q, h.inline_bytes.data(), h.inline_bytes.size());
  const Seal seal = sealer.SealHeader(out, kHeaderSealOffset);
  std::memcpy(p + kHeaderSealOffset, seal.data(), kSealBytes);
  return out;
}

namespace {

// The tables after the fixed part and the namespace; `q` points at the first segment record.
void ReadTables(const uint8_t* q, uint64_t segments, uint64_t chunks, uint64_t inline_bytes,
                Header* h) {
  h->segments.resize(segments);
  for (SegmentRecord& s : h->segments) {
    s.kind = Get32(q);
    s.index = Get32(q + 4);
    s.logical_bytes = Get64(q + 8);
    s.storage = Get32(q + 16);
    s.first_chunk = Get32(q + 20);
    s.chunk_count = Get32(q + 24);
    s.inline_offset = Get64(q + 32);
    s.tag = ReadTag(q + 40);
    q += kSegmentRecordBytes;
  }
  h->chunks.resize(chunks);
  for (ChunkRecord& c : h->chunks) {
    c.logical_bytes = Get32(q);
    c.stored_bytes = Get32(q + 4);
    c.codec = Get32(q + 8);
    c.tag = ReadTag(q + 16);
    q += kChunkRecordBytes;
  }
  h->inline_bytes.assign(q, q + inline_bytes);
}

// Every inline segment's bytes must carry the tag of its own binding: an inline segment swapped
// with another, or copied from another checkpoint, fails here.
bool CheckInlineTags(const Header& h, const Sealer& sealer, std::string* why) {
  for (const SegmentRecord& s : h.segments) {
    if (s.storage != kStorageInline) continue;
    const std::span<const uint8_t> bytes(h.inline_bytes.data() + s.inline_offset, s.logical_bytes);
    if (!SameBytes(PieceTag(sealer, InlineBinding(h, s), bytes), s.tag)) {
      return Fail(why, "inline segment kind " + std::to_string(s.kind) + " index " +
                           std::to_string(s.index) + " fails its tag");
    }
  }
  return true;
}

// The fixed part's magic, version, length, flags and seal.
bool CheckSealed(std::span<const uint8_t> bytes, const Sealer& sealer, std::string* why) {
  if (bytes.size() < kFixedHeaderBytes) return Fail(why, "shorter than the fixed header");
  const uint8_t* p = bytes.data();
  if (std::memcmp(p, kHeaderMagic, 8) != 0) return Fail(why, "bad magic");
  if (Get32(p + kOffVersion) != kFormatVersion) {
    return Fail(why, "format version " + std::to_string(Get32(p + kOffVersion)));
  }
  if (Get64(p + kOffContentBytes) != bytes.size() || bytes.size() > kMaxHeaderBytes) {
    return Fail(why, "content length mismatch");
  }
  if (Get32(p + kOffFlags) != (sealer.keyed() ? kHeaderFlagKeyed : 0u)) {
    return Fail(why, sealer.keyed() ? "not sealed with an auth key" : "sealed with an auth key");
  }
  Seal stored{};
  std::memcpy(stored.data(), p + kHeaderSealOffset, kSealBytes);
  if (!SameBytes(stored, sealer.SealHeader(bytes, kHeaderSealOffset))) {
    return Fail(why,
                sealer.keyed() ? "seal mismatch (not sealed with this auth key)" : "seal mismatch");
  }
  return true;
}

}  // namespace

bool ParseHeader(std::span<const uint8_t> bytes, const Sealer& sealer, Header* out,
                 std::string* why) {
  if (!CheckSealed(bytes, sealer, why)) return false;
  const uint8_t* p = bytes.data();
  const uint64_t segments = Get32(p + kOffSegmentCount), chunks = Get32(p + kOffChunkCount);
  const uint64_t prefix = Get32(p + kOffPrefixBytes), ns = Get32(p + kOffNamespaceBytes);
  const uint64_t inline_bytes = Get64(p + kOffInlineBytes);
  Header h;
  h.object_bytes = Get32(p + kOffObjectBytes);
  if (segments == 0 || segments > TIER_MAX_SEGMENTS || prefix + ns > kMaxNamespaceBytes ||
      inline_bytes > kInlineBudgetBytes + kInlineMaxBytes || h.object_bytes < 4096 ||
      h.object_bytes > (128u << 20) ||
      HeaderContentBytes(prefix + ns, segments, chunks, inline_bytes) != bytes.size()) {
    return Fail(why, "counts out of bounds");
  }
  h.spill_id = Get64(p + kOffSpillId);
  h.created_unix_ns = Get64(p + kOffCreated);
  h.logical_bytes = Get64(p + kOffLogical);
  h.stored_bytes = Get64(p + kOffStored);
  std::memcpy(h.key.data(), p + kOffKey, TIER_KEY_BYTES);
  const uint8_t* q = p + kFixedHeaderBytes;
  h.prefix.assign(reinterpret_cast<const char*>(q), prefix);
  q += prefix;
  h.namespace_id.assign(reinterpret_cast<const char*>(q), ns);
  q += ns;
  ReadTables(q, segments, chunks, inline_bytes, &h);
  if (!CheckTables(h, why) || !CheckInlineTags(h, sealer, why)) return false;
  *out = std::move(h);
  return true;
}

ChunkBinding InlineBinding(const Header& header, const SegmentRecord& s) {
  ChunkBinding b;
  b.key = header.key;
  b.spill_id = header.spill_id;
  b.kind = s.kind;
  b.index = s.index;
  b.chunk_index = 0;
  b.seq = kInlineSeq;
  b.offset = 0;
  b.logical_bytes = static_cast<uint32_t>(s.logical_bytes);
  b.stored_bytes = static_cast<uint32_t>(s.logical_bytes);
  b.codec = kCodecRaw;
  return b;
}

Tag PieceTag(const Sealer& sealer, const ChunkBinding& binding, std::span<const uint8_t> logical) {
  uint8_t encoded[kChunkHeaderBytes];
  EncodeChunkHeader(binding, encoded);
  return sealer.TagPiece({encoded, kBindingBytes}, logical);
}

void EncodeChunkHeader(const ChunkBinding& b, uint8_t out[kChunkHeaderBytes]) {
  std::memset(out, 0, kChunkHeaderBytes);
  std::memcpy(out, kChunkMagic, 8);
  Put32(out + 8, kFormatVersion);
  Put32(out + 12, b.codec);
  std::memcpy(out + 16, b.key.data(), TIER_KEY_BYTES);
  Put64(out + 48, b.spill_id);
  Put32(out + 56, b.kind);
  Put32(out + 60, b.index);
  Put32(out + 64, b.chunk_index);
  Put32(out + 68, b.seq);
  Put64(out + 72, b.offset);
  Put32(out + 80, b.logical_bytes);
  Put32(out + 84, b.stored_bytes);
  std::memcpy(out + kBindingBytes, b.tag.data(), kTagBytes);
}

bool ParseChunkHeader(std::span<const uint8_t> bytes, ChunkBinding* out) {
  if (bytes.size() < kChunkHeaderBytes) return false;
  const uint8_t* p = bytes.data();
  if (std::memcmp(p, kChunkMagic, 8) != 0 || Get32(p + 8) != kFormatVersion) return false;
  out->codec = Get32(p + 12);
  std::memcpy(out->key.data(), p + 16, TIER_KEY_BYTES);
  out->spill_id = Get64(p + 48);
  out->kind = Get32(p + 56);
  out->index = Get32(p + 60);
  out->chunk_index = Get32(p + 64);
  out->seq = Get32(p + 68);
  out->offset = Get64(p + 72);
  out->logical_bytes = Get32(p + 80);
  out->stored_bytes = Get32(p + 84);
  if (Get64(p + 88) != 0) return false;  // reserved
  out->tag = ReadTag(p + kBindingBytes);
  return true;
}

bool SameTag(const Tag& a, const Tag& b) {
  return SameBytes(a, b);
}

bool SameBinding(const ChunkBinding& a, const ChunkBinding& b) {
  return a.key == b.key && a.spill_id == b.spill_id && a.kind == b.kind && a.index == b.index &&
         a.chunk_index == b.chunk_index && a.seq == b.seq && a.offset == b.offset &&
         a.logical_bytes == b.logical_bytes && a.stored_bytes == b.stored_bytes &&
         a.codec == b.codec && SameBytes(a.tag, b.tag);
}

}  // namespace tier::rados
