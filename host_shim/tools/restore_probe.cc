#include "restore_probe.h"

#include <tier/host/format.h>
#include <tier/host/host_services.h>
#include <tier/host/log.h>
#include <tier/host/metrics_registry.h>
#include <tier/host/plugin_loader.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "checkpoint_bytes.h"

namespace tier {
namespace {

constexpr uint64_t kSegmentBytes = 64ull << 20;  // the sample is split into segments this large

tier_key ProbeKey(const std::string& namespace_id, size_t index) {
  tier_key key{};
  const std::string text = "restore-probe/" + namespace_id + "/" + std::to_string(index);
  for (size_t i = 0; i < text.size(); ++i) key.bytes[i % TIER_KEY_BYTES] ^= text[i];
  key.bytes[TIER_KEY_BYTES - 1] ^= static_cast<uint8_t>(0xA5 + index);
  return key;
}

std::vector<tier_segment> Segments(std::vector<std::byte>& buffer, uint64_t bytes) {
  std::vector<tier_segment> segments;
  for (uint64_t at = 0, index = 0; at < bytes; at += kSegmentBytes, ++index) {
    segments.push_back({TIER_SEGMENT_MAIN_KV, static_cast<uint32_t>(index),
                        std::min(kSegmentBytes, bytes - at), buffer.data() + at});
  }
  return segments;
}

void Fit(RestoreProbe* probe) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const RestoreProbeSample& s : probe->samples) {
    const double x = static_cast<double>(s.bytes), y = static_cast<double>(s.restore_ns);
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double denominator = n * sxx - sx * sx;
  const double slope = denominator > 0 ? (n * sxy - sx * sy) / denominator : 0;  // ns per byte
  const double intercept = n > 0 ? (sy - slope * sx) / n : 0;
  if (slope > 0 && intercept >= 0) {
    probe->bytes_per_second = 1e9 / slope;
    probe->fixed_ns = static_cast<uint64_t>(intercept);
  } else {
    probe->bytes_per_second = sy > 0 ? sx * 1e9 / sy : 0;
    probe->fixed_ns = 0;
  }
}

}  // namespace

uint64_t RestoreProbe::ChargeNs(uint64_t bytes) const {
  if (bytes_per_second <= 0) return fixed_ns;
  return fixed_ns + static_cast<uint64_t>(static_cast<double>(bytes) * 1e9 / bytes_per_second);
}

Result<RestoreProbe> ProbeRestores(const std::string& plugin, ProviderOptions options,
                                   const std::string& namespace_id,
                                   const std::vector<uint64_t>& sample_bytes, uint64_t timeout_ns) {
  if (sample_bytes.empty()) return Status::InvalidArgument("the restore probe needs a size");
  const uint64_t largest = *std::max_element(sample_bytes.begin(), sample_bytes.end());
  for (auto& [name, value] : options) {
    if (name != "capacity_bytes") continue;
    char* end = nullptr;
    const uint64_t given = std::strtoull(value.c_str(), &end, 10);
    if (!value.empty() && end != nullptr && *end == '\0') {  // else as given: open says why
      value = std::to_string(std::max<uint64_t>(given, 2 * largest + (64ull << 20)));
    }
  }
  MetricsRegistry metrics;
  HostServices host(&metrics);
  auto library = PluginLibrary::Load(ResolvePluginPath(plugin), host.table());
  if (!library.ok()) return library.status();
  auto opened = ProviderInstance::Open(library.value(), host.table(), namespace_id, options);
  if (!opened.ok()) return opened.status();
  ProviderInstance& instance = *opened.value();
  RestoreProbe probe;
  probe.namespace_id = namespace_id;
  auto stats = instance.Stats();
  if (stats.ok() && stats.value().capacity_bytes == 0) {
    instance.Close();
    return probe;  // no cold tier (the null provider): nothing to charge
  }
  std::vector<std::byte> buffer(largest);
  Status failed;
  for (size_t i = 0; i < sample_bytes.size() && failed.ok(); ++i) {
    const tier_key key = ProbeKey(namespace_id, i);
    const uint64_t bytes = sample_bytes[i];
    auto segments = Segments(buffer, bytes);
    for (const tier_segment& s : segments) {
      sim::FillSegmentBytes(key, s.kind, s.index,
                            {static_cast<std::byte*>(s.data), s.length_bytes});
    }
    Completion spill = instance.SpillAndWait(key, segments, timeout_ns);
    if (spill.status.code() == TIER_NO_SPACE && probe.samples.empty()) {
      Log(TIER_LOG_WARN, "restore probe: the provider declined a " + FormatBytes(bytes) +
                             " spill (" + spill.status.ToString() +
                             "); cold restores are charged their wall time x the bytes scale");
      instance.Close();
      return RestoreProbe{};
    }
    if (!spill.status.ok()) {
      failed = spill.status;
      break;
    }
    std::fill(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(bytes), std::byte{0});
    Completion restore = instance.RestoreAndWait(key, segments, timeout_ns);
    const bool exact =
        restore.status.ok() &&
        std::all_of(segments.begin(), segments.end(), [&](const tier_segment& s) {
          return sim::SegmentBytesMatch(key, s.kind, s.index,
                                        {static_cast<const std::byte*>(s.data), s.length_bytes});
        });
    Status removed = instance.Remove(key);
    if (!restore.status.ok())
      failed = restore.status;
    else if (!exact)
      failed = Status::IoError("the probe's restore did not match its bytes");
    else if (!removed.ok())
      failed = removed;
    else
      probe.samples.push_back({bytes, restore.duration_ns});
  }
  instance.Close();
  if (!failed.ok()) {
    return Status(failed.code(),
                  "restore probe (namespace " + namespace_id + "): " + failed.message());
  }
  Fit(&probe);
  return probe;
}

}  // namespace tier
