#include "checkpoint_shape.h"

#include <algorithm>
#include <cmath>

#include <tier/host/format.h>

namespace tier::bench {
namespace {

constexpr uint64_t kBlock = 4096;

}  // namespace

uint64_t CheckpointShape::logical_bytes() const {
  uint64_t total = 0;
  for (const SegmentShape& s : segments) total += s.bytes;
  return total;
}

uint64_t CheckpointShape::kv_segments() const {
  return static_cast<uint64_t>(std::count_if(segments.begin(), segments.end(), [](const auto& s) {
    return s.kind == TIER_SEGMENT_MAIN_KV || s.kind == TIER_SEGMENT_SPEC_KV;
  }));
}

std::string CheckpointShape::Describe() const {
  uint64_t kv_bytes = 0, state_parts = 0, state_bytes = 0;
  for (const SegmentShape& s : segments) {
    if (s.kind == TIER_SEGMENT_MAIN_KV || s.kind == TIER_SEGMENT_SPEC_KV) kv_bytes = s.bytes;
    if (s.kind == TIER_SEGMENT_STATE_IMAGE) {
      ++state_parts;
      state_bytes += s.bytes;
    }
  }
  return std::to_string(kv_segments()) + " KV segments x " + FormatBytes(kv_bytes) + " + " +
         std::to_string(state_parts) + " StateImage parts (" + FormatBytes(state_bytes) +
         ") + hidden + manifest";
}

CheckpointShape ShapeForTokens(const ModelProfile& profile, uint64_t tokens) {
  CheckpointShape shape;
  shape.profile = profile.name;
  shape.tokens = tokens;
  const uint64_t layer = profile.LayerKvBytes(tokens);
  for (uint32_t l = 0; l < profile.full_attention_layers; ++l) {
    shape.segments.push_back({TIER_SEGMENT_MAIN_KV, l, layer, "kv." + std::to_string(l)});
  }
  for (uint32_t m = 0; m < profile.mtp_layers; ++m) {
    shape.segments.push_back({TIER_SEGMENT_SPEC_KV, m, layer, "mtp_kv." + std::to_string(m)});
  }
  for (uint32_t i = 0; i < profile.state_image.size(); ++i) {
    shape.segments.push_back({TIER_SEGMENT_STATE_IMAGE, i, profile.state_image[i].bytes,
                              "state." + profile.state_image[i].name});
  }
  if (profile.hidden_state_bytes > 0) {
    shape.segments.push_back({TIER_SEGMENT_HIDDEN_STATE, 0, profile.hidden_state_bytes, "hidden"});
  }
  shape.segments.push_back({TIER_SEGMENT_MANIFEST, 0, kManifestBytes, "manifest"});
  return shape;
}

Result<CheckpointShape> ShapeForBytes(const ModelProfile& profile, uint64_t tokens,
                                      uint64_t bytes) {
  CheckpointShape shape = ShapeForTokens(profile, tokens);
  uint64_t fixed = 0, scalable = 0, scalable_count = 0;
  for (const SegmentShape& s : shape.segments) {
    if (s.kind == TIER_SEGMENT_HIDDEN_STATE || s.kind == TIER_SEGMENT_MANIFEST) {
      fixed += s.bytes;
    } else {
      scalable += s.bytes;
      ++scalable_count;
    }
  }
  if (bytes < fixed + scalable_count * kBlock) {
    return Status(TIER_INVALID_ARGUMENT,
                  "a checkpoint of " + std::to_string(bytes) + " bytes cannot hold the " +
                      std::to_string(shape.segments.size()) + " segments of profile '" +
                      profile.name + "' (at least " +
                      std::to_string(fixed + scalable_count * kBlock) + " bytes)");
  }
  shape.scale = static_cast<double>(bytes - fixed) / static_cast<double>(scalable);
  for (SegmentShape& s : shape.segments) {
    if (s.kind == TIER_SEGMENT_HIDDEN_STATE || s.kind == TIER_SEGMENT_MANIFEST) continue;
    const double scaled = std::floor(static_cast<double>(s.bytes) * shape.scale / kBlock);
    s.bytes = std::max<uint64_t>(kBlock, static_cast<uint64_t>(scaled) * kBlock);
  }
  return shape;
}

}  // namespace tier::bench
