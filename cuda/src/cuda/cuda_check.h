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

// Makes `device` current for the scope and restores the caller's device after it. One thread.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    status_ =
        CudaStatus(previous_ == device ? cudaSuccess : cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  const Status& status() const { return status_; }

 private:
  int previous_ = -1;
  Status status_;
};

}  // namespace tier::device::detail

// Returns the Status of a failed CUDA runtime call from the enclosing function.
#define TIER_CUDA_RETURN_IF_ERROR(call)                                                   \
  do {                                                                                    \
    ::tier::Status tier_cuda_status_ = ::tier::device::detail::CudaStatus((call), #call); \
    if (!tier_cuda_status_.ok()) return tier_cuda_status_;                                \
  } while (0)
