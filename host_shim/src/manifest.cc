#include "manifest.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include <tier/host/identity.h>

namespace tier {
namespace {

bool ParseHexKey(const std::string& hex, tier_key* key) {
  if (hex.size() != 2 * TIER_KEY_BYTES) return false;
  for (size_t i = 0; i < TIER_KEY_BYTES; ++i) {
    unsigned value = 0;
    for (int j = 0; j < 2; ++j) {
      const char c = hex[2 * i + j];
      const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (digit < 0) return false;
      value = value * 16 + static_cast<unsigned>(digit);
    }
    key->bytes[i] = static_cast<uint8_t>(value);
  }
  return true;
}

}  // namespace

std::vector<std::byte> EncodeManifest(const Manifest& manifest) {
  nlohmann::json doc = {{"tier_manifest", manifest.version},
                        {"namespace", manifest.namespace_id},
                        {"tokens", manifest.tokens},
                        {"blocks", manifest.blocks},
                        {"shared_prefix", manifest.shared_prefix},
                        {"logical_bytes", manifest.logical_bytes},
                        {"bytes_scale", manifest.bytes_scale}};
  if (manifest.has_parent) doc["parent"] = KeyHex(manifest.parent_key, TIER_KEY_BYTES);
  const std::string text = doc.dump();
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  return bytes;
}

Result<Manifest> DecodeManifest(std::span<const std::byte> bytes) {
  nlohmann::json doc =
      nlohmann::json::parse(reinterpret_cast<const char*>(bytes.data()),
                            reinterpret_cast<const char*>(bytes.data()) + bytes.size(), nullptr,
                            /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status(TIER_INVALID_ARGUMENT, "manifest is not a JSON object");
  }
  Manifest m;
  try {
    m.version = doc.at("tier_manifest").get<uint32_t>();
    if (m.version != 1) {
      return Status(TIER_INVALID_ARGUMENT,
                    "manifest version " + std::to_string(m.version) + " is not 1");
    }
    m.namespace_id = doc.at("namespace").get<std::string>();
    m.tokens = doc.at("tokens").get<uint64_t>();
    m.blocks = doc.at("blocks").get<std::vector<uint64_t>>();
    m.shared_prefix = doc.at("shared_prefix").get<bool>();
    m.logical_bytes = doc.at("logical_bytes").get<uint64_t>();
    m.bytes_scale = doc.at("bytes_scale").get<uint64_t>();
    if (doc.contains("parent")) {
      m.has_parent = ParseHexKey(doc.at("parent").get<std::string>(), &m.parent_key);
      if (!m.has_parent) return Status(TIER_INVALID_ARGUMENT, "manifest parent is not a key");
    }
  } catch (const std::exception& e) {
    return Status(TIER_INVALID_ARGUMENT, std::string("manifest field: ") + e.what());
  }
  if (m.blocks.empty()) return Status(TIER_INVALID_ARGUMENT, "manifest has no blocks");
  return m;
}

}  // namespace tier
