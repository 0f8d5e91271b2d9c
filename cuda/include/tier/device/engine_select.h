// engine_select.h -- the run-time choice between the CUDA and the CPU path.
//
// The server calls SelectTransferEngine() once at start, logs `reason` and exports
// tier_device_path{path="cuda"|"cpu"} = 1 for `path` (0 for the other).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tier/device/cpu_transfer_engine.h"
#include "tier/device/cuda_transfer_engine.h"
#include "tier/device/transfer_engine.h"

namespace tier::device {

// Name of the metric family and the values of its `path` label.
inline constexpr const char* kDevicePathMetric = "tier_device_path";
inline constexpr const char* kDevicePathCuda = "cuda";
inline constexpr const char* kDevicePathCpu = "cpu";

enum class DevicePreference : std::uint8_t {
  kAuto,  // CUDA when a device is present; CPU only when there is no device or no CUDA build
  kCpu,   // always the CPU path
  kCuda,  // CUDA or nothing (engine == nullptr and the reason)
};

// "auto", "cpu" or "cuda" (for a command-line flag); INVALID_ARGUMENT naming the text otherwise.
// Any thread.
Result<DevicePreference> ParseDevicePreference(std::string_view text);

struct EngineOptions {
  DevicePreference prefer = DevicePreference::kAuto;
  CudaEngineOptions cuda;
  CpuEngineOptions cpu;
};

struct EngineSelection {
  // nullptr when the preferred path is unusable: kCuda without CUDA, or any preference but kCpu
  // on a machine whose CUDA is there but broken (see DecideEngine).
  std::unique_ptr<TransferEngine> engine;
  std::string path;    // "cuda" or "cpu" ("" when engine is nullptr)
  std::string reason;  // "using GPU 0: NVIDIA H200 (sm_90, 139 GiB)", "no CUDA device present"...
  // OK with an engine; otherwise the cause's code (NO_SPACE: the staging cudaMalloc, IO_ERROR: a
  // driver older than the runtime, UNSUPPORTED: no kernel image or no CUDA for kCuda, ...).
  Status status;
};

// What SelectTransferEngine does before it makes an engine: a pure function of the preference and
// the probe, so every rule is tested without a GPU.
enum class EngineChoice : std::uint8_t {
  kCuda,  // make the CUDA engine; if that fails, DecideAfterCudaFailure
  kCpu,   // the CPU engine
  kNone,  // no engine: `status` says why
};
struct EngineDecision {
  EngineChoice choice = EngineChoice::kNone;
  std::string reason;  // for the log ("" for kCuda: the engine's description is the reason)
  Status status;       // OK unless kNone
};
// kCpu: CPU. kCuda: CUDA when a device is present, else none (UNSUPPORTED). kAuto: CUDA when a
// device is present; the CPU only when the build has no CUDA, there is no driver or no device
// (nothing on this machine can hold device memory, so the server's pool is host memory); a driver
// older than the runtime or a failing probe is an error (IO_ERROR) naming it, never the CPU path:
// the CPU engine would memcpy from the server's device pointers. Pure.
EngineDecision DecideEngine(DevicePreference prefer, const CudaProbe& probe);
// The CUDA engine could not be made on a present device (staging cudaMalloc, no kernel image,
// stream creation, ...): for every preference an error with the failure's code, never the CPU
// path. Pure.
EngineDecision DecideAfterCudaFailure(DevicePreference prefer, const Status& failure);

// Probes (ProbeCuda), decides and creates the engine. Any thread; typically once at server start.
EngineSelection SelectTransferEngine(const EngineOptions& options = {});
// The same with the probe given (tests and callers that probed already).
EngineSelection SelectTransferEngine(const EngineOptions& options, const CudaProbe& probe);

}  // namespace tier::device
