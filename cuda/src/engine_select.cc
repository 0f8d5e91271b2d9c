#include "tier/device/engine_select.h"

#include <string>

namespace tier::device {

Result<DevicePreference> ParseDevicePreference(std::string_view text) {
  if (text == "auto") return DevicePreference::kAuto;
  if (text == "cpu") return DevicePreference::kCpu;
  if (text == "cuda") return DevicePreference::kCuda;
  return Status::InvalidArgument("device preference '" + std::string(text) +
                                 "' is not one of auto, cpu, cuda");
}

EngineSelection SelectTransferEngine(const EngineOptions& options) {
  EngineSelection out;
  std::string cuda_reason;
  if (options.prefer != DevicePreference::kCpu) {
    Result<std::unique_ptr<TransferEngine>> cuda = MakeCudaTransferEngine(options.cuda);
    if (cuda.ok()) {
      out.engine = std::move(cuda).value();
      out.path = kDevicePathCuda;
      out.reason = "using " + out.engine->description();
      return out;
    }
    cuda_reason = cuda.status().message();
    if (options.prefer == DevicePreference::kCuda) {
      out.reason = "CUDA path requested but unusable: " + cuda_reason;
      return out;
    }
  }
  Result<std::unique_ptr<TransferEngine>> cpu = MakeCpuTransferEngine(options.cpu);
  if (!cpu.ok()) {
    out.reason = "CPU path unusable: " + cpu.status().message();
    return out;
  }
  out.engine = std::move(cpu).value();
  out.path = kDevicePathCpu;
  out.reason = options.prefer == DevicePreference::kCpu ? "CPU path requested" : cuda_reason;
  return out;
}

}  // namespace tier::device
