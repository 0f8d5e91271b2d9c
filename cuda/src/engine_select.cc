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

EngineDecision DecideEngine(DevicePreference prefer, const CudaProbe& probe) {
  EngineDecision d;
  if (prefer == DevicePreference::kCpu) {
    d.choice = EngineChoice::kCpu;
    d.reason = "CPU path requested";
    return d;
  }
  switch (probe.state) {
    case CudaProbeState::kDevicePresent:
      d.choice = EngineChoice::kCuda;
      return d;
    case CudaProbeState::kNotCompiledIn:
    case CudaProbeState::kNoDriver:
    case CudaProbeState::kNoDevice:
      if (prefer == DevicePreference::kAuto) {
        d.choice = EngineChoice::kCpu;
        d.reason = probe.detail;
        return d;
      }
      d.reason = "CUDA path requested but unusable: " + probe.detail;
      d.status = Status::Unsupported(d.reason);
      return d;
    case CudaProbeState::kDriverTooOld:
    case CudaProbeState::kProbeFailed:
      break;
  }
  d.reason = (prefer == DevicePreference::kCuda ? "CUDA path requested but unusable: "
                                                : "CUDA is present but unusable (not falling back "
                                                  "to the CPU path, which cannot read device "
                                                  "memory): ") +
             probe.detail;
  d.status = Status::IoError(d.reason);
  return d;
}

EngineDecision DecideAfterCudaFailure(DevicePreference prefer, const Status& failure) {
  EngineDecision d;
  d.reason = (prefer == DevicePreference::kCuda
                  ? std::string("CUDA path requested but unusable: ")
                  : std::string("a CUDA device is present but the CUDA engine failed (not "
                                "falling back to the CPU path, which cannot read device "
                                "memory): ")) +
             failure.message();
  d.status = Status(failure.ok() ? TIER_INTERNAL : failure.code(), d.reason);
  return d;
}

EngineSelection SelectTransferEngine(const EngineOptions& options) {
  return SelectTransferEngine(options, ProbeCuda());
}

EngineSelection SelectTransferEngine(const EngineOptions& options, const CudaProbe& probe) {
  EngineSelection out;
  EngineDecision decision = DecideEngine(options.prefer, probe);
  if (decision.choice == EngineChoice::kCuda) {
    Result<std::unique_ptr<TransferEngine>> cuda = MakeCudaTransferEngine(options.cuda);
    if (cuda.ok()) {
      out.engine = std::move(cuda).value();
      out.path = kDevicePathCuda;
      out.reason = "using " + out.engine->description();
      return out;
    }
    decision = DecideAfterCudaFailure(options.prefer, cuda.status());
  }
  if (decision.choice == EngineChoice::kNone) {
    out.reason = decision.reason;
    out.status = decision.status;
    return out;
  }
  Result<std::unique_ptr<TransferEngine>> cpu = MakeCpuTransferEngine(options.cpu);
  if (!cpu.ok()) {
    out.reason = "CPU path unusable: " + cpu.status().message();
    out.status = Status(cpu.status().code(), out.reason);
    return out;
  }
  out.engine = std::move(cpu).value();
  out.path = kDevicePathCpu;
  out.reason = decision.reason;
  return out;
}

}  // namespace tier::device
