#include <tier/check.h>
#include <tier/host/identity.h>
#include <tier/host/model_profile.h>
#include <xxhash.h>

#include <cstring>

namespace tier {

std::string CheckpointNamespace(const std::string& name, const ModelProfile& profile,
                                uint64_t bytes_scale) {
  const std::string layout = profile.LayoutFingerprint() + "/scale" + std::to_string(bytes_scale);
  return name.empty() ? layout : name + "/" + layout;
}

std::vector<uint64_t> PrefixHashes(std::span<const uint64_t> blocks) {
  // A chained 64-bit mix (splitmix64's finalizer): ~1 ns a block.
  std::vector<uint64_t> hashes(blocks.size());
  uint64_t h = 0x74696572ull;
  for (size_t i = 0; i < blocks.size(); ++i) {
    uint64_t z = h ^ (blocks[i] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    h = z ^ (z >> 31);
    hashes[i] = h;
  }
  return hashes;
}

tier_key PrefixKey(const std::string& namespace_id, std::span<const uint64_t> blocks) {
  XXH3_state_t* state = XXH3_createState();
  TIER_CHECK(state != nullptr);
  tier_key key{};
  for (int half = 0; half < 2; ++half) {
    XXH3_128bits_reset_withSeed(state, 0x6b6579ull + static_cast<uint64_t>(half));
    XXH3_128bits_update(state, namespace_id.data(), namespace_id.size());
    const uint64_t count = blocks.size();
    XXH3_128bits_update(state, &count, sizeof(count));
    XXH3_128bits_update(state, blocks.data(), blocks.size_bytes());
    const XXH128_hash_t digest = XXH3_128bits_digest(state);
    std::memcpy(key.bytes + 16 * half, &digest, 16);
  }
  XXH3_freeState(state);
  return key;
}

std::vector<uint64_t> TenantBlocks(std::string_view tenant, std::span<const uint64_t> blocks) {
  std::vector<uint64_t> out(blocks.begin(), blocks.end());
  if (tenant.empty()) return out;
  const uint64_t salt = XXH3_64bits_withSeed(tenant.data(), tenant.size(), 0x74656e616e74ull);
  for (uint64_t& id : out) {
    // x ^ salt, then splitmix64's finalizer: a bijection of 64-bit ids for each salt.
    uint64_t z = id ^ salt;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    id = z ^ (z >> 31);
  }
  return out;
}

tier_key KeyFromText(std::string_view text) {
  tier_key key{};
  const XXH128_hash_t a = XXH3_128bits_withSeed(text.data(), text.size(), 0x7469657231ull);
  const XXH128_hash_t b = XXH3_128bits_withSeed(text.data(), text.size(), 0x7469657232ull);
  std::memcpy(key.bytes, &a, 16);
  std::memcpy(key.bytes + 16, &b, 16);
  return key;
}

std::string KeyHex(const tier_key& key, size_t bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < bytes && i < TIER_KEY_BYTES; ++i) {
    out += kHex[key.bytes[i] >> 4];
    out += kHex[key.bytes[i] & 15];
  }
  return out;
}

bool SameKey(const tier_key& a, const tier_key& b) {
  return std::memcmp(a.bytes, b.bytes, TIER_KEY_BYTES) == 0;
}

}  // namespace tier
