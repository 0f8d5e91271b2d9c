// device_arena.h -- the device memory Device placements keep their state buffers in: one
// allocation of the transfer engine's, made once at Open, carved into extents (HostArena's
// bookkeeping over it). Nothing on the seal or evict path allocates or frees device memory
// (cudaFree waits for the whole device: every eviction would stall the server's decode), and an
// extent goes back only after every transfer that used it is done, so no copy still queued on
// the engine can meet a new owner's bytes.
#pragma once

#include <tier/device/host_arena.h>
#include <tier/device/transfer_engine.h>
#include <tier/status.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace tier {

class DeviceArena;

// One state buffer of a Device placement: `bytes()` at `data()` in the engine's device memory.
class DeviceBlock {
 public:
  DeviceBlock() = default;
  DeviceBlock(std::byte* data, uint64_t bytes) : data_(data), bytes_(bytes) {}
  std::byte* data() const { return data_; }
  uint64_t bytes() const { return bytes_; }

 private:
  std::byte* data_ = nullptr;
  uint64_t bytes_ = 0;
};

// A Device placement's state buffers, in segment order. Move-only; when it goes, its extents go
// back to the arena once every transfer noted with Use() is done (DeviceArena::Collect()).
class DeviceState {
 public:
  DeviceState() = default;
  ~DeviceState();
  DeviceState(DeviceState&& other) noexcept;
  DeviceState& operator=(DeviceState&& other) noexcept;
  DeviceState(const DeviceState&) = delete;
  DeviceState& operator=(const DeviceState&) = delete;

  size_t size() const { return blocks_.size(); }
  const DeviceBlock& operator[](size_t i) const { return blocks_[i]; }
  // A transfer that reads or writes these buffers: the memory is not reused before it is done.
  // Const: noting a reader does not change the placement.
  void Use(const device::Transfer& transfer) const;
  // Transfers noted and not yet done (tests).
  size_t pending_uses() const;

 private:
  friend class DeviceArena;
  void Reset();
  std::shared_ptr<DeviceArena> arena_;
  std::vector<DeviceBlock> blocks_;
  std::vector<device::HostExtent> extents_;
  mutable std::vector<device::Transfer> uses_;
};

class DeviceArena : public std::enable_shared_from_this<DeviceArena> {
 public:
  // `bytes` of device memory from `engine` (one AllocateDevice), rounded up to 4 KiB; 0 = none
  // (every Allocate is NO_SPACE). NO_SPACE naming the size when the device refuses. Open thread.
  static Result<std::shared_ptr<DeviceArena>> Create(device::TransferEngine& engine,
                                                     uint64_t bytes);
  // Waits for the transfers of extents not yet returned, then frees the memory.
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  // Room for buffers of `sizes` (0 gives an empty block); NO_SPACE when it does not fit (what is
  // taken is given back). Returns first what Collect() can return. Scheduler thread.
  Result<DeviceState> Allocate(std::span<const uint64_t> sizes);
  // Returns the extents whose transfers are done; never blocks. Scheduler thread (Poll).
  void Collect();

  uint64_t capacity_bytes() const { return capacity_bytes_; }
  uint64_t used_bytes() const;      // extents live or waiting for their transfers
  uint64_t deferred_bytes() const;  // of those, waiting for their transfers

 private:
  friend class DeviceState;
  DeviceArena() = default;
  void Return(std::vector<device::HostExtent> extents, std::vector<device::Transfer> uses);

  struct Deferred {
    std::vector<device::HostExtent> extents;
    std::vector<device::Transfer> uses;
  };
  uint64_t capacity_bytes_ = 0;
  device::DeviceBuffer memory_;
  std::unique_ptr<device::HostArena> extents_;  // bookkeeping over memory_
  mutable std::mutex mu_;
  std::vector<Deferred> deferred_;
  uint64_t deferred_bytes_ = 0;
};

}  // namespace tier
