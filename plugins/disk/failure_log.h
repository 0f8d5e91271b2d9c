// failure_log.h -- folds repeated identical failures into summaries, so that a retry storm (a
// full filesystem answering every spill NO_SPACE) writes one line, then at most one summary per
// interval, instead of a line per failure. Identical = the same operation and status code.
// Thread-safe; holds no lock while the caller logs what it returns.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tier_provider.h"

namespace tier::disk {

class FailureLog {
 public:
  static constexpr uint64_t kDefaultIntervalNs = 10'000'000'000;  // one summary per 10 s at most
  explicit FailureLog(uint64_t interval_ns = kDefaultIntervalNs) : interval_ns_(interval_ns) {}

  // A failure of `op` ("spill", "restore") with `code` and `message` at `now_ns` (monotonic).
  // Returns the line to log now: the message itself for the first failure of its kind, a summary
  // once the interval has passed since the last line, "" when it is folded into a later summary.
  std::string Failed(const std::string& op, tier_status code, const std::string& message,
                     uint64_t now_ns);
  // A success of `op`: summaries of its failures folded since their last line (then the next
  // failure of each kind is logged in full again).
  std::vector<std::string> Succeeded(const std::string& op, uint64_t now_ns);
  // Summaries of every failure folded and not yet logged (at close).
  std::vector<std::string> Flush(uint64_t now_ns);

 private:
  struct Kind {
    uint64_t last_line_ns = 0;
    uint64_t folded = 0;  // failures since the last line
    std::string latest_message;
  };
  using Key = std::pair<std::string, tier_status>;
  static std::string Summary(const Key& key, const Kind& kind, uint64_t now_ns);

  const uint64_t interval_ns_;
  std::mutex mu_;
  std::map<Key, Kind> kinds_;  // bounded: operations x status codes
};

}  // namespace tier::disk
