// cuda_check.h (internal) -- CUDA runtime errors as tier::Status: cudaErrorMemoryAllocation is
// NO_SPACE, every other error IO_ERROR, the message "<what>: <cudaError name>: <description>".
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "tier/status.h"

namespace tier::device::detail {

// "cudaErrorNoDevice: no CUDA-capable device is detected". Any thread.
inline std::string CudaErrorText(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

// Ok for cudaSuccess; `what` names the call. Any thread.
inline Status CudaStatus(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::Ok();
  if (error == cudaErrorMemoryAllocation) {
    return Status::NoSpace(std::string(what) + ": " + CudaErrorText(error));
  }
  return Status::IoError(std::string(what) + ": " + CudaErrorText(error));
}

// Makes `device` the calling thread's current device unless it already is, and leaves it so:
// every thread that touches an engine (submitters, completion waits, the pinned allocator's
// frees, the destructor) works on the engine's device. Switching back afterwards would call
// cudaSetDevice(previous), which on CUDA 12+ creates the primary context of `previous` -- GPU 0
// on a thread that never chose one: hundreds of MiB of GPU 0 in every rank whose device is not
// 0. Any thread.
inline Status UseDevice(int device) {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == device) return Status::Ok();
  return CudaStatus(cudaSetDevice(device), "cudaSetDevice");
}

}  // namespace tier::device::detail

// Returns the Status of a failed CUDA runtime call from the enclosing function.
#define TIER_CUDA_RETURN_IF_ERROR(call)                                                   \
  do {                                                                                    \
    ::tier::Status tier_cuda_status_ = ::tier::device::detail::CudaStatus((call), #call); \
    if (!tier_cuda_status_.ok()) return tier_cuda_status_;                                \
  } while (0)
