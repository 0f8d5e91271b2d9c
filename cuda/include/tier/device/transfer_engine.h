// transfer_engine.h -- moves checkpoint bytes between the device's paged KV pool and host memory.
//
// Two implementations share this interface and produce identical bytes: the CUDA engine (device
// memory, a dedicated stream, gather/scatter kernels, pinned host memory) and the CPU engine (host
// memory standing in for the device, a worker thread standing in for the stream). The server picks
// one at run time with SelectTransferEngine() (engine_select.h).
//
// Ordering: transfers of one direction run in submission order. On CUDA, device-to-host work
// (Gather, CopyToHost) runs on one stream and host-to-device and on-device work (Scatter,
// CopyToDevice, CopyOnDevice, ByteShuffle) on a second one of higher priority, so a restore never
// waits behind a multi-GB seal and both copy engines run at once; the CPU engine runs everything
// on one worker in submission order (a stricter order). A caller that needs one transfer after
// another of the other direction waits for the first (or the Host's completions). OrderAfter()
// orders both streams after a producer's stream. Submitting is thread-safe; each submit is atomic
// with respect to other submits of its direction. Page tables are copied at
// submit, so they may be freed on return; segments and device buffers must stay alive and
// unchanged until the transfer is done (transfer.h: the last handle of a Transfer waits for it
// when destroyed). On an error Status nothing of the request is left running.
//
// Errors (tier::Status, codes of tier_provider.h): INVALID_ARGUMENT for a malformed request or an
// index out of its range (the message names the layer, plane, index, id or size); NO_SPACE when a
// byte bound or an allocation (host, pinned or device memory, the staging buffer) runs out;
// UNSUPPORTED when a path is not usable here (no CUDA device, not compiled in, no kernel image);
// IO_ERROR when the CUDA runtime fails (the message holds the cudaError name); INTERNAL when an
// invariant of this library breaks.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tier/device/host_arena.h"
#include "tier/device/pool_layout.h"
#include "tier/device/transfer.h"
#include "tier/status.h"

namespace tier::device {

// A cudaStream_t on the CUDA path (kept as void* so no CUDA header is needed); ignored on the CPU.
using NativeStream = void*;

// Owner of one allocation in an engine's device memory. Move-only; freeing is synchronous with
// respect to the engine's device (no transfer may still use it). Any one thread at a time.
class DeviceBuffer {
 public:
  using Free = std::function<void(std::byte*)>;
  DeviceBuffer() = default;
  DeviceBuffer(std::byte* data, std::uint64_t bytes, Free free)
      : data_(data), bytes_(bytes), free_(std::move(free)) {}
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
      free_ = std::move(other.free_);
      other.free_ = nullptr;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  std::byte* data() const { return data_; }
  std::uint64_t bytes() const { return bytes_; }
  // Frees the memory now (a no-op on an empty buffer).
  void Reset() {
    if (data_ != nullptr && free_) free_(data_);
    data_ = nullptr;
    bytes_ = 0;
  }

 private:
  std::byte* data_ = nullptr;
  std::uint64_t bytes_ = 0;
  Free free_;
};

// Where a pool's planes live: plane_base[layer][plane] is the start of that plane's page array in
// the engine's device memory (page p at plane_base + p * bytes_per_page). A server builds it from
// its own pool pointers; AllocatePool() builds one for tests and benchmarks. A plain value.
struct PoolView {
  std::vector<std::array<std::byte*, kMaxPlanesPerLayer>> plane_base;
};

// A pool allocated by an engine: one device allocation, planes at 256-byte aligned offsets.
struct DevicePool {
  PoolLayout layout;
  DeviceBuffer memory;
  PoolView view;
  // Device address of page `page` of `plane` of `layer`. Any thread.
  std::byte* page(std::uint32_t layer, std::uint32_t plane, std::uint32_t page) const {
    return view.plane_base[layer][plane] +
           static_cast<std::uint64_t>(page) * layout.plane(layer, plane).bytes_per_page;
  }
};

namespace detail {
struct PageCopyJob;
}

class TransferEngine {
 public:
  virtual ~TransferEngine() = default;

  // "cuda" or "cpu": the `path` label of the tier_device_path metric. Any thread.
  virtual const char* path_name() const = 0;
  // "GPU 0: NVIDIA H200 (sm_90, 139 GiB)" or "CPU reference (worker thread)". Any thread.
  virtual std::string description() const = 0;
  // The host memory this engine transfers best from (pinned on CUDA); for HostArena. Any thread.
  virtual std::shared_ptr<HostAllocator> host_allocator() = 0;
  // The engine's stream (cudaStream_t) or nullptr on the CPU. Any thread.
  virtual NativeStream native_stream() const = 0;

  // Device memory of `bytes` > 0, uninitialized, 256-byte aligned. Any thread.
  virtual Result<DeviceBuffer> AllocateDevice(std::uint64_t bytes) = 0;
  // A pool for `layout` in one device allocation (contents uninitialized). Any thread.
  Result<DevicePool> AllocatePool(const PoolLayout& layout);

  // Device -> host copy of `bytes`, queued on the engine's stream. Any thread.
  virtual Result<Transfer> CopyToHost(void* host_dst, const void* device_src,
                                      std::uint64_t bytes) = 0;
  // Host -> device copy of `bytes`, queued on the engine's stream. Any thread.
  virtual Result<Transfer> CopyToDevice(void* device_dst, const void* host_src,
                                        std::uint64_t bytes) = 0;
  // Device -> device copy of `bytes` (both this engine's device memory), queued on the engine's
  // stream. Any thread.
  virtual Result<Transfer> CopyOnDevice(void* device_dst, const void* device_src,
                                        std::uint64_t bytes) = 0;

  // Gathers the pages `page_table` names (in order) of `layer` into `segment` (host memory of
  // exactly layout.segment_bytes(layer, page_table.size()) bytes), plane-major as pool_layout.h
  // describes. Page ids must be < page_count; repeats are allowed. Any thread.
  Result<Transfer> Gather(const PoolLayout& layout, const PoolView& pool, std::uint32_t layer,
                          std::span<const std::uint32_t> page_table, std::span<std::byte> segment);
  // Scatters a segment Gather() produced back into the pages `page_table` names (any free pages,
  // not necessarily the ones gathered from). Page ids must be < page_count and distinct. Pages not
  // in the table are left untouched. Any thread.
  Result<Transfer> Scatter(const PoolLayout& layout, const PoolView& pool, std::uint32_t layer,
                           std::span<const std::byte> segment,
                           std::span<const std::uint32_t> page_table);

  // Byte-plane shuffle (tier/shuffle/byte_shuffle.h) of `bytes` of device memory, src -> dst,
  // element_bytes 2 or 4; `inverse` undoes it. Any thread.
  Result<Transfer> ByteShuffle(void* device_dst, const void* device_src, std::uint64_t bytes,
                               std::uint32_t element_bytes, bool inverse);

  // Later transfers of this engine (both directions) start only after the work queued on
  // `producer` so far: a cudaStream_t of the caller (e.g. the one whose kernels wrote the pool)
  // on CUDA (cudaStreamLegacy / cudaStreamPerThread for the default streams), a CpuStream's
  // handle() on the CPU (cpu_transfer_engine.h); nullptr is a no-op.
  // INVALID_ARGUMENT for a handle the CPU engine does not know. Any thread.
  virtual Status OrderAfter(NativeStream producer) = 0;
  // OK when [ptr, ptr + bytes) is memory this engine's copies and kernels can address as device
  // memory (CUDA: cudaPointerGetAttributes says device or managed memory of the engine's device);
  // INVALID_ARGUMENT naming what it is otherwise. The CPU engine accepts any pointer. Any thread.
  virtual Status CheckDeviceMemory(const void* ptr, std::uint64_t bytes) const = 0;
  // Blocks until every transfer submitted so far is done; returns the first error. Any thread.
  virtual Status Synchronize() = 0;

 protected:
  // Runs a validated gather or scatter. Called with the job fully checked.
  virtual Result<Transfer> SubmitPageCopy(detail::PageCopyJob&& job) = 0;
  // Runs a validated shuffle.
  virtual Result<Transfer> SubmitByteShuffle(void* device_dst, const void* device_src,
                                             std::uint64_t bytes, std::uint32_t element_bytes,
                                             bool inverse) = 0;
};

}  // namespace tier::device
