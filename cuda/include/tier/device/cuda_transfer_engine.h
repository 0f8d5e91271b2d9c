// cuda_transfer_engine.h -- the CUDA path of TransferEngine: device memory from cudaMalloc, one
// dedicated non-blocking stream, gather/scatter kernels through a bounded device staging buffer,
// cudaMemcpyAsync on the copy engines, one event per transfer, pinned (cudaHostAllocPortable)
// host memory. Declared without any CUDA header; in a build without CUDA every call reports
// UNSUPPORTED ("CUDA not compiled in").
#pragma once

#include <cstdint>
#include <memory>

#include "tier/device/transfer_engine.h"

namespace tier::device {

struct CudaEngineOptions {
  int device = 0;  // CUDA device ordinal
  // Device staging for gather/scatter (>= 4096, and at least one layer page to move a layer).
  std::uint64_t staging_bytes = 64ull << 20;
};

// True when this build compiled the CUDA sources (TIER_HAVE_CUDA). Any thread.
bool CudaCompiledIn();
// The CUDA architectures the kernels were compiled for ("80 89 90 120"), "" without CUDA. Any
// thread.
const char* CudaArchitectures();
// Number of CUDA devices (>= 1), or UNSUPPORTED with the reason: "CUDA not compiled in" or
// "no CUDA device present (cudaGetDeviceCount: ...)". Any thread.
Result<int> CudaDeviceCount();
// A CUDA engine on options.device: UNSUPPORTED when there is no such device or no kernel image
// for it, INVALID_ARGUMENT for staging_bytes below 4096, IO_ERROR (the cudaError name in the
// message) or NO_SPACE when the runtime refuses. Any thread.
Result<std::unique_ptr<TransferEngine>> MakeCudaTransferEngine(
    const CudaEngineOptions& options = {});

}  // namespace tier::device
