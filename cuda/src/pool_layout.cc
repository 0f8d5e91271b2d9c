#include "tier/device/pool_layout.h"

#include <string>

namespace tier::device {
namespace {

// The whole pool must stay far from 2^64 so that every offset below fits without a check.
constexpr std::uint64_t kMaxPoolBytes = std::uint64_t{1} << 56;  // 64 PiB
constexpr std::uint64_t kMaxBytesPerPage = std::uint64_t{1} << 32;

bool ValidElementBytes(std::uint32_t element_bytes) {
  return element_bytes == 1 || element_bytes == 2 || element_bytes == 4 || element_bytes == 8;
}

}  // namespace

Status PoolLayout::Validate() const {
  if (page_count_ == 0) return Status::InvalidArgument("pool layout: page_count is 0");
  if (tokens_per_page_ == 0) return Status::InvalidArgument("pool layout: tokens_per_page is 0");
  if (layers_.empty()) return Status::InvalidArgument("pool layout: no layers");
  if (layers_.size() > kMaxLayers) {
    return Status::InvalidArgument("pool layout: " + std::to_string(layers_.size()) +
                                   " layers exceed the bound of " + std::to_string(kMaxLayers));
  }
  std::uint64_t pool = 0;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const LayerSpec& layer = layers_[l];
    const std::string where = "pool layout: layer " + std::to_string(l) + " (" + layer.name + ")";
    if (layer.planes.empty()) return Status::InvalidArgument(where + " has no planes");
    if (layer.planes.size() > kMaxPlanesPerLayer) {
      return Status::InvalidArgument(where + " has " + std::to_string(layer.planes.size()) +
                                     " planes, more than " + std::to_string(kMaxPlanesPerLayer));
    }
    for (std::size_t q = 0; q < layer.planes.size(); ++q) {
      const PlaneSpec& plane = layer.planes[q];
      const std::string pwhere = where + " plane " + std::to_string(q) + " (" + plane.name + ")";
      if (plane.bytes_per_page == 0) {
        return Status::InvalidArgument(pwhere + ": bytes_per_page is 0");
      }
      if (plane.bytes_per_page > kMaxBytesPerPage) {
        return Status::InvalidArgument(pwhere + ": bytes_per_page " +
                                       std::to_string(plane.bytes_per_page) + " exceeds 4 GiB");
      }
      if (!ValidElementBytes(plane.element_bytes)) {
        return Status::InvalidArgument(pwhere + ": element_bytes " +
                                       std::to_string(plane.element_bytes) +
                                       " is not 1, 2, 4 or 8");
      }
      if (plane.bytes_per_page % plane.element_bytes != 0) {
        return Status::InvalidArgument(
            pwhere + ": bytes_per_page " + std::to_string(plane.bytes_per_page) +
            " is not a multiple of element_bytes " + std::to_string(plane.element_bytes));
      }
      // page_count < 2^32 and bytes_per_page <= 2^32: the product fits in 64 bits.
      pool += static_cast<std::uint64_t>(page_count_) * plane.bytes_per_page;
      if (pool > kMaxPoolBytes) return Status::InvalidArgument("pool layout: pool exceeds 64 PiB");
    }
  }
  return Status::Ok();
}

std::uint64_t PoolLayout::layer_page_bytes(std::uint32_t layer) const {
  std::uint64_t bytes = 0;
  for (const PlaneSpec& plane : layers_[layer].planes) bytes += plane.bytes_per_page;
  return bytes;
}

std::uint64_t PoolLayout::page_bytes() const {
  std::uint64_t bytes = 0;
  for (std::uint32_t l = 0; l < layer_count(); ++l) bytes += layer_page_bytes(l);
  return bytes;
}

std::uint64_t PoolLayout::plane_pool_bytes(std::uint32_t layer, std::uint32_t plane) const {
  return static_cast<std::uint64_t>(page_count_) * layers_[layer].planes[plane].bytes_per_page;
}

std::uint64_t PoolLayout::pool_bytes() const {
  return static_cast<std::uint64_t>(page_count_) * page_bytes();
}

std::uint64_t PoolLayout::segment_bytes(std::uint32_t layer, std::uint64_t table_pages) const {
  return table_pages * layer_page_bytes(layer);
}

std::uint64_t PoolLayout::segment_plane_offset(std::uint32_t layer, std::uint32_t plane,
                                               std::uint64_t table_pages) const {
  std::uint64_t prefix = 0;
  for (std::uint32_t q = 0; q < plane; ++q) prefix += layers_[layer].planes[q].bytes_per_page;
  return table_pages * prefix;
}

std::uint64_t PoolLayout::checkpoint_bytes(std::uint64_t table_pages) const {
  return table_pages * page_bytes();
}

Result<PoolLayout> MakeNinferLayout(const NinferLayoutSpec& spec) {
  if (spec.layers == 0 || spec.kv_heads == 0 || spec.head_dim == 0 || spec.tokens_per_page == 0) {
    return Status::InvalidArgument(
        "ninfer layout: layers, kv_heads, head_dim and tokens_per_page must be > 0");
  }
  const std::uint64_t values_per_page =
      static_cast<std::uint64_t>(spec.tokens_per_page) * spec.kv_heads * spec.head_dim;
  std::vector<PlaneSpec> planes;
  switch (spec.dtype) {
    case KvDtype::kBf16:
      planes = {{"k", values_per_page * 2, 2}, {"v", values_per_page * 2, 2}};
      break;
    case KvDtype::kInt8G64: {
      if (spec.scale_group == 0 || spec.head_dim % spec.scale_group != 0) {
        return Status::InvalidArgument(
            "ninfer layout: scale_group " + std::to_string(spec.scale_group) +
            " does not divide head_dim " + std::to_string(spec.head_dim));
      }
      if (spec.scale_bytes != 2 && spec.scale_bytes != 4) {
        return Status::InvalidArgument("ninfer layout: scale_bytes " +
                                       std::to_string(spec.scale_bytes) +
                                       " is not 2 (FP16) or 4 (FP32)");
      }
      const std::uint64_t scale_bytes_per_page =
          values_per_page / spec.scale_group * spec.scale_bytes;
      planes = {{"k", values_per_page, 1},
                {"v", values_per_page, 1},
                {"k_scale", scale_bytes_per_page, spec.scale_bytes},
                {"v_scale", scale_bytes_per_page, spec.scale_bytes}};
      break;
    }
    default:
      return Status::InvalidArgument("ninfer layout: unknown dtype");
  }
  std::vector<LayerSpec> layers;
  layers.reserve(spec.layers + (spec.mtp_layer ? 1 : 0));
  for (std::uint32_t l = 0; l < spec.layers; ++l) {
    layers.push_back(LayerSpec{"layer" + std::to_string(l), planes});
  }
  if (spec.mtp_layer) layers.push_back(LayerSpec{"mtp", planes});
  PoolLayout layout(spec.page_count, spec.tokens_per_page, std::move(layers));
  TIER_RETURN_IF_ERROR(layout.Validate());
  return layout;
}

}  // namespace tier::device
