#include <fstream>
#include <nlohmann/json.hpp>

#include "workload.h"

namespace tier {

Result<Workload> LoadMooncakeTrace(const std::string& path, double time_scale) {
  std::ifstream file(path);
  if (!file) return Status(TIER_INVALID_ARGUMENT, "trace '" + path + "': cannot open");
  if (!(time_scale > 0)) return Status(TIER_INVALID_ARGUMENT, "trace time scale must be > 0");
  Workload workload;
  workload.name = "trace:" + path.substr(path.rfind('/') + 1);
  workload.block_tokens = 512;
  std::string line;
  size_t line_number = 0;
  while (std::getline(file, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto where = [&] { return "trace '" + path + "' line " + std::to_string(line_number) + ": "; };
    nlohmann::json doc = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) {
      return Status(TIER_INVALID_ARGUMENT, where() + "not a JSON object");
    }
    Request r;
    try {
      const double timestamp_ms = doc.at("timestamp").get<double>();
      r.input_tokens = doc.at("input_length").get<uint64_t>();
      r.output_tokens = doc.at("output_length").get<uint64_t>();
      r.blocks = doc.at("hash_ids").get<std::vector<uint64_t>>();
      if (timestamp_ms < 0) return Status(TIER_INVALID_ARGUMENT, where() + "negative timestamp");
      r.arrival_ns = static_cast<uint64_t>(timestamp_ms * time_scale * 1e6);
    } catch (const std::exception& e) {
      return Status(TIER_INVALID_ARGUMENT, where() + e.what());
    }
    const uint64_t expected = (r.input_tokens + 511) / 512;
    if (r.blocks.size() != expected) {
      return Status(TIER_INVALID_ARGUMENT, where() + std::to_string(r.blocks.size()) +
                                               " hash_ids for " + std::to_string(r.input_tokens) +
                                               " tokens (expected " + std::to_string(expected) +
                                               ")");
    }
    // Content is known per 512-token block: the sealed checkpoint covers the prompt's full
    // blocks (a real server seals at the exact frontier).
    r.seal_blocks.assign(r.blocks.begin(), r.blocks.begin() + r.input_tokens / 512);
    workload.requests.push_back(std::move(r));
  }
  if (workload.requests.empty()) {
    return Status(TIER_INVALID_ARGUMENT, "trace '" + path + "': no requests");
  }
  return workload;
}

}  // namespace tier
