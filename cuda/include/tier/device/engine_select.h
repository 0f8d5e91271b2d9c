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
  kAuto,  // CUDA when a usable device is present, else CPU
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
  std::unique_ptr<TransferEngine> engine;  // nullptr only for kCuda when CUDA is unusable
  std::string path;                        // "cuda" or "cpu" ("" when engine is nullptr)
  std::string reason;  // "using GPU 0: NVIDIA H200 (sm_90, 139 GiB)", "no CUDA device present"...
};

// Picks and creates the engine. Any thread; typically once at server start.
EngineSelection SelectTransferEngine(const EngineOptions& options = {});

}  // namespace tier::device
