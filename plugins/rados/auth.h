// auth.h -- what seals a checkpoint's objects: the header's seal and the tag of every segment
// (inline or chunk), keyed by the fleet's secret (option auth_key_file) or, without one, unkeyed.
//
// Keyed: the header seal is HMAC-SHA256 under a key derived from the secret; a tag is Poly1305
// under a one-time key HMAC-SHA256(chunk key, binding), so no two pieces share a Poly1305 key and
// nobody without the secret can compute a seal or a tag (README.md, "What an attacker with pool
// write access can and cannot do"). Unkeyed: XXH3-128 for both, which catches damage and
// misplaced pieces but not a writer who recomputes it. The key id (a digest of the secret, never
// the secret) is part of the RADOS namespace, so servers with different secrets never meet.
// Immutable after construction; any thread.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>

#include <tier/status.h>

namespace tier::rados {

inline constexpr uint32_t kTagBytes = 16;
inline constexpr uint32_t kSealBytes = 32;
using Tag = std::array<uint8_t, kTagBytes>;
using Seal = std::array<uint8_t, kSealBytes>;

class Sealer {
 public:
  // No secret: XXH3-128 seals and tags.
  Sealer() = default;
  // The secret in `path`: a regular file of the caller (not a link), readable by its owner only,
  // of 16 to 4096 bytes once trailing whitespace is dropped. INVALID_ARGUMENT naming the option
  // and the problem otherwise. Any thread.
  static Result<Sealer> FromKeyFile(const std::string& path);
  // For tests: a secret given directly (at least 16 bytes).
  static Sealer FromSecret(std::span<const uint8_t> secret);

  bool keyed() const { return keyed_; }
  // 32 hex digits naming the secret ("" unkeyed); safe to show and to store.
  const std::string& key_id() const { return key_id_; }

  // The seal of a header's content, `seal_at` being where its kSealBytes sit (taken as zero).
  Seal SealHeader(std::span<const uint8_t> content, size_t seal_at) const;
  // The tag of a piece's bytes under its encoded binding.
  Tag TagPiece(std::span<const uint8_t> binding, std::span<const uint8_t> bytes) const;

 private:
  bool keyed_ = false;
  std::array<uint8_t, 32> header_key_{};
  std::array<uint8_t, 32> piece_key_{};
  std::string key_id_;
};

}  // namespace tier::rados
