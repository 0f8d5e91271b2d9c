#include "memory_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint_bytes.h"
#include "checkpoint_shape.h"
#include "provider_runner.h"
#include "segment_buffers.h"
#include "subprocess.h"

namespace tier::bench {
namespace {

using nlohmann::json;

// A "VmRSS:" or "VmHWM:" line of /proc/self/status, in bytes (0 when absent).
uint64_t ProcStatusBytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream in(line.substr(field.size() + 1));
      uint64_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
  }
  return 0;
}

bool ResetPeakRss() {
  const int fd = ::open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, "5", 1) == 1;
  ::close(fd);
  return ok;
}

json ToJson(const MemoryProbeRequest& r) {
  json options = json::array();
  for (const auto& [k, v] : r.options) options.push_back({k, v});
  return {{"plugin", r.plugin},           {"namespace_id", r.namespace_id},
          {"options", options},           {"profile_path", r.profile_path},
          {"tokens", r.tokens},           {"size_bytes", r.size_bytes},
          {"kind", DataKindName(r.kind)}, {"seed", r.seed},
          {"key_text", r.key_text},       {"misalign", r.misalign}};
}

MemoryProbeRequest FromJson(const json& j) {
  MemoryProbeRequest r;
  r.plugin = j.at("plugin").get<std::string>();
  r.namespace_id = j.at("namespace_id").get<std::string>();
  for (const json& kv : j.at("options")) {
    r.options.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<std::string>());
  }
  r.profile_path = j.at("profile_path").get<std::string>();
  r.tokens = j.at("tokens").get<uint64_t>();
  r.size_bytes = j.at("size_bytes").get<uint64_t>();
  r.kind = ParseDataKind(j.at("kind").get<std::string>()).value_or(DataKind::kRandom);
  r.seed = j.at("seed").get<uint64_t>();
  r.key_text = j.at("key_text").get<std::string>();
  r.misalign = j.at("misalign").get<uint64_t>();
  return r;
}

int Fail(const std::string& message) {
  std::printf("%s\n", json{{"error", message}}.dump().c_str());
  return 1;
}

}  // namespace

Result<MemoryProbeResult> RunMemoryProbe(const std::string& self_exe,
                                         const MemoryProbeRequest& request) {
  Result<Captured> run = RunCaptured({self_exe, "--internal-memory-probe", ToJson(request).dump()});
  if (!run.ok()) return run.status();
  json answer;
  try {
    answer = json::parse(run.value().out);
  } catch (const std::exception&) {
    return Status(TIER_INTERNAL, "memory probe exited with " +
                                     std::to_string(run.value().exit_code) +
                                     " without an answer: " + run.value().err.substr(0, 400));
  }
  if (answer.contains("error")) {
    return Status(TIER_INTERNAL, "memory probe: " + answer["error"].get<std::string>());
  }
  MemoryProbeResult r;
  r.checkpoint_bytes = answer.at("checkpoint_bytes").get<uint64_t>();
  r.misalign = answer.at("misalign").get<uint64_t>();
  r.baseline_rss_bytes = answer.at("baseline_rss_bytes").get<uint64_t>();
  r.peak_rss_bytes = answer.at("peak_rss_bytes").get<uint64_t>();
  r.provider_peak_bytes = answer.at("provider_peak_bytes").get<uint64_t>();
  r.restore_ns = answer.at("restore_ns").get<uint64_t>();
  r.byte_exact = answer.at("byte_exact").get<bool>();
  r.hwm_reset = answer.at("hwm_reset").get<bool>();
  return r;
}

int MemoryProbeChildMain(const std::string& request_json) {
  MemoryProbeRequest request;
  try {
    request = FromJson(json::parse(request_json));
  } catch (const std::exception& e) {
    return Fail(std::string("bad request: ") + e.what());
  }
  Result<ModelProfile> profile = LoadModelProfile(request.profile_path);
  if (!profile.ok()) return Fail(profile.status().ToString());
  CheckpointShape shape = ShapeForTokens(profile.value(), request.tokens);
  if (request.size_bytes > 0) {
    Result<CheckpointShape> sized =
        ShapeForBytes(profile.value(), request.tokens, request.size_bytes);
    if (!sized.ok()) return Fail(sized.status().ToString());
    shape = sized.take();
  }
  Result<SegmentBuffers> buffers = SegmentBuffers::Allocate(shape, request.misalign);
  if (!buffers.ok()) return Fail(buffers.status().ToString());

  MemoryProbeResult r;
  r.checkpoint_bytes = shape.logical_bytes();
  r.misalign = request.misalign;
  r.hwm_reset = ResetPeakRss();
  r.baseline_rss_bytes = r.hwm_reset ? ProcStatusBytes("VmRSS") : ProcStatusBytes("VmHWM");
  {
    auto runner = ProviderRunner::Open(request.plugin, request.namespace_id, request.options);
    if (!runner.ok()) return Fail(runner.status().ToString());
    auto restored = runner.value()->Restore(KeyFromText(request.key_text), shape, buffers.value());
    if (!restored.ok()) return Fail(restored.status().ToString());
    r.restore_ns = restored.value().wall_ns;
    r.peak_rss_bytes = ProcStatusBytes("VmHWM");
  }
  r.provider_peak_bytes =
      r.peak_rss_bytes > r.baseline_rss_bytes ? r.peak_rss_bytes - r.baseline_rss_bytes : 0;
  r.byte_exact = buffers.value().FirstMismatch(request.kind, request.seed, 2) < 0;
  const json out = {{"checkpoint_bytes", r.checkpoint_bytes},
                    {"misalign", r.misalign},
                    {"baseline_rss_bytes", r.baseline_rss_bytes},
                    {"peak_rss_bytes", r.peak_rss_bytes},
                    {"provider_peak_bytes", r.provider_peak_bytes},
                    {"restore_ns", r.restore_ns},
                    {"byte_exact", r.byte_exact},
                    {"hwm_reset", r.hwm_reset}};
  std::printf("%s\n", out.dump().c_str());
  return r.byte_exact ? 0 : 1;
}

}  // namespace tier::bench
