// cuda_transfer_engine.h -- the CUDA path of TransferEngine: device memory from cudaMalloc, one
// dedicated non-blocking stream, gather/scatter kernels through a bounded device staging buffer,
// cudaMemcpyAsync on the copy engines, one event per transfer, pinned (cudaHostAllocPortable)
// host memory. Declared without any CUDA header; in a build without CUDA every call reports
// kUnavailable ("CUDA not compiled in").
#ifndef TIER_DEVICE_CUDA_TRANSFER_ENGINE_H
#define TIER_DEVICE_CUDA_TRANSFER_ENGINE_H

#include <cstdint>
#include <memory>

#include "tier/device/transfer_engine.h"

namespace tier::device {

struct CudaEngineOptions {
  int device = 0;  // CUDA device ordinal
  std::uint64_t staging_bytes = 64ull
                                << 20;  // device staging for gather/scatter (>= one layer page)
};

// True when this build compiled the CUDA sources (TIER_HAVE_CUDA). Any thread.
bool cuda_compiled_in();
// The CUDA architectures the kernels were compiled for ("80;89;90;120"), "" without CUDA.
const char* cuda_architectures();
// Number of CUDA devices (>= 1), or kUnavailable with the reason: "CUDA not compiled in" or
// "no CUDA device present (cudaGetDeviceCount: ...)". Any thread.
Result<int> cuda_device_count();
// A CUDA engine on options.device: kUnavailable when there is no such device or no kernel image
// for it, kDeviceError/kResourceExhausted when the runtime refuses. Any thread.
Result<std::unique_ptr<TransferEngine>> make_cuda_transfer_engine(
    const CudaEngineOptions& options = {});

}  // namespace tier::device

#endif  // TIER_DEVICE_CUDA_TRANSFER_ENGINE_H
