#include "device_arena.h"

#include <tier/check.h>

#include <algorithm>
#include <string>
#include <utility>

namespace tier {
namespace {

constexpr uint64_t kPageBytes = 4096;
constexpr uint64_t kBlockAlignBytes = 256;

// Hands out one fixed block, once: the arena's device memory, as HostArena's one chunk.
class FixedBlockAllocator final : public device::HostAllocator {
 public:
  FixedBlockAllocator(std::byte* base, uint64_t bytes) : base_(base), bytes_(bytes) {}
  const char* name() const override { return "device_arena"; }
  bool pinned() const override { return false; }
  Result<void*> Allocate(uint64_t bytes) override {
    if (given_ || bytes != bytes_) {
      return Status::NoSpace("device arena: no device memory beyond the arena");
    }
    given_ = true;
    return static_cast<void*>(base_);
  }
  void Deallocate(void* /*ptr*/, uint64_t /*bytes*/) override { given_ = false; }

 private:
  std::byte* const base_;
  const uint64_t bytes_;
  bool given_ = false;
};

bool AllDone(const std::vector<device::Transfer>& uses) {
  return std::all_of(uses.begin(), uses.end(),
                     [](const device::Transfer& t) { return t.IsDone(); });
}

}  // namespace

DeviceState::~DeviceState() {
  Reset();
}

DeviceState::DeviceState(DeviceState&& other) noexcept {
  *this = std::move(other);
}

DeviceState& DeviceState::operator=(DeviceState&& other) noexcept {
  if (this != &other) {
    Reset();
    arena_ = std::move(other.arena_);
    blocks_ = std::move(other.blocks_);
    extents_ = std::move(other.extents_);
    uses_ = std::move(other.uses_);
    other.arena_.reset();
    other.blocks_.clear();
    other.extents_.clear();
    other.uses_.clear();
  }
  return *this;
}

void DeviceState::Reset() {
  if (arena_ != nullptr) arena_->Return(std::move(extents_), std::move(uses_));
  arena_.reset();
  blocks_.clear();
  extents_.clear();
  uses_.clear();
}

void DeviceState::Use(const device::Transfer& transfer) const {
  std::erase_if(uses_, [](const device::Transfer& t) { return t.IsDone(); });
  uses_.push_back(transfer);
}

size_t DeviceState::pending_uses() const {
  return static_cast<size_t>(std::count_if(uses_.begin(), uses_.end(),
                                           [](const device::Transfer& t) { return !t.IsDone(); }));
}

Result<std::shared_ptr<DeviceArena>> DeviceArena::Create(device::TransferEngine& engine,
                                                         uint64_t bytes) {
  std::shared_ptr<DeviceArena> arena(new DeviceArena());
  if (bytes == 0) return arena;
  const uint64_t rounded = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  auto memory = engine.AllocateDevice(rounded);
  if (!memory.ok()) {
    return memory.status().Annotate("device arena of " + std::to_string(rounded) +
                                    " bytes for the state of Device placements");
  }
  arena->memory_ = std::move(memory).value();
  device::HostArenaOptions options;
  options.capacity_bytes = rounded;
  options.chunk_bytes = rounded;
  options.reserve_bytes = rounded;
  options.alignment_bytes = kBlockAlignBytes;
  auto extents = device::HostArena::Create(
      options, std::make_shared<FixedBlockAllocator>(arena->memory_.data(), rounded));
  if (!extents.ok()) return extents.status().Annotate("device arena");
  arena->extents_ = std::move(extents).value();
  arena->capacity_bytes_ = rounded;
  return arena;
}

DeviceArena::~DeviceArena() {
  for (Deferred& d : deferred_) {
    for (const device::Transfer& t : d.uses) t.Wait().IgnoreError();
  }
  deferred_.clear();
  extents_.reset();  // before memory_, which it points into
}

Result<DeviceState> DeviceArena::Allocate(std::span<const uint64_t> sizes) {
  Collect();
  DeviceState state;
  state.arena_ = shared_from_this();
  for (uint64_t bytes : sizes) {
    if (bytes == 0) {
      state.blocks_.emplace_back();
      continue;
    }
    if (extents_ == nullptr) {
      return Status::NoSpace("device arena: none (device_state_bytes is 0)");
    }
    auto extent = extents_->Allocate(bytes);
    if (!extent.ok()) return extent.status().Annotate("device arena");  // state gives back
    state.extents_.push_back(*extent);
    state.blocks_.emplace_back(extent->data, bytes);
  }
  return state;
}

void DeviceArena::Return(std::vector<device::HostExtent> extents,
                         std::vector<device::Transfer> uses) {
  if (extents.empty()) return;
  if (AllDone(uses)) {  // nothing still uses it: back at once
    for (const device::HostExtent& e : extents) TIER_CHECK(extents_->Release(e).ok());
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const device::HostExtent& e : extents) deferred_bytes_ += e.reserved_bytes;
  deferred_.push_back({std::move(extents), std::move(uses)});
}

void DeviceArena::Collect() {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(deferred_, [&](Deferred& d) {
    if (!AllDone(d.uses)) return false;
    for (const device::HostExtent& e : d.extents) {
      TIER_CHECK(extents_->Release(e).ok());
      TIER_CHECK(deferred_bytes_ >= e.reserved_bytes);
      deferred_bytes_ -= e.reserved_bytes;
    }
    return true;
  });
}

uint64_t DeviceArena::used_bytes() const {
  return extents_ == nullptr ? 0 : extents_->used_bytes();
}

uint64_t DeviceArena::deferred_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return deferred_bytes_;
}

}  // namespace tier
