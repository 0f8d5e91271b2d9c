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
  // false: every transfer runs in submission order (the reference). true: the CUDA engine's two
  // directions -- queued host-to-device work (Scatter, CopyToDevice, CopyOnDevice, ByteShuffle)
  // runs before queued device-to-host work (Gather, CopyToHost), each direction in order; what a
  // caller may assume across directions is only what the CUDA engine gives.
  bool restores_first = false;
  // Bound on transfers queued and not yet run; a submit beyond it blocks until one finishes.
  std::uint32_t max_queued_transfers = 256;

  // Test seams (a server leaves them empty).
  // Where "device" memory comes from; nullptr: page-aligned host memory (host_allocator()). A
  // test injects one that refuses, or one that keeps freed memory to see what writes it later.
  std::shared_ptr<HostAllocator> device_allocator = nullptr;
  // Runs before each transfer, on the thread that runs it (the worker, or the submitter when
  // worker_thread is false); a test slows the worker with it. Must not call into the engine.
  std::function<void()> before_transfer = nullptr;
  // Where host memory comes from (host_allocator(), what a HostArena pins); nullptr: page-aligned
  // host memory. A test counts or refuses allocations with it.
  std::shared_ptr<HostAllocator> host_allocator = nullptr;
  // What CheckDeviceMemory() says about a pointer; nullptr: every pointer is fine (host memory is
  // this engine's device memory). A test stands in for cudaPointerGetAttributes with it.
  std::function<Status(const void* ptr, std::uint64_t bytes)> check_device_memory = nullptr;
};

// A stand-in for a server's CUDA stream on the CPU path (a test seam, and a simulator's): work
// enqueued on it runs on its own thread, in order, whenever that thread gets to it -- as kernels
// do on a stream the server launched them on. handle() is the NativeStream a server would pass:
// the CPU engine's OrderAfter(handle) makes its later transfers wait for the work enqueued so far
// (so a copy that is not ordered after it reads stale bytes, as on a GPU), and a CPU Transfer's
// MakeStreamWait(handle) makes later work of the stream wait for the transfer. The destructor
// runs what is queued first. A stream must outlive every call that names its handle.
class CpuStream {
 public:
  CpuStream();
  ~CpuStream();
  CpuStream(const CpuStream&) = delete;
  CpuStream& operator=(const CpuStream&) = delete;

  // Queues `work` (it must not call into this stream). Any thread.
  void Enqueue(std::function<void()> work);
  // Blocks until everything enqueued so far has run. Any thread.
  void Synchronize();
  NativeStream handle() { return this; }

  // The number of works enqueued so far (a marker), and a wait until that many have run. Any
  // thread.
  std::uint64_t Record();
  void WaitFor(std::uint64_t marker);
  // The live CpuStream whose handle() this is, or nullptr (any other pointer). Any thread.
  static CpuStream* FromHandle(NativeStream handle);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// A CPU engine; never fails except on invalid options (INVALID_ARGUMENT). Any thread.
Result<std::unique_ptr<TransferEngine>> MakeCpuTransferEngine(const CpuEngineOptions& options = {});

}  // namespace tier::device
