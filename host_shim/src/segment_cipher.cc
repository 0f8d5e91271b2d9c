#include "segment_cipher.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#if TIER_HAVE_ENCRYPTION
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#endif

namespace tier {
namespace {

constexpr char kMagic[4] = {'T', 'K', 'C', '1'};
constexpr size_t kIdOffset = 4, kNonceOffset = 12, kTagOffset = 24, kNonceBytes = 12,
                 kTagBytes = 16;
static_assert(kTagOffset + kTagBytes == SegmentCipher::kHeaderBytes);

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void PutU32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void PutU64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

#if TIER_HAVE_ENCRYPTION
struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using Ctx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

Result<SegmentCipher::DataKey> Derive(const std::array<uint8_t, 32>& master,
                                      const std::string& namespace_id) {
  SegmentCipher::DataKey out;
  uint8_t digest[SHA256_DIGEST_LENGTH];
  SHA256(master.data(), master.size(), digest);
  std::memcpy(out.id.data(), digest, out.id.size());
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  if (kdf == nullptr) return Status::Internal("encryption: OpenSSL has no HKDF");
  EVP_KDF_CTX* kctx = EVP_KDF_CTX_new(kdf);
  EVP_KDF_free(kdf);
  if (kctx == nullptr) return Status::Internal("encryption: HKDF context");
  static const char kSalt[] = "tier-host encryption at rest v1";
  std::string info = "segment data key\n" + namespace_id;
  char digest_name[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest_name, 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(master.data()),
                                        master.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<char*>(kSalt),
                                        sizeof(kSalt) - 1),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info.data(), info.size()),
      OSSL_PARAM_construct_end()};
  const int ok = EVP_KDF_derive(kctx, out.key.data(), out.key.size(), params);
  EVP_KDF_CTX_free(kctx);
  OPENSSL_cleanse(digest, sizeof(digest));
  if (ok != 1) return Status::Internal("encryption: HKDF derive failed");
  return out;
}
#endif

}  // namespace

bool SegmentCipher::Available() {
  return TIER_HAVE_ENCRYPTION != 0;
}

Result<std::array<uint8_t, 32>> SegmentCipher::ReadKeyFile(const std::string& path) {
  const std::string what = "encryption key file " + path + ": ";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Status::FromErrno(errno, what + "cannot open");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno(err, what + "cannot stat");
  }
  auto refuse = [&](const std::string& why) -> Status {
    ::close(fd);
    return Status::InvalidArgument(what + why);
  };
  if (!S_ISREG(st.st_mode)) return refuse("not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return refuse(std::string("mode ") + mode + " gives group or others access (chmod 0600 it)");
  }
  if (st.st_uid != ::geteuid()) {
    return refuse("owned by uid " + std::to_string(st.st_uid) + ", not this process's uid " +
                  std::to_string(::geteuid()));
  }
  char buf[130];
  ssize_t got = 0, n = 0;
  while ((n = ::read(fd, buf + got, sizeof(buf) - static_cast<size_t>(got))) > 0) {
    got += n;
    if (got == static_cast<ssize_t>(sizeof(buf))) break;
  }
  ::close(fd);
  std::array<uint8_t, 32> key{};
  size_t len = static_cast<size_t>(got);
  if (len == 32) {
    std::memcpy(key.data(), buf, 32);
  } else {
    if (len == 65 && buf[64] == '\n') len = 64;
    bool hex = len == 64;
    for (size_t i = 0; hex && i < 32; ++i) {
      const int hi = HexDigit(buf[2 * i]), lo = HexDigit(buf[2 * i + 1]);
      hex = hi >= 0 && lo >= 0;
      key[i] = static_cast<uint8_t>(hi * 16 + lo);
    }
    std::memset(buf, 0, sizeof(buf));
    if (!hex) {
      return Status::InvalidArgument(what + "holds " + std::to_string(got) +
                                     " bytes; a key is 32 raw bytes or 64 hex digits");
    }
  }
  std::memset(buf, 0, sizeof(buf));
  return key;
}

Result<std::unique_ptr<SegmentCipher>> SegmentCipher::Open(
    const std::string& namespace_id, const std::string& key_file,
    const std::vector<std::string>& old_key_files) {
#if TIER_HAVE_ENCRYPTION
  std::vector<DataKey> keys;
  std::vector<std::string> files{key_file};
  files.insert(files.end(), old_key_files.begin(), old_key_files.end());
  for (const std::string& file : files) {
    auto master = ReadKeyFile(file);
    if (!master.ok()) return master.status();
    auto derived = Derive(master.value(), namespace_id);
    OPENSSL_cleanse(master.value().data(), master.value().size());
    if (!derived.ok()) return derived.status();
    keys.push_back(derived.value());
  }
  return std::make_unique<SegmentCipher>(namespace_id, std::move(keys));
#else
  (void)namespace_id;
  (void)old_key_files;
  return Status::Unsupported("encryption key file " + key_file +
                             ": this build has no OpenSSL libcrypto (Debian: libssl-dev)");
#endif
}

SegmentCipher::~SegmentCipher() {
#if TIER_HAVE_ENCRYPTION
  for (DataKey& k : keys_) OPENSSL_cleanse(k.key.data(), k.key.size());
#endif
}

void SealedSegments::Free::operator()(std::byte* p) const {
  std::free(p);
}

namespace {

// One AES-256-GCM pass, `in` to `out` (they may be the same buffer). Encrypting writes `tag`;
// decrypting checks it (false on a failed tag).
bool Gcm(bool encrypt, const uint8_t* key, const uint8_t* nonce, const std::vector<uint8_t>& aad,
         const std::byte* in, std::byte* out, size_t n, uint8_t* tag) {
#if TIER_HAVE_ENCRYPTION
  Ctx ctx(EVP_CIPHER_CTX_new());
  if (ctx == nullptr) return false;
  int len = 0;
  const int enc = encrypt ? 1 : 0;
  bool ok =
      EVP_CipherInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key, nonce, enc) == 1 &&
      EVP_CipherUpdate(ctx.get(), nullptr, &len, aad.data(), static_cast<int>(aad.size())) == 1;
  const auto* src = reinterpret_cast<const unsigned char*>(in);
  auto* dst = reinterpret_cast<unsigned char*>(out);
  constexpr size_t kStep = 1u << 30;  // EVP lengths are int
  for (size_t done = 0; ok && done < n; done += kStep) {
    const int step = static_cast<int>(std::min(kStep, n - done));
    ok = EVP_CipherUpdate(ctx.get(), dst + done, &len, src + done, step) == 1;
  }
  if (!ok) return false;
  if (encrypt) {
    return EVP_CipherFinal_ex(ctx.get(), dst + n, &len) == 1 &&
           EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, tag) == 1;
  }
  return EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag) == 1 &&
         EVP_CipherFinal_ex(ctx.get(), dst + n, &len) == 1;
#else
  (void)encrypt, (void)key, (void)nonce, (void)aad, (void)in, (void)out, (void)n, (void)tag;
  return false;
#endif
}

bool RandomNonce(uint8_t* nonce) {
#if TIER_HAVE_ENCRYPTION
  return RAND_bytes(nonce, kNonceBytes) == 1;
#else
  (void)nonce;
  return false;
#endif
}

// One data segment's row in the sealed manifest's table: kind, index, nonce, tag.
constexpr size_t kRowBytes = 4 + 4 + kNonceBytes + kTagBytes;

uint32_t GetU32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

// Runs job(i) for i in [0, n) on up to 8 threads when there are enough bytes to share (AES-GCM
// runs at a few GB/s a core: one thread for a small checkpoint); false when any job failed.
bool ParallelFor(size_t n, uint64_t total_bytes, const std::function<bool(size_t)>& job) {
  constexpr uint64_t kBytesPerThread = 16ull << 20;
  const size_t threads =
      std::min<size_t>({n, 8, std::max<size_t>(1, std::thread::hardware_concurrency()),
                        static_cast<size_t>(std::max<uint64_t>(1, total_bytes / kBytesPerThread))});
  std::atomic<size_t> next{0};
  std::atomic<bool> ok{true};
  auto run = [&] {
    for (size_t i = next++; i < n && ok.load(); i = next++) {
      if (!job(i)) ok = false;
    }
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t) helpers.emplace_back(run);
  run();
  for (std::thread& h : helpers) h.join();
  return ok.load();
}

}  // namespace

uint64_t SegmentCipher::ManifestOverheadBytes(size_t data_segments) {
  return kHeaderBytes + 4 + kRowBytes * data_segments;
}

Result<std::shared_ptr<SealedSegments>> SegmentCipher::Prepare(const tier_key& key,
                                                               std::vector<tier_segment> plain,
                                                               bool seal) const {
  constexpr uint64_t kAlign = 4096;
  auto sealed = std::make_shared<SealedSegments>();
  sealed->plain = std::move(plain);
  auto allocate = [&](uint64_t n) -> std::byte* {
    auto* p =
        static_cast<std::byte*>(std::aligned_alloc(kAlign, (n + kAlign - 1) / kAlign * kAlign));
    if (p != nullptr) sealed->buffers.emplace_back(p);
    return p;
  };
  size_t data_segments = 0;
  for (const tier_segment& s : sealed->plain) data_segments += s.kind != TIER_SEGMENT_MANIFEST;
  std::vector<uint8_t> table;  // the manifest's plaintext prefix: n, then a row per data segment
  PutU32(table, static_cast<uint32_t>(data_segments));
  const tier_segment* manifest = nullptr;
  std::vector<size_t> data;  // indices of the data segments to seal
  uint64_t data_bytes = 0;
  for (const tier_segment& s : sealed->plain) {
    if (s.kind == TIER_SEGMENT_MANIFEST) {
      manifest = &s;
      sealed->stored.push_back(s);  // filled in below
      continue;
    }
    if (!seal) {  // a restore reads the ciphertext into the caller's buffer and opens it there
      sealed->stored.push_back(s);
      continue;
    }
    std::byte* p = allocate(s.length_bytes);
    if (p == nullptr) return Status::NoSpace("no memory for an encrypted segment copy");
    data.push_back(sealed->stored.size());
    data_bytes += s.length_bytes;
    sealed->stored.push_back({s.kind, s.index, s.length_bytes, p});
  }
  std::vector<uint8_t> rows(data.size() * kRowBytes);
  const bool sealed_all = ParallelFor(data.size(), data_bytes, [&](size_t d) {
    const tier_segment& s = sealed->plain[data[d]];
    uint8_t* row = rows.data() + d * kRowBytes;
    for (int i = 0; i < 4; ++i) row[i] = static_cast<uint8_t>(s.kind >> (8 * i));
    for (int i = 0; i < 4; ++i) row[4 + i] = static_cast<uint8_t>(s.index >> (8 * i));
    return RandomNonce(row + 8) &&
           Gcm(true, keys_.front().key.data(), row + 8, Aad(key, s.kind, s.index, s.length_bytes),
               static_cast<const std::byte*>(s.data),
               static_cast<std::byte*>(sealed->stored[data[d]].data), s.length_bytes,
               row + 8 + kNonceBytes);
  });
  if (!sealed_all) return Status::Internal("seal: AES-256-GCM failed");
  table.insert(table.end(), rows.begin(), rows.end());
  if (manifest == nullptr) return Status::InvalidArgument("encryption needs a manifest segment");
  const uint64_t n = manifest->length_bytes + ManifestOverheadBytes(data_segments);
  std::byte* m = allocate(n);
  if (m == nullptr) return Status::NoSpace("no memory for an encrypted manifest");
  for (tier_segment& s : sealed->stored) {
    if (s.kind == TIER_SEGMENT_MANIFEST) s = {s.kind, s.index, n, m};
  }
  if (!seal) return sealed;
  std::vector<std::byte> inner(n - kHeaderBytes);
  std::memcpy(inner.data(), table.data(), table.size());
  std::memcpy(inner.data() + table.size(), manifest->data, manifest->length_bytes);
  if (Status ok = Seal(key, manifest->kind, manifest->index, inner, {m, n}); !ok.ok()) return ok;
  return sealed;
}

Status SegmentCipher::OpenAll(const tier_key& key, const SealedSegments& sealed) const {
  const tier_segment* plain_manifest = nullptr;
  const tier_segment* stored_manifest = nullptr;
  for (size_t i = 0; i < sealed.plain.size(); ++i) {
    if (sealed.plain[i].kind != TIER_SEGMENT_MANIFEST) continue;
    plain_manifest = &sealed.plain[i];
    stored_manifest = &sealed.stored[i];
  }
  if (plain_manifest == nullptr) return Status::InvalidArgument("no manifest segment");
  std::vector<std::byte> inner(stored_manifest->length_bytes -
                               std::min<uint64_t>(stored_manifest->length_bytes, kHeaderBytes));
  Status opened = Unseal(
      key, TIER_SEGMENT_MANIFEST, plain_manifest->index,
      {static_cast<const std::byte*>(stored_manifest->data), stored_manifest->length_bytes}, inner);
  if (!opened.ok()) return opened;
  const size_t rows = inner.size() >= 4 ? GetU32(inner.data()) : 0;
  const size_t table_bytes = 4 + kRowBytes * rows;
  if (rows + 1 != sealed.plain.size() ||
      inner.size() != table_bytes + plain_manifest->length_bytes) {
    tag_failures_.fetch_add(1);
    return Status::DataLoss("the encrypted manifest's table does not match the checkpoint");
  }
  const DataKey* data_key = KeyOf(static_cast<const std::byte*>(stored_manifest->data));
  std::vector<size_t> data;
  uint64_t data_bytes = 0;
  for (size_t i = 0; i < sealed.plain.size(); ++i) {
    if (sealed.plain[i].kind == TIER_SEGMENT_MANIFEST) continue;
    data.push_back(i);
    data_bytes += sealed.plain[i].length_bytes;
  }
  std::atomic<size_t> failed{sealed.plain.size()};
  const bool opened_all = ParallelFor(data.size(), data_bytes, [&](size_t d) {
    const tier_segment& s = sealed.plain[data[d]];
    const std::byte* row = nullptr;
    for (size_t r = 0; r < rows && row == nullptr; ++r) {
      const std::byte* candidate = inner.data() + 4 + kRowBytes * r;
      if (GetU32(candidate) == s.kind && GetU32(candidate + 4) == s.index) row = candidate;
    }
    uint8_t nonce[kNonceBytes], tag[kTagBytes];
    if (row != nullptr) {
      std::memcpy(nonce, row + 8, kNonceBytes);
      std::memcpy(tag, row + 8 + kNonceBytes, kTagBytes);
    }
    auto* bytes = static_cast<std::byte*>(s.data);
    const bool ok = row != nullptr && Gcm(false, data_key->key.data(), nonce,
                                          Aad(key, s.kind, s.index, s.length_bytes), bytes, bytes,
                                          s.length_bytes, tag);
    if (!ok) failed = data[d];
    return ok;
  });
  if (!opened_all) {
    tag_failures_.fetch_add(1);
    const tier_segment& s = sealed.plain[std::min(failed.load(), sealed.plain.size() - 1)];
    return Status::DataLoss("encrypted segment " + std::to_string(s.kind) + "/" +
                            std::to_string(s.index) +
                            " fails its tag (tampered, moved or replayed)");
  }
  std::memcpy(plain_manifest->data, inner.data() + table_bytes, plain_manifest->length_bytes);
  return Status::Ok();
}

Result<std::vector<std::byte>> SegmentCipher::OpenManifest(
    const tier_key& key, uint32_t index, std::span<const std::byte> stored) const {
  std::vector<std::byte> inner(stored.size() - std::min(stored.size(), kHeaderBytes));
  if (Status ok = Unseal(key, TIER_SEGMENT_MANIFEST, index, stored, inner); !ok.ok()) return ok;
  const size_t rows = inner.size() >= 4 ? GetU32(inner.data()) : 0;
  const size_t table_bytes = 4 + kRowBytes * rows;
  if (inner.size() < table_bytes) {
    tag_failures_.fetch_add(1);
    return Status::DataLoss("the encrypted manifest's table is cut short");
  }
  return std::vector<std::byte>(inner.begin() + static_cast<ptrdiff_t>(table_bytes), inner.end());
}

std::string SegmentCipher::key_id_hex() const {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : keys_.front().id) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

std::vector<uint8_t> SegmentCipher::Aad(const tier_key& key, tier_segment_kind kind, uint32_t index,
                                        uint64_t length) const {
  std::vector<uint8_t> aad(kMagic, kMagic + 4);
  PutU32(aad, static_cast<uint32_t>(namespace_id_.size()));
  aad.insert(aad.end(), namespace_id_.begin(), namespace_id_.end());
  aad.insert(aad.end(), key.bytes, key.bytes + TIER_KEY_BYTES);
  PutU32(aad, kind);
  PutU32(aad, index);
  PutU64(aad, length);
  return aad;
}

const SegmentCipher::DataKey* SegmentCipher::KeyOf(const std::byte* header) const {
  for (const DataKey& k : keys_) {
    if (std::memcmp(k.id.data(), header + kIdOffset, 8) == 0) return &k;
  }
  return nullptr;
}

Status SegmentCipher::Seal(const tier_key& key, tier_segment_kind kind, uint32_t index,
                           std::span<const std::byte> plain, std::span<std::byte> out) const {
  if (out.size() != plain.size() + kHeaderBytes) return Status::Internal("seal: output size");
  auto* head = reinterpret_cast<uint8_t*>(out.data());
  std::memcpy(head, kMagic, 4);
  std::memcpy(head + kIdOffset, keys_.front().id.data(), 8);
  if (!RandomNonce(head + kNonceOffset)) return Status::Internal("seal: no random nonce");
  if (!Gcm(true, keys_.front().key.data(), head + kNonceOffset, Aad(key, kind, index, plain.size()),
           plain.data(), out.data() + kHeaderBytes, plain.size(), head + kTagOffset)) {
    return Status::Internal("seal: AES-256-GCM failed");
  }
  return Status::Ok();
}

Status SegmentCipher::Unseal(const tier_key& key, tier_segment_kind kind, uint32_t index,
                             std::span<const std::byte> stored, std::span<std::byte> plain) const {
  if (stored.size() != plain.size() + kHeaderBytes || std::memcmp(stored.data(), kMagic, 4) != 0) {
    tag_failures_.fetch_add(1);
    return Status::DataLoss("encrypted segment " + std::to_string(kind) + "/" +
                            std::to_string(index) + " has no valid header");
  }
  const DataKey* data_key = KeyOf(stored.data());
  if (data_key == nullptr) {
    unknown_key_.fetch_add(1);
    return Status::DataLoss("segment sealed under an encryption key this server does not hold");
  }
  uint8_t tag[kTagBytes];
  const auto* head = reinterpret_cast<const uint8_t*>(stored.data());
  std::memcpy(tag, head + kTagOffset, kTagBytes);
  if (!Gcm(false, data_key->key.data(), head + kNonceOffset, Aad(key, kind, index, plain.size()),
           stored.data() + kHeaderBytes, plain.data(), plain.size(), tag)) {
    tag_failures_.fetch_add(1);
    return Status::DataLoss("encrypted segment " + std::to_string(kind) + "/" +
                            std::to_string(index) + " fails its tag (tampered, moved or replayed)");
  }
  return Status::Ok();
}

}  // namespace tier
