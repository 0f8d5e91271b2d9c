#include "device_tier.h"

#include <tier/device/engine_select.h>

#include <vector>

namespace tier {
namespace {

// A device error keeps its code (NO_SPACE, UNSUPPORTED, IO_ERROR, ...); the message says where.
Status FromDevice(const Status& status) {
  return status.Annotate("device");
}

// A checkpoint's segments in the engine's device memory, one allocation per non-empty segment.
class EngineCopy : public DeviceCopy {
 public:
  std::vector<device::DeviceBuffer> segments;  // empty buffer for a zero-length segment
};

// The Device tier over tier_cuda's transfer engine: device memory and a dedicated stream on the
// CUDA path, host memory and a worker thread on the CPU path (identical bytes).
class EngineDeviceTier : public DeviceTier {
 public:
  EngineDeviceTier(std::unique_ptr<device::TransferEngine> engine, std::string path)
      : engine_(std::move(engine)), path_(std::move(path)) {}

  const char* path() const override { return path_.c_str(); }
  std::shared_ptr<device::HostAllocator> host_allocator() override {
    return engine_->host_allocator();
  }
  std::string description() const override { return engine_->description(); }

  Result<std::unique_ptr<DeviceCopy>> Upload(const HostCopy& host) override {
    auto copy = std::make_unique<EngineCopy>();
    std::vector<device::Transfer> transfers;
    for (size_t i = 0; i < host.segment_count(); ++i) {
      const std::span<const std::byte> segment = host.segment(i);
      if (segment.empty()) {
        copy->segments.emplace_back();
        continue;
      }
      auto buffer = engine_->AllocateDevice(segment.size());
      if (!buffer.ok()) return FromDevice(buffer.status());
      auto transfer = engine_->CopyToDevice(buffer.value().data(), segment.data(), segment.size());
      if (!transfer.ok()) return FromDevice(transfer.status());
      transfers.push_back(std::move(transfer.value()));
      copy->segments.push_back(std::move(buffer.value()));
    }
    for (const device::Transfer& t : transfers) {
      Status done = t.Wait();
      if (!done.ok()) return FromDevice(done);
    }
    return std::unique_ptr<DeviceCopy>(std::move(copy));
  }

  Status Download(const DeviceCopy& copy, HostCopy* host) override {
    const auto& segments = static_cast<const EngineCopy&>(copy).segments;
    if (segments.size() != host->segment_count()) {
      return Status(TIER_INVALID_ARGUMENT, "device copy has another segment count");
    }
    std::vector<device::Transfer> transfers;
    for (size_t i = 0; i < segments.size(); ++i) {
      if (host->segment(i).size() != segments[i].bytes()) {
        return Status(TIER_INVALID_ARGUMENT, "device segment " + std::to_string(i) +
                                                 " has another size than its host buffer");
      }
      if (segments[i].bytes() == 0) continue;
      auto transfer =
          engine_->CopyToHost(host->segment(i).data(), segments[i].data(), segments[i].bytes());
      if (!transfer.ok()) return FromDevice(transfer.status());
      transfers.push_back(std::move(transfer.value()));
    }
    for (const device::Transfer& t : transfers) {
      Status done = t.Wait();
      if (!done.ok()) return FromDevice(done);
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<device::TransferEngine> engine_;
  std::string path_;
};

}  // namespace

Result<std::unique_ptr<DeviceTier>> SelectDeviceTier(const std::string& preference,
                                                     std::string* reason) {
  auto prefer = device::ParseDevicePreference(preference);
  if (!prefer.ok()) return Status(TIER_INVALID_ARGUMENT, "--device: " + prefer.status().message());
  device::EngineOptions options;
  options.prefer = prefer.value();
  device::EngineSelection selection = device::SelectTransferEngine(options);
  *reason = selection.reason;
  if (selection.engine == nullptr) {
    return Status(TIER_UNSUPPORTED, "--device " + preference + ": " + selection.reason);
  }
  return std::unique_ptr<DeviceTier>(
      std::make_unique<EngineDeviceTier>(std::move(selection.engine), selection.path));
}

}  // namespace tier
