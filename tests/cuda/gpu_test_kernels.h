// gpu_test_kernels.h -- kernels the GPU tests launch as "the server's work" (tests/cuda only).
// No CUDA header: streams are void* (cudaStream_t), errors the cudaError_t value (0 = success).
#pragma once

#include <cstdint>

namespace tier::device::test {

// One block that spins for about `spin_ns` on the GPU's clock, then writes `value` into
// [dst, dst + bytes): a producer whose last writes land late. Queued on `stream`.
int LaunchSpinThenFill(void* dst, std::uint64_t bytes, std::uint8_t value, std::uint64_t spin_ns,
                       void* stream);
// A compute kernel that keeps every SM busy for about `spin_ns` (one spinning block per SM).
int LaunchBusyKernel(std::uint64_t spin_ns, void* stream);

}  // namespace tier::device::test
