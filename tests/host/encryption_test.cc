// HostEncryption (issue 23): encryption at rest (HostOptions::encryption). The scripted
// provider's named store keeps what it was handed, so a test reads (and tampers with) exactly
// what a provider stores: ciphertext with a header, never the plaintext; a flipped byte, two
// checkpoints' segments swapped, or a key this server lacks are counted misses, never served; a
// restart with the key re-adopts and restores exactly; a rotated key still reads old checkpoints.
// The key file's rules (mode, owner, length) are Open errors naming the file.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <tier/host/identity.h>
#include <tier/host/plugin_loader.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "host_fixture.h"
#include "test_support.h"

namespace tier::host::test {
namespace {

constexpr uint64_t kHeaderBytes = 40;  // of the manifest: host_shim/README.md, "Encryption at rest"
constexpr bool kHaveEncryption = TIER_HAVE_ENCRYPTION != 0;

using SegmentFn = unsigned char* (*)(const char*, const tier_key*, uint32_t, uint32_t, uint64_t*);

class HostEncryption : public HostTest {
 protected:
  void SetUp() override {
    handle_ = ::dlopen(ResolvePluginPath("scripted").c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr);
    segment_ = reinterpret_cast<SegmentFn>(::dlsym(handle_, "tier_scripted_segment"));
    ASSERT_NE(segment_, nullptr);
    store_ = "crypt-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }
  void TearDown() override {
    HostTest::TearDown();
    if (handle_ != nullptr) ::dlclose(handle_);
  }
  // Writes a key file (64 hex digits of `seed`) with `mode`; returns its path.
  std::string KeyFile(const std::string& name, char seed, mode_t mode = 0600) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << std::string(64, seed) << "\n";
    EXPECT_EQ(::chmod(path.c_str(), mode), 0);
    return path;
  }
  void OpenWith(const std::string& key, std::vector<std::string> old = {}) {
    ended_.clear();
    Open("scripted", {{"store", store_}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2, [&](HostOptions& o) {
      o.encryption.key_file = key;
      o.encryption.old_key_files = old;
    });
  }
  std::span<unsigned char> Stored(const std::vector<uint64_t>& blocks, uint32_t kind,
                                  uint32_t index) {
    const tier_key key = PrefixKey(namespace_id_, blocks);
    uint64_t n = 0;
    unsigned char* p = segment_(store_.c_str(), &key, kind, index, &n);
    return p == nullptr ? std::span<unsigned char>() : std::span<unsigned char>(p, n);
  }
  // An admission that must not be served: root prefill, nothing wrong handed to the server.
  void ExpectMiss(const std::vector<uint64_t>& blocks, uint64_t now_s) {
    const uint64_t mismatched = mismatched_;
    Admission a = AdmitAndWait(blocks, now_s);
    EXPECT_NE(a.outcome, Outcome::kColdRestore);
    EXPECT_EQ(mismatched_, mismatched);
    if (a.state == AdmissionState::kReady) Release(a);
  }
  void ExpectColdHit(const std::vector<uint64_t>& blocks, uint64_t now_s) {
    const uint64_t verified = verified_;
    Admission a = AdmitAndWait(blocks, now_s);
    ASSERT_EQ(a.state, AdmissionState::kReady);
    EXPECT_EQ(a.outcome, Outcome::kColdRestore);
    EXPECT_EQ(verified_, verified + 1) << "byte-exact";
    EXPECT_EQ(mismatched_, 0u);
    Release(a);
  }

  // Two checkpoints in Cold alone under one key: `a`, then `b` whose seal pushes `a` out of Host.
  void SealTwoIntoCold(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
    OpenWith(KeyFile("key", 'a'));
    ASSERT_TRUE(Seal(a, 1));
    SealAndPushToCold(b);
    ASSERT_EQ(PlacementsOf(a), kC);
  }
  // Swaps what the store holds for segment (`kind`, 0) of `a` and of `b` (one length).
  void SwapStored(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b, uint32_t kind) {
    auto sa = Stored(a, kind, 0), sb = Stored(b, kind, 0);
    ASSERT_EQ(sa.size(), sb.size());
    std::swap_ranges(sa.begin(), sa.end(), sb.begin());
  }

  tier::test::ScopedTempDir dir_;
  void* handle_ = nullptr;
  SegmentFn segment_ = nullptr;
  std::string store_;
};

TEST_F(HostEncryption, TheStoreHoldsCiphertextAndRestoresAreExact) {
  if (!kHaveEncryption) GTEST_SKIP() << "built without OpenSSL";
  const auto prompt = Blocks(10, 2);
  // The plaintext, as an unencrypted Host stores it.
  std::string plain_store = store_ + "-plain";
  std::swap(plain_store, store_);
  Open("scripted", {{"store", store_}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  SealAndPushToCold(prompt);
  const auto plain = Stored(prompt, TIER_SEGMENT_MAIN_KV, 0);
  const auto plain_manifest = Stored(prompt, TIER_SEGMENT_MANIFEST, 0);
  ASSERT_GE(plain.size(), 4096u);
  ASSERT_FALSE(plain_manifest.empty());
  host_.reset();
  std::swap(plain_store, store_);

  OpenWith(KeyFile("key", 'a'));
  SealAndPushToCold(prompt);
  // A data segment is bare ciphertext of the plaintext's length (opened in place at restore);
  // its nonce and tag travel in the manifest, which has a header of its own.
  const auto sealed = Stored(prompt, TIER_SEGMENT_MAIN_KV, 0);
  ASSERT_EQ(sealed.size(), plain.size());
  // No 64-byte run of the plaintext appears in what the provider holds.
  for (size_t at = 0; at + 64 <= plain.size(); at += 997) {
    EXPECT_EQ(
        std::search(sealed.begin(), sealed.end(), plain.begin() + at, plain.begin() + at + 64),
        sealed.end())
        << "plaintext at " << at;
  }
  const auto manifest = Stored(prompt, TIER_SEGMENT_MANIFEST, 0);
  ASSERT_GT(manifest.size(), plain_manifest.size() + kHeaderBytes) << "the manifest too";
  EXPECT_EQ(std::memcmp(manifest.data(), "TKC1", 4), 0);
  EXPECT_EQ(std::search(manifest.begin(), manifest.end(), plain_manifest.begin(),
                        plain_manifest.begin() + std::min<size_t>(plain_manifest.size(), 32)),
            manifest.end());
  ExpectColdHit(prompt, 10);
  EXPECT_EQ(host_->Stats().encryption_tag_failures, 0u);
}

TEST_F(HostEncryption, AFlippedByteIsACountedMissNeverServed) {
  if (!kHaveEncryption) GTEST_SKIP() << "built without OpenSSL";
  const auto prompt = Blocks(10, 2);
  OpenWith(KeyFile("key", 'a'));
  SealAndPushToCold(prompt);
  auto sealed = Stored(prompt, TIER_SEGMENT_MAIN_KV, 1);
  ASSERT_GT(sealed.size(), 100u);
  sealed[100] ^= 0x01;
  ExpectMiss(prompt, 10);
  EXPECT_GE(host_->Stats().encryption_tag_failures, 1u);
  EXPECT_EQ(PlacementsOf(prompt) & kC, 0) << "dropped from Cold like any DATA_LOSS";
}

TEST_F(HostEncryption, SegmentsSwappedBetweenCheckpointsFailTheirTags) {
  if (!kHaveEncryption) GTEST_SKIP() << "built without OpenSSL";
  const auto a = Blocks(10, 2), b = Blocks(20, 2);
  ASSERT_NO_FATAL_FAILURE(SealTwoIntoCold(a, b));
  ASSERT_NO_FATAL_FAILURE(SwapStored(a, b, TIER_SEGMENT_MAIN_KV));
  ExpectMiss(a, 10);
  ExpectMiss(b, 11);
  EXPECT_GE(host_->Stats().encryption_tag_failures, 2u);
}

TEST_F(HostEncryption, AManifestSwappedBetweenCheckpointsOrFlippedIsACountedMiss) {
  if (!kHaveEncryption) GTEST_SKIP() << "built without OpenSSL";
  const auto a = Blocks(10, 2), b = Blocks(20, 2);
  ASSERT_NO_FATAL_FAILURE(SealTwoIntoCold(a, b));
  const auto ma = Stored(a, TIER_SEGMENT_MANIFEST, 0);  // b's manifest once swapped
  // Every segment's nonce and tag go with the manifest.
  ASSERT_NO_FATAL_FAILURE(SwapStored(a, b, TIER_SEGMENT_MANIFEST));
  ExpectMiss(a, 10);
  ma[ma.size() / 2] ^= 0x80;  // b's manifest, one byte of its table or body flipped, goes back
  ASSERT_NO_FATAL_FAILURE(SwapStored(a, b, TIER_SEGMENT_MANIFEST));
  ExpectMiss(b, 11);
  EXPECT_GE(host_->Stats().encryption_tag_failures, 2u);
}

TEST_F(HostEncryption, ARestartWithTheKeyReadoptsAndRestoresExactly) {
  if (!kHaveEncryption) GTEST_SKIP() << "built without OpenSSL";
  const auto prompt = Blocks(10, 2);
  const std::string key = KeyFile("key", 'a');
  OpenWith(key);
  SealAndPushToCold(prompt);
  host_.reset();
  OpenWith(key);
  EXPECT_GE(host_->Stats().readopted, 1u) << "the manifest opens with the key";
  ExpectColdHit(prompt, 10);
}

TEST_F(HostEncryption, ARotatedKeyReadsOldCheckpointsAndWithoutItTheyAreCountedMisses) {
  if (!kHaveEncryption) GTEST_SKIP() << "built without OpenSSL";
  const auto prompt = Blocks(10, 2);
  const std::string key_a = KeyFile("a", 'a'), key_b = KeyFile("b", 'b');
  OpenWith(key_a);
  SealAndPushToCold(prompt);
  host_.reset();
  OpenWith(key_b, {key_a});
  EXPECT_GE(host_->Stats().readopted, 1u);
  ExpectColdHit(prompt, 10);
  host_.reset();
  OpenWith(key_b);
  EXPECT_EQ(host_->Stats().readopted, 0u) << "its manifest does not open without key A";
  ExpectMiss(prompt, 20);
  EXPECT_GE(host_->Stats().encryption_unknown_key, 1u);
}

TEST_F(HostEncryption, OnDiskTheFilesHoldNoPlaintextAndARestartRestoresExactly) {
  if (!kHaveEncryption) GTEST_SKIP() << "built without OpenSSL";
  const auto prompt = Blocks(10, 2);
  Open("scripted", {{"store", store_}}, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2);
  SealAndPushToCold(prompt);  // the plaintext, as an unencrypted Host hands it over
  const auto kv = Stored(prompt, TIER_SEGMENT_MAIN_KV, 0);
  const std::vector<unsigned char> plain(kv.begin(), kv.end());
  ASSERT_GE(plain.size(), 4096u);
  host_.reset();

  const std::string key = KeyFile("key", 'c');
  const ProviderOptions disk = {{"dir", dir_.path() + "/cold"},
                                {"capacity_bytes", "67108864"},
                                {"chunk_kib", "64"},
                                {"compression", "auto"}};
  auto open_disk = [&] {
    ended_.clear();
    Open("disk", disk, Bytes(1) * 3 / 2, Bytes(1) * 3 / 2,
         [&](HostOptions& o) { o.encryption.key_file = key; });
  };
  open_disk();
  SealAndPushToCold(prompt);
  host_.reset();
  size_t files = 0;
  for (const auto& f : std::filesystem::recursive_directory_iterator(dir_.path() + "/cold")) {
    if (!f.is_regular_file()) continue;
    ++files;
    std::ifstream in(f.path(), std::ios::binary);
    const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                           std::istreambuf_iterator<char>());
    for (size_t at = 0; at + 64 <= plain.size(); at += 997) {
      ASSERT_EQ(
          std::search(bytes.begin(), bytes.end(), plain.begin() + at, plain.begin() + at + 64),
          bytes.end())
          << f.path() << " holds plaintext from offset " << at;
    }
  }
  EXPECT_GE(files, 1u);
  open_disk();
  EXPECT_GE(host_->Stats().readopted, 1u);
  ExpectColdHit(prompt, 10);
}

TEST_F(HostEncryption, AKeyFileOthersCanReadOrOfTheWrongLengthOrOwnerIsAnOpenError) {
  auto open_error = [&](const std::string& path) {
    auto opened = TryOpen("scripted", {{"store", store_}},
                          [&](HostOptions& o) { o.encryption.key_file = path; });
    EXPECT_FALSE(opened.ok()) << path;
    return opened.ok() ? std::string() : opened.status().ToString();
  };
  const std::string loose = KeyFile("loose", 'a', 0644);
  std::string error = open_error(loose);
  EXPECT_NE(error.find(loose), std::string::npos) << error;
  if (kHaveEncryption) {
    EXPECT_NE(error.find("mode 0644"), std::string::npos) << error;
    const std::string shorter = dir_.path() + "/short";
    std::ofstream(shorter) << "0123456789";
    ASSERT_EQ(::chmod(shorter.c_str(), 0600), 0);
    error = open_error(shorter);
    EXPECT_NE(error.find(shorter), std::string::npos) << error;
    EXPECT_NE(error.find("32 raw bytes or 64 hex digits"), std::string::npos) << error;
    const std::string foreign = KeyFile("foreign", 'a');
    if (::geteuid() == 0 && ::chown(foreign.c_str(), 4242, 4242) == 0) {
      error = open_error(foreign);
      EXPECT_NE(error.find(foreign), std::string::npos) << error;
      EXPECT_NE(error.find("owned by uid 4242"), std::string::npos) << error;
    }
    error = open_error(dir_.path() + "/missing");
    EXPECT_NE(error.find("missing"), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace tier::host::test
