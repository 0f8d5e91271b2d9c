#include "device_tier.h"

#include <cstring>

namespace tier {
namespace {

// Host memory standing in for device memory (temporary until the transfer library is wired).
class HostMemoryCopy : public DeviceCopy {
 public:
  SegmentBuffers bytes;
};

class HostMemoryDeviceTier : public DeviceTier {
 public:
  const char* path() const override { return "cpu"; }
  std::string description() const override { return "CPU reference (host memory)"; }
  Result<std::unique_ptr<DeviceCopy>> Upload(const SegmentBuffers& host) override {
    auto copy = std::make_unique<HostMemoryCopy>();
    copy->bytes = host;
    return std::unique_ptr<DeviceCopy>(std::move(copy));
  }
  Status Download(const DeviceCopy& copy, SegmentBuffers* host) override {
    const auto& source = static_cast<const HostMemoryCopy&>(copy).bytes;
    if (source.size() != host->size()) return Status(TIER_INVALID_ARGUMENT, "segment count");
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i].size() != (*host)[i].size()) return Status(TIER_INVALID_ARGUMENT, "size");
      std::memcpy((*host)[i].data(), source[i].data(), source[i].size());
    }
    return Status::Ok();
  }
};

}  // namespace

Result<std::unique_ptr<DeviceTier>> SelectDeviceTier(const std::string& preference,
                                                     std::string* reason) {
  if (preference == "cuda") return Status(TIER_UNSUPPORTED, "--device cuda: not built");
  *reason = "CUDA transfer path not built";
  return std::unique_ptr<DeviceTier>(std::make_unique<HostMemoryDeviceTier>());
}

}  // namespace tier
