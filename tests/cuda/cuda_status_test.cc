// CUDA runtime errors as tier::Status (cuda/src/cuda/cuda_check.h): built where CUDA is compiled
// in; needs no device (cudaGetErrorName and cudaGetErrorString are table look-ups).
#include <gtest/gtest.h>

#include <string>

#include "cuda_check.h"

namespace tier::device::test {
namespace {

TEST(CudaStatus, RuntimeErrorsAreIoErrorsNamingTheError) {
  const Status failed = detail::CudaStatus(cudaErrorInvalidValue, "cudaMemcpyAsync(D2H)");
  EXPECT_EQ(failed.code(), TIER_IO_ERROR);
  EXPECT_EQ(failed.message().rfind("cudaMemcpyAsync(D2H): cudaErrorInvalidValue: ", 0), 0u)
      << failed.ToString();
  const Status no_device = detail::CudaStatus(cudaErrorNoDevice, "cudaSetDevice");
  EXPECT_EQ(no_device.code(), TIER_IO_ERROR);
  EXPECT_NE(no_device.message().find("cudaErrorNoDevice"), std::string::npos);
}

TEST(CudaStatus, AllocationFailureIsNoSpaceAndSuccessIsOk) {
  const Status full = detail::CudaStatus(cudaErrorMemoryAllocation, "cudaHostAlloc");
  EXPECT_EQ(full.code(), TIER_NO_SPACE);
  EXPECT_NE(full.message().find("cudaHostAlloc: cudaErrorMemoryAllocation"), std::string::npos)
      << full.ToString();
  EXPECT_TRUE(detail::CudaStatus(cudaSuccess, "cudaStreamSynchronize").ok());
}

}  // namespace
}  // namespace tier::device::test
