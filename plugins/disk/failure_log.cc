#include "failure_log.h"

#include <cstdio>

namespace tier::disk {

std::string FailureLog::Summary(const Key& key, const Kind& kind, uint64_t now_ns) {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f", (now_ns - kind.last_line_ns) / 1e9);
  return "disk: " + std::to_string(kind.folded) + " more " + key.first + " failure" +
         (kind.folded == 1 ? "" : "s") + " with " + tier_status_name(key.second) + " in the last " +
         seconds + " s (latest: " + kind.latest_message + ")";
}

std::string FailureLog::Failed(const std::string& op, tier_status code, const std::string& message,
                               uint64_t now_ns) {
  std::lock_guard lock(mu_);
  const Key key{op, code};
  auto it = kinds_.find(key);
  if (it == kinds_.end()) {
    kinds_.emplace(key, Kind{now_ns, 0, {}});
    return message;
  }
  Kind& kind = it->second;
  ++kind.folded;
  kind.latest_message = message;
  if (now_ns - kind.last_line_ns < interval_ns_) return "";
  std::string line = Summary(key, kind, now_ns);
  kind.last_line_ns = now_ns;
  kind.folded = 0;
  return line;
}

std::vector<std::string> FailureLog::Succeeded(const std::string& op, uint64_t now_ns) {
  std::vector<std::string> lines;
  std::lock_guard lock(mu_);
  for (auto it = kinds_.begin(); it != kinds_.end();) {
    if (it->first.first != op) {
      ++it;
      continue;
    }
    if (it->second.folded > 0) lines.push_back(Summary(it->first, it->second, now_ns));
    it = kinds_.erase(it);
  }
  return lines;
}

std::vector<std::string> FailureLog::Flush(uint64_t now_ns) {
  std::vector<std::string> lines;
  std::lock_guard lock(mu_);
  for (auto& [key, kind] : kinds_) {
    if (kind.folded > 0) lines.push_back(Summary(key, kind, now_ns));
  }
  kinds_.clear();
  return lines;
}

}  // namespace tier::disk
