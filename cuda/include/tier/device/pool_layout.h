// pool_layout.h -- the shape of a paged KV pool and of the segments a checkpoint is gathered into.
//
// Pool (on the device): for every layer, for every plane of that layer (K, V, K-scales, V-scales
// for INT8-G64; K, V for BF16), one page-major array: page p of plane q of layer l starts at
// plane_base[l][q] + p * bytes_per_page(l, q). Planes of a layer may live in separate allocations.
//
// Segment (in host memory, and on disk exactly so): one segment per layer. For a page table
// T = [t_0, ..., t_{n-1}] a layer's segment is PLANE-MAJOR:
//
//     plane 0 of page t_0 | plane 0 of page t_1 | ... | plane 0 of page t_{n-1} |
//     plane 1 of page t_0 | ...                                                 | ... | last plane
//
// so plane q starts at n * (bytes_per_page of planes 0..q-1) and its page i at
//     segment_plane_offset(l, q, n) + i * bytes_per_page(l, q).
// Like values sit together (all K, then all V, then the small scale planes), which is what a
// compressor wants and what lets the optional byte shuffle act on a whole plane at once.
//
// PoolLayout is a plain value: build it once, then read it from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tier/device/limits.h"
#include "tier/status.h"

namespace tier::device {

struct PlaneSpec {
  std::string name;                  // "k", "v", "k_scale", "v_scale", ...
  std::uint64_t bytes_per_page = 0;  // bytes this plane holds for one page
  std::uint32_t element_bytes = 1;   // 1 (INT8/FP8), 2 (BF16/FP16), 4 (FP32): for the byte shuffle
};

struct LayerSpec {
  std::string name;  // "layer3", "mtp", ...
  std::vector<PlaneSpec> planes;
};

class PoolLayout {
 public:
  PoolLayout() = default;
  // Build from parts; call Validate() before use (the engines do). Any thread.
  PoolLayout(std::uint32_t page_count, std::uint32_t tokens_per_page, std::vector<LayerSpec> layers)
      : page_count_(page_count), tokens_per_page_(tokens_per_page), layers_(std::move(layers)) {}

  // Appends a layer (e.g. the MTP layer's KV); the owner calls it before sharing the layout.
  void AddLayer(LayerSpec layer) { layers_.push_back(std::move(layer)); }

  // Checks every bound: page_count >= 1, 1..kMaxLayers layers, 1..kMaxPlanesPerLayer planes per
  // layer, bytes_per_page > 0 and a multiple of element_bytes (1, 2, 4 or 8), no size overflow;
  // INVALID_ARGUMENT naming the layer and plane otherwise.
  Status Validate() const;

  std::uint32_t page_count() const { return page_count_; }
  std::uint32_t tokens_per_page() const { return tokens_per_page_; }
  std::uint32_t layer_count() const { return static_cast<std::uint32_t>(layers_.size()); }
  const LayerSpec& layer(std::uint32_t layer) const { return layers_[layer]; }
  std::uint32_t plane_count(std::uint32_t layer) const {
    return static_cast<std::uint32_t>(layers_[layer].planes.size());
  }
  const PlaneSpec& plane(std::uint32_t layer, std::uint32_t plane) const {
    return layers_[layer].planes[plane];
  }

  // Bytes one page occupies in one layer, all planes together.
  std::uint64_t layer_page_bytes(std::uint32_t layer) const;
  // Bytes one page occupies across all layers.
  std::uint64_t page_bytes() const;
  // Bytes of one plane's page array in the pool (page_count * bytes_per_page).
  std::uint64_t plane_pool_bytes(std::uint32_t layer, std::uint32_t plane) const;
  // Bytes of the whole pool, every layer and plane.
  std::uint64_t pool_bytes() const;
  // Bytes of one layer's segment for a page table of `table_pages` pages.
  std::uint64_t segment_bytes(std::uint32_t layer, std::uint64_t table_pages) const;
  // Offset of `plane` inside a layer's segment for a page table of `table_pages` pages.
  std::uint64_t segment_plane_offset(std::uint32_t layer, std::uint32_t plane,
                                     std::uint64_t table_pages) const;
  // Bytes of all layers' segments for a page table of `table_pages` pages.
  std::uint64_t checkpoint_bytes(std::uint64_t table_pages) const;

 private:
  std::uint32_t page_count_ = 0;
  std::uint32_t tokens_per_page_ = 0;
  std::vector<LayerSpec> layers_;
};

enum class KvDtype : std::uint8_t {
  kBf16,     // K, V as BF16: planes k, v (element 2 bytes)
  kInt8G64,  // K, V as INT8 with one scale per `scale_group` values: planes k, v, k_scale, v_scale
};

// NInfer's pool: full-attention layers x kv_heads x head_dim per token, `tokens_per_page` tokens
// a page. Qwen3.8-27B: 16 x 4 x 256, 64-token pages; INT8-G64 with FP16 scales gives 33,792 bytes
// per token, BF16 65,536.
struct NinferLayoutSpec {
  std::uint32_t layers = 16;
  std::uint32_t kv_heads = 4;
  std::uint32_t head_dim = 256;
  std::uint32_t tokens_per_page = 64;
  KvDtype dtype = KvDtype::kInt8G64;
  std::uint32_t scale_group = 64;  // INT8: values per scale (must divide head_dim)
  std::uint32_t scale_bytes = 2;   // INT8: 2 (FP16) or 4 (FP32)
  std::uint32_t page_count = 0;    // pages in the pool
  bool mtp_layer = false;          // append one more layer ("mtp") shaped like the others
};

// Builds and validates NInfer's layout; layers are named "layer0".. and planes "k", "v",
// "k_scale", "v_scale". Any thread.
Result<PoolLayout> MakeNinferLayout(const NinferLayoutSpec& spec);

}  // namespace tier::device
