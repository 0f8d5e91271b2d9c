#include <cmath>
#include <limits>

#include "json_input.h"
#include "line_reader.h"
#include "workload.h"

namespace tier::sim {
namespace {

constexpr uint64_t kTraceBlockTokens = 512;
constexpr double kMaxTimestampMs = 1e12;                 // ~31 years
constexpr double kMaxArrivalNs = 4611686018427387904.0;  // 2^62: the replay clock's headroom

// One line's object, checked field by field into a request.
Status ReadRequest(const JsonReader& r, double time_scale, Request* out) {
  if (!r.Find("")->is_object())
    return Status(TIER_INVALID_ARGUMENT, r.where() + ": not a JSON object");
  double timestamp_ms = 0;
  if (Status s = r.Number("/timestamp", 0, kMaxTimestampMs, &timestamp_ms); !s.ok()) return s;
  const double arrival_ns = timestamp_ms * time_scale * 1e6;
  if (!(arrival_ns <= kMaxArrivalNs)) {
    return r.Problem("/timestamp",
                     "an arrival within 2^62 ns of the start after "
                     "--trace-time-scale");
  }
  out->arrival_ns = static_cast<uint64_t>(arrival_ns);
  if (Status s = r.Whole("/input_length", uint64_t{1}, kMaxTraceInputTokens, &out->input_tokens);
      !s.ok()) {
    return s;
  }
  if (Status s = r.Whole("/output_length", uint64_t{0}, kMaxTraceOutputTokens, &out->output_tokens);
      !s.ok()) {
    return s;
  }
  const uint64_t expected = (out->input_tokens + kTraceBlockTokens - 1) / kTraceBlockTokens;
  size_t count = 0;
  if (Status s = r.Array("/hash_ids", kMaxTraceInputTokens / kTraceBlockTokens, &count); !s.ok()) {
    return s;
  }
  if (count != expected) {
    return Status(TIER_INVALID_ARGUMENT,
                  r.where() + ": field 'hash_ids' has " + std::to_string(count) + " ids for " +
                      std::to_string(out->input_tokens) + " tokens (expected " +
                      std::to_string(expected) + ", one per 512-token block)");
  }
  const nlohmann::json& ids = *r.Find("/hash_ids");
  out->blocks.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    if (!ids[i].is_number_unsigned()) {
      return r.Problem("/hash_ids/" + std::to_string(i),
                       "a whole number from 0 to 18446744073709551615");
    }
    out->blocks.push_back(ids[i].get<uint64_t>());
  }
  // Content is known per 512-token block: the sealed checkpoint covers the prompt's full
  // blocks (a real server seals at the exact frontier).
  out->seal_blocks.assign(
      out->blocks.begin(),
      out->blocks.begin() + static_cast<std::ptrdiff_t>(out->input_tokens / kTraceBlockTokens));
  return Status::Ok();
}

}  // namespace

Result<Workload> LoadMooncakeTrace(const std::string& path, double time_scale) {
  if (!(time_scale > 0) || !std::isfinite(time_scale)) {
    return Status(TIER_INVALID_ARGUMENT, "trace time scale must be > 0");
  }
  auto reader = LineReader::Open(path, "trace", kMaxTraceLineBytes);
  if (!reader.ok()) return reader.status();
  LineReader& lines = reader.value();
  Workload workload;
  workload.name = "trace:" + path.substr(path.rfind('/') + 1);
  workload.block_tokens = kTraceBlockTokens;
  uint64_t hash_ids = 0;
  std::string line;
  for (;;) {
    auto next = lines.Next(&line);
    if (!next.ok()) return next.status();
    if (!next.value()) break;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = "trace '" + path + "' line " + std::to_string(lines.line_number());
    auto input = ParseJsonInput(line);
    if (!input.ok()) return input.status().Annotate(where);
    Request r;
    if (Status s = ReadRequest(JsonReader(input.value(), where), time_scale, &r); !s.ok()) return s;
    hash_ids += r.blocks.size();
    if (workload.requests.size() >= kMaxTraceRequests || hash_ids > kMaxTraceHashIds) {
      return Status(TIER_INVALID_ARGUMENT,
                    where + ": the trace is longer than the replay takes (at most " +
                        std::to_string(kMaxTraceRequests) + " requests and " +
                        std::to_string(kMaxTraceHashIds) + " hash ids)");
    }
    workload.requests.push_back(std::move(r));
  }
  if (workload.requests.empty()) {
    return Status(TIER_INVALID_ARGUMENT, "trace '" + path + "': no requests");
  }
  return workload;
}

}  // namespace tier::sim
