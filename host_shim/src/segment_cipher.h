// segment_cipher.h -- encryption at rest for what the Host hands a provider
// (HostOptions::encryption).
//
// AES-256-GCM (OpenSSL libcrypto). Every data segment a provider stores is bare ciphertext of the
// plaintext's length under its own random 96-bit nonce, so a restore reads it into the Host copy
// and opens it in place. The nonces and tags travel in the manifest segment, which is sealed as a
// whole behind a 40-byte header ("TKC1", key id, nonce, tag): its plaintext is a table (count,
// then kind, index, nonce and tag of each data segment) followed by the Host's manifest. The
// additional authenticated data of every seal binds the namespace, the checkpoint key (the tenant
// is in it through the salted ids), the segment kind and index and the plaintext length, so a
// segment or manifest moved, swapped or replayed under another key fails its tag. The data key is
// derived from the master key with HKDF-SHA256 per namespace; the key id is the first 8 bytes of
// SHA-256 of the master key. Older master keys open what they sealed (rotation). Keys never leave
// this object. Thread-safe: any method from any thread.
#pragma once

#include <tier/status.h>
#include "tier_provider.h"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tier {

// A checkpoint's segments as a provider sees them when encryption is on: `stored[i]` is the sealed
// form of `plain[i]`. For a spill every stored segment is in a buffer aligned to 4 KiB (like a Host
// copy's) that this object owns; for a restore only the manifest is, the data segments being the
// caller's own buffers (opened in place).
struct SealedSegments {
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::vector<tier_segment> plain, stored;
  std::vector<std::unique_ptr<std::byte, Free>> buffers;
};

class SegmentCipher {
 public:
  static constexpr size_t kHeaderBytes = 40;  // of a sealed manifest: "TKC1", key id, nonce, tag

  // Reads the master key file (and older ones, for reading only); see CheckKeyFile.
  // Unsupported when built without OpenSSL.
  static Result<std::unique_ptr<SegmentCipher>> Open(const std::string& namespace_id,
                                                     const std::string& key_file,
                                                     const std::vector<std::string>& old_key_files);
  // The key file's rules: a regular file, mode without group or other bits, owned by this
  // process's effective uid, holding 32 raw bytes or 64 hex digits (one trailing newline allowed).
  static Result<std::array<uint8_t, 32>> ReadKeyFile(const std::string& path);
  static bool Available();  // built with OpenSSL

  // Writes header + ciphertext of `plain` into `out` (plain.size() + kHeaderBytes).
  Status Seal(const tier_key& key, tier_segment_kind kind, uint32_t index,
              std::span<const std::byte> plain, std::span<std::byte> out) const;
  // Checks and decrypts `stored` into `plain` (stored.size() - kHeaderBytes). DATA_LOSS on a
  // failed tag or an unknown key id (counted); `plain` may hold garbage then, never to be served.
  Status Unseal(const tier_key& key, tier_segment_kind kind, uint32_t index,
                std::span<const std::byte> stored, std::span<std::byte> plain) const;

  // Allocates the sealed buffers of `plain` (NO_SPACE when memory is short) and, for a spill
  // (`seal`), seals every segment into them; for a restore they are left for the provider to fill.
  Result<std::shared_ptr<SealedSegments>> Prepare(const tier_key& key,
                                                  std::vector<tier_segment> plain, bool seal) const;
  // Opens every stored segment into its plain buffer (after a restore); the first failure.
  Status OpenAll(const tier_key& key, const SealedSegments& sealed) const;
  // The plaintext manifest of a stored (sealed) manifest segment, as enumerate returns it.
  Result<std::vector<std::byte>> OpenManifest(const tier_key& key, uint32_t index,
                                              std::span<const std::byte> stored) const;
  // Bytes a sealed manifest adds to the plaintext one, for a checkpoint of `data_segments`
  // segments besides the manifest (stat and enumerate report plaintext lengths).
  static uint64_t ManifestOverheadBytes(size_t data_segments);

  uint64_t tag_failures() const { return tag_failures_.load(); }
  uint64_t unknown_key() const { return unknown_key_.load(); }
  // The current key's id in hex (safe to log: a hash prefix, not the key).
  std::string key_id_hex() const;

  struct DataKey {
    std::array<uint8_t, 8> id{};
    std::array<uint8_t, 32> key{};
  };
  explicit SegmentCipher(std::string namespace_id, std::vector<DataKey> keys)
      : namespace_id_(std::move(namespace_id)), keys_(std::move(keys)) {}
  ~SegmentCipher();

 private:
  const DataKey* KeyOf(const std::byte* header) const;  // null: an unknown key id
  std::vector<uint8_t> Aad(const tier_key& key, tier_segment_kind kind, uint32_t index,
                           uint64_t length) const;
  std::string namespace_id_;
  std::vector<DataKey> keys_;  // [0] seals; all open
  mutable std::atomic<uint64_t> tag_failures_{0}, unknown_key_{0};
};

}  // namespace tier
