// cuda_check.h (internal) -- CUDA runtime errors as tier::device::Status.
#ifndef TIER_DEVICE_SRC_CUDA_CUDA_CHECK_H
#define TIER_DEVICE_SRC_CUDA_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include <string>

#include "tier/device/status.h"

namespace tier::device::detail {

// "cudaErrorNoDevice: no CUDA-capable device is detected".
inline std::string cuda_error_text(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + ": " + cudaGetErrorString(error);
}

inline Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::Ok();
  if (error == cudaErrorMemoryAllocation) {
    return resource_exhausted(std::string(what) + ": " + cuda_error_text(error));
  }
  return device_error(std::string(what) + ": " + cuda_error_text(error));
}

// Makes `device` current for the scope and restores the caller's device after it.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    status_ =
        cuda_status(previous_ == device ? cudaSuccess : cudaSetDevice(device), "cudaSetDevice");
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

#define TIER_CUDA_RETURN_IF_ERROR(call)                                                            \
  do {                                                                                             \
    ::tier::device::Status tier_cuda_status_ = ::tier::device::detail::cuda_status((call), #call); \
    if (!tier_cuda_status_.ok()) return tier_cuda_status_;                                         \
  } while (0)

#endif  // TIER_DEVICE_SRC_CUDA_CUDA_CHECK_H
