// kernels.h (internal) -- host-side launchers of the CUDA kernels. Each clears the thread's last
// CUDA error, launches on `stream` and returns the launch's error (cudaSuccess when queued).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "../page_copy_params.h"

namespace tier::device::detail {

// Pool pages -> staging, plane-major (one block per page and plane). params.page_count >= 1.
cudaError_t LaunchGatherStage(const PageCopyParams& params, cudaStream_t stream);
// Staging -> pool pages (the inverse).
cudaError_t LaunchScatterStage(const PageCopyParams& params, cudaStream_t stream);
// Byte-plane shuffle of `bytes` (element_bytes 2 or 4) from src to dst (device memory, no
// overlap), or its inverse.
cudaError_t LaunchByteShuffle(void* dst, const void* src, std::uint64_t bytes,
                              std::uint32_t element_bytes, bool inverse, cudaStream_t stream);
// cudaSuccess when every kernel has an image the current device can run
// (cudaErrorNoKernelImageForDevice / cudaErrorInvalidDeviceFunction otherwise).
cudaError_t CheckKernelImages();

}  // namespace tier::device::detail
