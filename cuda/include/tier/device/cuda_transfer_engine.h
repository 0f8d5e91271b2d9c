// cuda_transfer_engine.h -- the CUDA path of TransferEngine: device memory from cudaMalloc; two
// directions, each with a copy stream and a kernel stream (device-to-host for gathers and seals;
// host-to-device and on-device at a higher stream priority, so restores and device hits go
// first and both copy engines run at once); gather/scatter kernels through two staging slots per
// direction used alternately (a stage's kernel overlaps the previous stage's copy); one
// blocking-sync event per transfer; pinned (cudaHostAllocPortable) host memory. Every thread
// that calls into it is made current on the engine's device (never switched back: that would
// create a context on the previous device). Declared without any CUDA header; in a build without
// CUDA every call reports UNSUPPORTED ("CUDA not compiled in").
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tier/device/transfer_engine.h"

namespace tier::device {

struct CudaEngineOptions {
  int device = 0;  // CUDA device ordinal
  // One staging slot for gather/scatter (>= 4096, and at least one layer page to move a layer);
  // each direction has two, so the engine holds 4 x staging_bytes of device memory.
  std::uint64_t staging_bytes = 32ull << 20;
};

// True when this build compiled the CUDA sources (TIER_HAVE_CUDA). Any thread.
bool CudaCompiledIn();
// The CUDA architectures the kernels were compiled for ("80 89 90 120"), "" without CUDA. Any
// thread.
const char* CudaArchitectures();

// What a look at the CUDA runtime found, before any engine is made (engine_select.h decides on
// it). A plain value.
enum class CudaProbeState : std::uint8_t {
  kNotCompiledIn,  // this build has no CUDA
  kNoDriver,       // no NVIDIA driver is installed (cudaDriverGetVersion reports 0)
  kNoDevice,       // a driver, but no device (cudaErrorNoDevice, or 0 devices visible)
  kDriverTooOld,   // the driver is older than the runtime this build links
  kProbeFailed,    // cudaGetDeviceCount failed otherwise (busy or prohibited devices, ...)
  kDevicePresent,  // device_count >= 1
};
struct CudaProbe {
  CudaProbeState state = CudaProbeState::kNotCompiledIn;
  int device_count = 0;
  int driver_version = 0;   // cudaDriverGetVersion (e.g. 12080), 0 without a driver
  int runtime_version = 0;  // cudaRuntimeGetVersion of the linked runtime
  // Why there is no usable device ("no CUDA device present (cudaGetDeviceCount: ...)", "CUDA
  // not compiled in", "the NVIDIA driver supports CUDA 11.4, this build's runtime is 13.0 ...");
  // "" when a device is present.
  std::string detail;
};
// Looks at the runtime: device count, driver and runtime versions. Any thread.
CudaProbe ProbeCuda();

// Number of CUDA devices (>= 1), or the probe's detail: UNSUPPORTED for "CUDA not compiled in",
// no driver and no device ("no CUDA device present (...)"), IO_ERROR for a driver older than the
// runtime or another failure of cudaGetDeviceCount. Any thread.
Result<int> CudaDeviceCount();
// A CUDA engine on options.device: UNSUPPORTED when there is no such device or no kernel image
// for it (or CudaDeviceCount()'s error), INVALID_ARGUMENT for staging_bytes below 4096, IO_ERROR
// (the cudaError name in the message) or NO_SPACE when the runtime refuses. Any thread.
Result<std::unique_ptr<TransferEngine>> MakeCudaTransferEngine(
    const CudaEngineOptions& options = {});

}  // namespace tier::device
