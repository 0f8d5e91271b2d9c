#include <tier/host/model_profile.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "profile_fields.h"

namespace tier {
namespace {

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
  auto text = ReadProfileFile(path);
  if (!text.ok()) return text.status();
  auto input = ParseJsonInput(text.value());
  if (!input.ok()) return input.status().Annotate("model profile '" + path + "'");
  return ReadModelProfile(input.value(), "model profile '" + path + "'");
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
