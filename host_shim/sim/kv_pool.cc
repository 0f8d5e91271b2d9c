#include "kv_pool.h"

#include <tier/check.h>

#include <algorithm>
#include <cstring>

#include "checkpoint_bytes.h"

namespace tier::sim {
namespace {

uint64_t Scaled(uint64_t bytes, uint64_t scale) {
  return std::max<uint64_t>(1, (bytes + scale - 1) / scale);
}

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9e3779b97f4a7c15ull + b + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// splitmix64 words from `seed` over `out` (or compared against `in`).
void FillWords(uint64_t seed, std::span<std::byte> out) {
  size_t i = 0;
  for (; i + 8 <= out.size(); i += 8) {
    const uint64_t w = Mix(seed, i);
    std::memcpy(out.data() + i, &w, 8);
  }
  if (i < out.size()) {
    const uint64_t w = Mix(seed, i);
    std::memcpy(out.data() + i, &w, out.size() - i);
  }
}

bool SameWords(uint64_t seed, std::span<const std::byte> in) {
  size_t i = 0;
  for (; i + 8 <= in.size(); i += 8) {
    const uint64_t w = Mix(seed, i);
    if (std::memcmp(in.data() + i, &w, 8) != 0) return false;
  }
  if (i < in.size()) {
    const uint64_t w = Mix(seed, i);
    if (std::memcmp(in.data() + i, &w, in.size() - i) != 0) return false;
  }
  return true;
}

}  // namespace

device::PoolLayout SimPoolLayout(const ModelProfile& profile, uint64_t bytes_scale,
                                 uint32_t page_count) {
  const uint64_t layer_token_bytes = profile.kv_bytes_per_token / profile.full_attention_layers;
  const uint64_t page_bytes = Scaled(layer_token_bytes * profile.tokens_per_page, bytes_scale);
  std::vector<device::LayerSpec> layers;
  const uint32_t count = profile.full_attention_layers + profile.mtp_layers;
  for (uint32_t l = 0; l < count; ++l) {
    device::LayerSpec layer;
    layer.name = l < profile.full_attention_layers ? "layer" + std::to_string(l) : "mtp";
    layer.planes.push_back({"kv", page_bytes, 1});
    layers.push_back(std::move(layer));
  }
  return device::PoolLayout(page_count, profile.tokens_per_page, std::move(layers));
}

std::vector<StateBuffer> SimStateShapes(const ModelProfile& profile, uint64_t bytes_scale) {
  std::vector<StateBuffer> shapes;
  for (uint32_t i = 0; i < profile.state_image.size(); ++i) {
    shapes.push_back(
        {TIER_SEGMENT_STATE_IMAGE, i, nullptr, Scaled(profile.state_image[i].bytes, bytes_scale)});
  }
  if (profile.hidden_state_bytes > 0) {
    shapes.push_back(
        {TIER_SEGMENT_HIDDEN_STATE, 0, nullptr, Scaled(profile.hidden_state_bytes, bytes_scale)});
  }
  return shapes;
}

Result<std::unique_ptr<KvPool>> KvPool::Create(device::TransferEngine* engine,
                                               const ModelProfile& profile, uint64_t bytes_scale,
                                               uint32_t page_count) {
  const device::PoolLayout layout = SimPoolLayout(profile, bytes_scale, page_count);
  auto pool = engine->AllocatePool(layout);
  if (!pool.ok()) {
    return Status::NoSpace("simulator KV pool of " + std::to_string(page_count) +
                           " pages: " + pool.status().ToString());
  }
  std::unique_ptr<KvPool> kv(
      new KvPool(engine, std::move(pool.value()), SimStateShapes(profile, bytes_scale)));
  kv->refs_.assign(page_count, 0);
  kv->held_.assign(page_count, 0);
  for (uint32_t p = page_count; p > 0; --p) kv->free_.push_back(p - 1);
  return kv;
}

tier::KvPool KvPool::view() const {
  tier::KvPool view;
  view.layout = layout_;
  view.view = pool_.view;
  view.main_kv_layers = layout_.layer_count();
  return view;
}

bool KvPool::Allocate(uint32_t count, std::vector<uint32_t>* pages) {
  if (free_.size() < count) return false;
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t p = free_.back();
    free_.pop_back();
    TIER_CHECK(refs_[p] == 0 && held_[p] == 0);
    refs_[p] = 1;
    pages->push_back(p);
  }
  return true;
}

void KvPool::Ref(std::span<const uint32_t> pages) {
  for (uint32_t p : pages) {
    TIER_CHECK(refs_[p] > 0 || held_[p] != 0);
    ++refs_[p];
  }
}

void KvPool::Unref(std::span<const uint32_t> pages) {
  for (uint32_t p : pages) {
    TIER_CHECK(refs_[p] > 0);
    --refs_[p];
    Release(p);
  }
}

void KvPool::HeldByHost(std::span<const uint32_t> pages) {
  for (uint32_t p : pages) held_[p] = 1;
}

void KvPool::ReleasedByHost(std::span<const uint32_t> pages) {
  for (uint32_t p : pages) {
    TIER_CHECK(held_[p] != 0);
    held_[p] = 0;
    Release(p);
  }
}

void KvPool::Release(uint32_t page) {
  if (refs_[page] == 0 && held_[page] == 0) free_.push_back(page);
}

uint64_t KvPool::PageSeed(std::span<const uint64_t> prefix_hashes, uint32_t block_tokens,
                          uint32_t page_index, uint32_t layer) const {
  const uint32_t pages_per_block = std::max<uint32_t>(1, block_tokens / layout_.tokens_per_page());
  const uint32_t block = page_index / pages_per_block;
  const uint64_t prefix = block < prefix_hashes.size() ? prefix_hashes[block] : 0xf111e5ull;
  return Mix(Mix(prefix, page_index), layer);
}

void KvPool::Fill(std::span<const uint64_t> prefix_hashes, uint32_t block_tokens, uint32_t first,
                  std::span<const uint32_t> pages) {
  for (uint32_t l = 0; l < layout_.layer_count(); ++l) {
    const uint64_t bytes = layout_.plane(l, 0).bytes_per_page;
    for (size_t i = 0; i < pages.size(); ++i) {
      const uint64_t seed =
          PageSeed(prefix_hashes, block_tokens, first + static_cast<uint32_t>(i), l);
      FillWords(seed, {pool_.page(l, 0, pages[i]), bytes});
    }
  }
}

bool KvPool::Check(std::span<const uint64_t> prefix_hashes, uint32_t block_tokens,
                   std::span<const uint32_t> pages) const {
  for (uint32_t l = 0; l < layout_.layer_count(); ++l) {
    const uint64_t bytes = layout_.plane(l, 0).bytes_per_page;
    for (size_t i = 0; i < pages.size(); ++i) {
      const uint64_t seed = PageSeed(prefix_hashes, block_tokens, static_cast<uint32_t>(i), l);
      if (!SameWords(seed, {pool_.page(l, 0, pages[i]), bytes})) return false;
    }
  }
  return true;
}

Result<std::unique_ptr<KvPool::StateSet>> KvPool::NewStateSet() {
  auto set = std::make_unique<StateSet>();
  for (StateBuffer shape : shapes_) {
    auto memory = engine_->AllocateDevice(shape.bytes);
    if (!memory.ok()) return Status::NoSpace("lane state: " + memory.status().ToString());
    shape.data = memory.value().data();
    set->buffers.push_back(shape);
    set->memory.push_back(std::move(memory.value()));
  }
  return set;
}

void KvPool::FillState(const tier_key& key, StateSet* set) {
  for (const StateBuffer& b : set->buffers) {
    FillSegmentBytes(key, b.kind, b.index, {b.data, b.bytes});
  }
}

bool KvPool::CheckState(const tier_key& key, const StateSet& set) {
  for (const StateBuffer& b : set.buffers) {
    if (!SegmentBytesMatch(key, b.kind, b.index, {b.data, b.bytes})) return false;
  }
  return true;
}

}  // namespace tier::sim
