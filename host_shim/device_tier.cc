#include "device_tier.h"

#include <tier/device/engine_select.h>

#include <vector>

namespace tier {
namespace {

// A device error keeps its code (NO_SPACE, UNSUPPORTED, IO_ERROR, ...); the message says where.
Status FromDevice(const Status& status) {
  return status.Annotate("device");
}

// Waits for every transfer, also after one failed; returns the first error.
Status WaitAll(const std::vector<device::Transfer>& transfers) {
  Status first;
  for (const device::Transfer& t : transfers) {
    Status done = t.Wait();
    if (first.ok() && !done.ok()) first = std::move(done);
  }
  return first;
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
    // Declared after `copy`: should anything below leave early, the handles go (and wait, see
    // transfer.h) before the device buffers they write into.
    std::vector<device::Transfer> queued;
    const Status submitted = QueueUpload(host, copy.get(), &queued);
    const Status done = WaitAll(queued);  // what was queued finishes before an error returns
    if (!submitted.ok()) return FromDevice(submitted);
    if (!done.ok()) return FromDevice(done);
    return std::unique_ptr<DeviceCopy>(std::move(copy));
  }

  Status Download(const DeviceCopy& copy, HostCopy* host) override {
    const auto& segments = static_cast<const EngineCopy&>(copy).segments;
    if (segments.size() != host->segment_count()) {
      return Status(TIER_INVALID_ARGUMENT, "device copy has another segment count");
    }
    for (size_t i = 0; i < segments.size(); ++i) {
      if (host->segment(i).size() != segments[i].bytes()) {
        return Status(TIER_INVALID_ARGUMENT, "device segment " + std::to_string(i) +
                                                 " has another size than its host buffer");
      }
    }
    std::vector<device::Transfer> queued;
    Status submitted;
    for (size_t i = 0; i < segments.size() && submitted.ok(); ++i) {
      if (segments[i].bytes() == 0) continue;
      auto transfer =
          engine_->CopyToHost(host->segment(i).data(), segments[i].data(), segments[i].bytes());
      if (transfer.ok()) {
        queued.push_back(std::move(transfer.value()));
      } else {
        submitted = transfer.status();
      }
    }
    const Status done = WaitAll(queued);  // `host` may be freed as soon as this returns
    if (!submitted.ok()) return FromDevice(submitted);
    return done.ok() ? Status::Ok() : FromDevice(done);
  }

 private:
  // Allocates a device buffer per segment and queues its copy; stops at the first error, with
  // what it queued so far in `queued`.
  Status QueueUpload(const HostCopy& host, EngineCopy* copy,
                     std::vector<device::Transfer>* queued) {
    for (size_t i = 0; i < host.segment_count(); ++i) {
      const std::span<const std::byte> segment = host.segment(i);
      if (segment.empty()) {
        copy->segments.emplace_back();
        continue;
      }
      auto buffer = engine_->AllocateDevice(segment.size());
      if (!buffer.ok()) return buffer.status();
      auto transfer = engine_->CopyToDevice(buffer.value().data(), segment.data(), segment.size());
      if (!transfer.ok()) return transfer.status();
      queued->push_back(std::move(transfer.value()));
      copy->segments.push_back(std::move(buffer.value()));
    }
    return Status::Ok();
  }

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

std::unique_ptr<DeviceTier> MakeEngineDeviceTier(std::unique_ptr<device::TransferEngine> engine) {
  std::string path = engine->path_name();
  return std::make_unique<EngineDeviceTier>(std::move(engine), std::move(path));
}

}  // namespace tier
