#include "device_tier.h"

#include <tier/check.h>

#include <algorithm>
#include <utility>

namespace tier {

Status FromDevice(const Status& status, const std::string& what) {
  return status.Annotate("device: " + what);  // the device layer's code, kept
}

bool CopyJob::Done() const {
  return std::all_of(transfers_.begin(), transfers_.end(),
                     [](const device::Transfer& t) { return t.IsDone(); });
}

Status CopyJob::Wait() const {
  for (const device::Transfer& t : transfers_) {
    const Status done = t.Wait();
    if (!done.ok()) return FromDevice(done, "copy");
  }
  return Status::Ok();
}

Result<std::unique_ptr<DeviceTier>> DeviceTier::Create(
    std::shared_ptr<device::TransferEngine> engine, KvPool pool, uint64_t state_bytes) {
  if (engine == nullptr) return Status::InvalidArgument("no transfer engine");
  TIER_RETURN_IF_ERROR(pool.layout.Validate().Annotate("KV pool layout"));
  if (pool.layout.tokens_per_page() == 0) {
    return Status::InvalidArgument("KV pool layout: tokens_per_page is 0");
  }
  if (pool.view.plane_base.size() != pool.layout.layer_count()) {
    return Status::InvalidArgument(
        "KV pool view has " + std::to_string(pool.view.plane_base.size()) + " layers, the layout " +
        std::to_string(pool.layout.layer_count()));
  }
  // Planes the engine cannot address (pageable or pinned host memory, another GPU's) would fail
  // at the first copy, or, on the CPU engine, be read as host memory: refuse them now.
  for (uint32_t l = 0; l < pool.layout.layer_count(); ++l) {
    for (uint32_t q = 0; q < pool.layout.plane_count(l); ++q) {
      const Status kind =
          engine->CheckDeviceMemory(pool.view.plane_base[l][q], pool.layout.plane_pool_bytes(l, q));
      if (!kind.ok()) {
        return kind.Annotate("KV pool layer " + std::to_string(l) + " plane " + std::to_string(q) +
                             " (" + pool.layout.plane(l, q).name + ")");
      }
    }
  }
  if (pool.main_kv_layers == 0) pool.main_kv_layers = pool.layout.layer_count();
  if (pool.main_kv_layers > pool.layout.layer_count()) {
    return Status::InvalidArgument("main_kv_layers " + std::to_string(pool.main_kv_layers) +
                                   " exceeds the pool's " +
                                   std::to_string(pool.layout.layer_count()) + " layers");
  }
  auto arena = DeviceArena::Create(*engine, state_bytes);
  if (!arena.ok()) return arena.status();
  return std::unique_ptr<DeviceTier>(
      new DeviceTier(std::move(engine), std::move(pool), std::move(arena).value()));
}

uint32_t DeviceTier::PagesFor(uint64_t tokens) const {
  const uint64_t tpp = pool_.layout.tokens_per_page();
  return static_cast<uint32_t>((tokens + tpp - 1) / tpp);
}

SegmentSpec DeviceTier::LayerSegment(uint32_t layer, uint32_t pages) const {
  SegmentSpec spec;
  const bool main = layer < pool_.main_kv_layers;
  spec.kind = main ? TIER_SEGMENT_MAIN_KV : TIER_SEGMENT_SPEC_KV;
  spec.index = main ? layer : layer - pool_.main_kv_layers;
  spec.physical_bytes = pool_.layout.segment_bytes(layer, pages);
  return spec;
}

Status DeviceTier::CheckPages(std::span<const uint32_t> pages, bool distinct) const {
  if (distinct && ++check_ == 0) {  // wrapped: stamps of earlier calls would look current
    std::fill(seen_.begin(), seen_.end(), 0);
    check_ = 1;
  }
  for (size_t i = 0; i < pages.size(); ++i) {
    if (pages[i] >= pool_.layout.page_count()) {
      return Status::InvalidArgument("page id " + std::to_string(pages[i]) + " at index " +
                                     std::to_string(i) + " is outside the pool (" +
                                     std::to_string(pool_.layout.page_count()) + " pages)");
    }
    if (distinct && std::exchange(seen_[pages[i]], check_) == check_) {
      return Status::InvalidArgument("page id " + std::to_string(pages[i]) + " appears twice");
    }
  }
  return Status::Ok();
}

Result<CopyJob> DeviceTier::ToHost(std::span<const uint32_t> pages,
                                   std::span<const StateBuffer> state, HostCopy& dst) {
  TIER_CHECK(dst.segment_count() >= kv_layers() + state.size());
  CopyJob job;
  for (uint32_t l = 0; l < kv_layers(); ++l) {
    auto gathered = engine_->Gather(pool_.layout, pool_.view, l, pages, dst.segment(l));
    if (!gathered.ok())
      return FromDevice(gathered.status(), "gather of layer " + std::to_string(l));
    job.Add(std::move(gathered.value()));
  }
  for (size_t i = 0; i < state.size(); ++i) {
    std::span<std::byte> segment = dst.segment(kv_layers() + i);
    TIER_CHECK(segment.size() == state[i].bytes);
    if (segment.empty()) continue;
    auto copied = engine_->CopyToHost(segment.data(), state[i].data, state[i].bytes);
    if (!copied.ok()) return FromDevice(copied.status(), "state to host");
    job.Add(std::move(copied.value()));
  }
  return job;
}

Result<CopyJob> DeviceTier::DeviceStateToHost(const DeviceCopy& copy, HostCopy& dst) {
  CopyJob job;
  for (size_t i = 0; i < copy.state.size(); ++i) {
    std::span<std::byte> segment = dst.segment(kv_layers() + i);
    TIER_CHECK(segment.size() == copy.state[i].bytes());
    if (segment.empty()) continue;
    auto copied = engine_->CopyToHost(segment.data(), copy.state[i].data(), segment.size());
    if (!copied.ok()) return FromDevice(copied.status(), "device state to host");
    copy.state.Use(copied.value());
    job.Add(std::move(copied.value()));
  }
  return job;
}

const StateBuffer* DeviceTier::Find(std::span<const StateBuffer> lane, const SegmentSpec& spec) {
  for (const StateBuffer& b : lane) {
    if (b.kind == spec.kind && b.index == spec.index) return &b;
  }
  return nullptr;
}

Result<CopyJob> DeviceTier::FromHost(const HostCopy& src, const CheckpointEntry& entry,
                                     std::span<const uint32_t> pages,
                                     std::span<const StateBuffer> lane) {
  CopyJob job;
  for (uint32_t l = 0; l < kv_layers(); ++l) {
    auto scattered = engine_->Scatter(pool_.layout, pool_.view, l, src.segment(l), pages);
    if (!scattered.ok()) {
      return FromDevice(scattered.status(), "scatter of layer " + std::to_string(l));
    }
    job.Add(std::move(scattered.value()));
  }
  for (size_t i = entry.kv_segments; i < entry.segments.size(); ++i) {
    const SegmentSpec& spec = entry.segments[i];
    if (spec.kind == TIER_SEGMENT_MANIFEST || spec.kind == TIER_SEGMENT_OTHER) continue;
    const StateBuffer* to = Find(lane, spec);
    if (to == nullptr || to->bytes != spec.physical_bytes) {
      return Status::InvalidArgument(
          "the lane has no state buffer of kind " + std::to_string(spec.kind) + " index " +
          std::to_string(spec.index) + " and " + std::to_string(spec.physical_bytes) + " bytes");
    }
    if (to->bytes == 0) continue;
    auto copied = engine_->CopyToDevice(to->data, src.segment(i).data(), to->bytes);
    if (!copied.ok()) return FromDevice(copied.status(), "state to device");
    job.Add(std::move(copied.value()));
  }
  return job;
}

Result<device::Transfer> DeviceTier::DeviceToDevice(std::byte* dst, const std::byte* src,
                                                    uint64_t bytes) {
  auto copied = engine_->CopyOnDevice(dst, src, bytes);
  if (!copied.ok()) return FromDevice(copied.status(), "device to device");
  return std::move(copied.value());
}

Result<DeviceState> DeviceTier::CopyStateOnDevice(std::span<const StateBuffer> state,
                                                  CopyJob* job) {
  std::vector<uint64_t> sizes;
  for (const StateBuffer& s : state) sizes.push_back(s.bytes);
  auto blocks = arena_->Allocate(sizes);
  if (!blocks.ok()) return blocks.status().Annotate("device memory for a Device placement");
  DeviceState owned = std::move(blocks).value();
  for (size_t i = 0; i < state.size(); ++i) {
    if (state[i].bytes == 0) continue;
    // A failure part-way returns `owned` to the arena after what was queued into it is done.
    auto copied = DeviceToDevice(owned[i].data(), state[i].data, state[i].bytes);
    if (!copied.ok()) return copied.status();
    owned.Use(copied.value());
    job->Add(std::move(copied.value()));
  }
  return owned;
}

Result<CopyJob> DeviceTier::StateToLane(const DeviceCopy& copy, const CheckpointEntry& entry,
                                        std::span<const StateBuffer> lane) {
  CopyJob job;
  for (size_t i = 0; i < copy.state.size(); ++i) {
    const SegmentSpec& spec = entry.segments[entry.kv_segments + i];
    const StateBuffer* to = Find(lane, spec);
    if (to == nullptr || to->bytes != spec.physical_bytes) {
      return Status::InvalidArgument(
          "the lane has no state buffer of kind " + std::to_string(spec.kind) + " index " +
          std::to_string(spec.index) + " and " + std::to_string(spec.physical_bytes) + " bytes");
    }
    if (to->bytes == 0) continue;
    auto copied = DeviceToDevice(to->data, copy.state[i].data(), to->bytes);
    if (!copied.ok()) return copied.status();
    copy.state.Use(copied.value());
    job.Add(std::move(copied.value()));
  }
  return job;
}

Status DeviceTier::OrderAfter(device::NativeStream producer) {
  if (producer == nullptr) return Status::Ok();
  const Status ordered = engine_->OrderAfter(producer);
  return ordered.ok() ? ordered : FromDevice(ordered, "ordering after the server's stream");
}

void DeviceTier::Hold(std::span<const uint32_t> pages) {
  for (uint32_t p : pages) {
    TIER_CHECK_MSG(p < held_.size(), "page %u held but outside the pool", p);
    if (held_[p]++ == 0) ++held_pages_;
  }
}

std::vector<uint32_t> DeviceTier::Drop(std::span<const uint32_t> pages) {
  std::vector<uint32_t> freed;
  for (uint32_t p : pages) {
    TIER_CHECK_MSG(p < held_.size() && held_[p] > 0, "page %u dropped but not held", p);
    if (--held_[p] == 0) {
      --held_pages_;
      freed.push_back(p);
    }
  }
  return freed;
}

}  // namespace tier
