// cpu_transfer_engine.h -- the CPU reference path of TransferEngine: host memory stands in for
// device memory, one worker thread stands in for the CUDA stream (transfers run in submission
// order and complete asynchronously), memcpy stands in for the kernels. Same bytes as CUDA.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "tier/device/host_arena.h"
#include "tier/device/transfer_engine.h"

namespace tier::device {

struct CpuEngineOptions {
  // true: transfers run on one worker thread, in order; false: each runs inside its submit call.
  bool worker_thread = true;
  // 0: gather/scatter copy page by page between pool and segment (the reference). > 0: pages
  // move through a staging buffer of this many bytes in stages, exactly as the CUDA engine moves
  // them (same stage arithmetic, same launch parameters); used to test that arithmetic on a CPU.
  std::uint64_t staging_bytes = 0;
  // Bound on transfers queued and not yet run; a submit beyond it blocks until one finishes.
  std::uint32_t max_queued_transfers = 256;

  // Test seams (a server leaves them empty).
  // Where "device" memory comes from; nullptr: page-aligned host memory (host_allocator()). A
  // test injects one that refuses, or one that keeps freed memory to see what writes it later.
  std::shared_ptr<HostAllocator> device_allocator = nullptr;
  // Runs before each transfer, on the thread that runs it (the worker, or the submitter when
  // worker_thread is false); a test slows the worker with it. Must not call into the engine.
  std::function<void()> before_transfer = nullptr;
};

// A CPU engine; never fails except on invalid options (INVALID_ARGUMENT). Any thread.
Result<std::unique_ptr<TransferEngine>> MakeCpuTransferEngine(const CpuEngineOptions& options = {});

}  // namespace tier::device
