#include "auth.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <vector>

#include <tier/check.h>

namespace tier::rados {
namespace {

constexpr size_t kMinSecretBytes = 16;
constexpr size_t kMaxSecretBytes = 4096;

// One MAC computation over `parts`, into `out` (its size is the MAC's). The algorithms are
// fetched once; a failure of the library here is a broken installation: TIER_CHECK.
void Mac(const char* name, std::span<const uint8_t> key,
         std::initializer_list<std::span<const uint8_t>> parts, std::span<uint8_t> out) {
  static EVP_MAC* const hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  static EVP_MAC* const poly = EVP_MAC_fetch(nullptr, "POLY1305", nullptr);
  EVP_MAC* mac = std::string_view(name) == "HMAC" ? hmac : poly;
  TIER_CHECK(mac != nullptr);
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  TIER_CHECK(ctx != nullptr);
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  const bool is_hmac = mac == hmac;
  bool ok = EVP_MAC_init(ctx, key.data(), key.size(), is_hmac ? params : nullptr) == 1;
  for (std::span<const uint8_t> part : parts) {
    ok = ok && EVP_MAC_update(ctx, part.data(), part.size()) == 1;
  }
  size_t written = 0;
  ok = ok && EVP_MAC_final(ctx, out.data(), &written, out.size()) == 1 && written == out.size();
  EVP_MAC_CTX_free(ctx);
  TIER_CHECK(ok);
}

std::array<uint8_t, 32> Derive(std::span<const uint8_t> secret, std::string_view label) {
  std::array<uint8_t, 32> out{};
  Mac("HMAC", secret, {{reinterpret_cast<const uint8_t*>(label.data()), label.size()}}, out);
  return out;
}

Status Bad(const std::string& path, const std::string& why) {
  return Status::InvalidArgument("rados: option 'auth_key_file': '" + path + "' " + why);
}

}  // namespace

Sealer Sealer::FromSecret(std::span<const uint8_t> secret) {
  TIER_CHECK(secret.size() >= kMinSecretBytes);
  Sealer s;
  s.keyed_ = true;
  s.header_key_ = Derive(secret, "tier-rados format 2 header seal");
  s.piece_key_ = Derive(secret, "tier-rados format 2 piece tag");
  const std::array<uint8_t, 32> id = Derive(secret, "tier-rados format 2 key id");
  static const char* const kDigits = "0123456789abcdef";
  for (size_t i = 0; i < 16; ++i) {
    s.key_id_.push_back(kDigits[id[i] >> 4]);
    s.key_id_.push_back(kDigits[id[i] & 15]);
  }
  return s;
}

Result<Sealer> Sealer::FromKeyFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Bad(path, "cannot be opened: " + Status::ErrnoText(errno));
  struct stat st {};
  std::vector<uint8_t> secret;
  std::string why;
  if (::fstat(fd, &st) != 0) {
    why = "cannot be examined: " + Status::ErrnoText(errno);
  } else if (!S_ISREG(st.st_mode)) {
    why = "is not a regular file";
  } else if ((st.st_mode & 077) != 0) {
    why = "may be read or written by others than its owner (chmod 600 it)";
  } else if (st.st_size > static_cast<off_t>(kMaxSecretBytes)) {
    why = "is longer than " + std::to_string(kMaxSecretBytes) + " bytes";
  } else {
    secret.resize(static_cast<size_t>(st.st_size));
    const ssize_t n = ::read(fd, secret.data(), secret.size());
    if (n != static_cast<ssize_t>(secret.size())) why = "could not be read whole";
  }
  ::close(fd);
  if (!why.empty()) return Bad(path, why);
  // Trailing whitespace is not part of the secret: `openssl rand -hex 32 > FILE` and an editor
  // that adds a newline give the same key.
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r' ||
                             secret.back() == ' ' || secret.back() == '\t')) {
    secret.pop_back();
  }
  if (secret.size() < kMinSecretBytes) {
    return Bad(path, "holds fewer than " + std::to_string(kMinSecretBytes) +
                         " bytes of secret (e.g. `openssl rand -hex 32 > FILE`)");
  }
  Sealer s = FromSecret(secret);
  std::memset(secret.data(), 0, secret.size());
  return s;
}

Seal Sealer::SealHeader(std::span<const uint8_t> content, size_t seal_at) const {
  TIER_CHECK(seal_at + kSealBytes <= content.size());
  static const uint8_t kZero[kSealBytes] = {};
  const std::span<const uint8_t> before = content.first(seal_at);
  const std::span<const uint8_t> after = content.subspan(seal_at + kSealBytes);
  Seal out{};
  if (keyed_) {
    Mac("HMAC", header_key_, {before, {kZero, kSealBytes}, after}, out);
    return out;
  }
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, before.data(), before.size());
  XXH3_128bits_update(&state, kZero, kSealBytes);
  XXH3_128bits_update(&state, after.data(), after.size());
  XXH128_canonicalFromHash(reinterpret_cast<XXH128_canonical_t*>(out.data()),
                           XXH3_128bits_digest(&state));
  return out;
}

Tag Sealer::TagPiece(std::span<const uint8_t> binding, std::span<const uint8_t> bytes) const {
  Tag out{};
  if (keyed_) {
    // A one-time Poly1305 key per piece: the binding names one piece of one spill of one key.
    std::array<uint8_t, 32> one_time{};
    Mac("HMAC", piece_key_, {binding}, one_time);
    Mac("POLY1305", one_time, {bytes}, out);
    return out;
  }
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, binding.data(), binding.size());
  XXH3_128bits_update(&state, bytes.data(), bytes.size());
  XXH128_canonicalFromHash(reinterpret_cast<XXH128_canonical_t*>(out.data()),
                           XXH3_128bits_digest(&state));
  return out;
}

}  // namespace tier::rados
