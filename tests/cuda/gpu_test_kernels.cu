#include <cuda_runtime.h>

#include "gpu_test_kernels.h"

namespace tier::device::test {
namespace {

__device__ void SpinFor(std::uint64_t spin_ns) {
  std::uint64_t start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    std::uint64_t now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start >= spin_ns) break;
  }
}

__global__ void SpinThenFillKernel(unsigned char* dst, std::uint64_t bytes, unsigned char value,
                                   std::uint64_t spin_ns) {
  if (threadIdx.x == 0) SpinFor(spin_ns);
  __syncthreads();
  for (std::uint64_t i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = value;
}

__global__ void BusyKernel(std::uint64_t spin_ns) {
  if (threadIdx.x == 0) SpinFor(spin_ns);
}

}  // namespace

int LaunchSpinThenFill(void* dst, std::uint64_t bytes, std::uint8_t value, std::uint64_t spin_ns,
                       void* stream) {
  (void)cudaGetLastError();
  SpinThenFillKernel<<<1, 256, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<unsigned char*>(dst), bytes, value, spin_ns);
  return static_cast<int>(cudaGetLastError());
}

int LaunchBusyKernel(std::uint64_t spin_ns, void* stream) {
  int device = 0;
  int sms = 1;
  (void)cudaGetDevice(&device);
  (void)cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  (void)cudaGetLastError();
  BusyKernel<<<sms, 32, 0, static_cast<cudaStream_t>(stream)>>>(spin_ns);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace tier::device::test
