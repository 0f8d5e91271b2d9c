#include <tier/host/model_profile.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tier {
namespace {

using nlohmann::json;

std::vector<std::string> ProfileDirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("TIER_PROFILE_PATH"); env != nullptr) {
    std::stringstream list(env);
    std::string dir;
    while (std::getline(list, dir, ':')) {
      if (!dir.empty()) dirs.push_back(dir);
    }
  }
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    const std::string path(exe, static_cast<size_t>(n));
    dirs.push_back(path.substr(0, path.rfind('/')) + "/../share/tier/profiles");
  }
#ifdef TIER_SOURCE_PROFILE_DIR
  dirs.push_back(TIER_SOURCE_PROFILE_DIR);
#endif
  return dirs;
}

// Reads `key` of `object` into `out`; false with a message when absent or of the wrong type.
template <typename T>
bool Field(const json& object, const char* key, T* out, std::string* error) {
  auto it = object.find(key);
  if (it == object.end()) {
    *error = std::string("missing field '") + key + "'";
    return false;
  }
  try {
    *out = it->template get<T>();
  } catch (const std::exception&) {
    *error = std::string("field '") + key + "' has the wrong type";
    return false;
  }
  return true;
}

}  // namespace

uint64_t ModelProfile::LayerKvBytes(uint64_t tokens) const {
  const uint64_t pages = (tokens + tokens_per_page - 1) / tokens_per_page;
  return pages * tokens_per_page * (kv_bytes_per_token / full_attention_layers);
}

uint64_t ModelProfile::FixedStateBytes() const {
  uint64_t total = hidden_state_bytes;
  for (const StatePart& part : state_image) total += part.bytes;
  return total;
}

uint64_t ModelProfile::CheckpointBytes(uint64_t tokens) const {
  return LayerKvBytes(tokens) * (full_attention_layers + mtp_layers) + FixedStateBytes();
}

std::string ModelProfile::LayoutFingerprint() const {
  std::ostringstream out;
  out << name << "/kv=" << kv_dtype << "/L" << full_attention_layers << "xH" << kv_heads << "xD"
      << head_dim << "/page" << tokens_per_page << "/mtp" << mtp_layers << "/state"
      << FixedStateBytes();
  return out.str();
}

Result<ModelProfile> LoadModelProfile(const std::string& path) {
  std::ifstream file(path);
  if (!file) return Status(TIER_INVALID_ARGUMENT, "model profile '" + path + "': cannot open");
  json doc;
  try {
    doc = json::parse(file);
  } catch (const std::exception& e) {
    return Status(TIER_INVALID_ARGUMENT, "model profile '" + path + "': not JSON: " + e.what());
  }
  ModelProfile p;
  std::string error;
  json prefill, decode, transfer, state;
  const bool ok =
      Field(doc, "name", &p.name, &error) && Field(doc, "model", &p.model, &error) &&
      Field(doc, "gpu", &p.gpu, &error) && Field(doc, "kv_dtype", &p.kv_dtype, &error) &&
      Field(doc, "tokens_per_page", &p.tokens_per_page, &error) &&
      Field(doc, "full_attention_layers", &p.full_attention_layers, &error) &&
      Field(doc, "kv_heads", &p.kv_heads, &error) && Field(doc, "head_dim", &p.head_dim, &error) &&
      Field(doc, "kv_bytes_per_token", &p.kv_bytes_per_token, &error) &&
      Field(doc, "mtp_layers", &p.mtp_layers, &error) &&
      Field(doc, "hidden_state_bytes", &p.hidden_state_bytes, &error) &&
      Field(doc, "state_image", &state, &error) && Field(doc, "prefill", &prefill, &error) &&
      Field(prefill, "chunk_tokens", &p.prefill_chunk_tokens, &error) &&
      Field(prefill, "chunk_ns", &p.prefill_chunk_ns, &error) &&
      Field(prefill, "token_ns", &p.prefill_token_ns, &error) &&
      Field(prefill, "attention_pair_ns", &p.attention_pair_ns, &error) &&
      Field(doc, "decode", &decode, &error) &&
      Field(decode, "token_ns", &p.decode_token_ns, &error) &&
      Field(doc, "transfer", &transfer, &error) &&
      Field(transfer, "batch_ns", &p.transfer_batch_ns, &error) &&
      Field(transfer, "op_ns", &p.transfer_op_ns, &error) &&
      Field(transfer, "d2h_ns_per_byte", &p.d2h_ns_per_byte, &error) &&
      Field(transfer, "h2d_ns_per_byte", &p.h2d_ns_per_byte, &error);
  if (!ok) return Status(TIER_INVALID_ARGUMENT, "model profile '" + path + "': " + error);
  if (!state.is_array()) {
    return Status(TIER_INVALID_ARGUMENT,
                  "model profile '" + path + "': state_image must be a list");
  }
  for (const json& part : state) {
    StatePart s;
    if (!Field(part, "name", &s.name, &error) || !Field(part, "bytes", &s.bytes, &error)) {
      return Status(TIER_INVALID_ARGUMENT, "model profile '" + path + "': state_image: " + error);
    }
    p.state_image.push_back(s);
  }
  if (p.tokens_per_page == 0 || p.full_attention_layers == 0 || p.prefill_chunk_tokens == 0 ||
      p.kv_bytes_per_token == 0 || p.kv_bytes_per_token % p.full_attention_layers != 0) {
    return Status(TIER_INVALID_ARGUMENT,
                  "model profile '" + path +
                      "': tokens_per_page, layers and chunk_tokens must be > 0 and "
                      "kv_bytes_per_token a multiple of full_attention_layers");
  }
  return p;
}

std::string ResolveProfilePath(const std::string& name_or_path) {
  if (name_or_path.find('/') != std::string::npos ||
      (name_or_path.size() > 5 && name_or_path.ends_with(".json"))) {
    return name_or_path;
  }
  for (const std::string& dir : ProfileDirs()) {
    const std::string candidate = dir + "/" + name_or_path + ".json";
    if (::access(candidate.c_str(), R_OK) == 0) return candidate;
  }
  return name_or_path;
}

std::vector<std::string> ShippedProfileNames() {
  std::vector<std::string> names;
  for (const std::string& dir : ProfileDirs()) {
    std::error_code ec;
    for (const auto& file : std::filesystem::directory_iterator(dir, ec)) {
      if (file.path().extension() == ".json") names.push_back(file.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace tier
