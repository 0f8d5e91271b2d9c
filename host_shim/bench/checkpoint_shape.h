// checkpoint_shape.h -- the segments of the checkpoint tier-bench moves: one per KV layer (main
// and MTP), one per StateImage part, the hidden state and a small manifest, sized by a model
// profile at a token count, or scaled as a whole to a given size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <tier/host/model_profile.h>
#include <tier/status.h>
#include "tier_provider.h"

namespace tier::bench {

struct SegmentShape {
  tier_segment_kind kind = 0;
  uint32_t index = 0;
  uint64_t bytes = 0;
  std::string name;  // "kv.3", "mtp_kv.0", "state.gdn_recurrent", "hidden", "manifest"
};

struct CheckpointShape {
  std::string profile;  // the profile's name
  uint64_t tokens = 0;  // the profile's token count the shape is made from
  double scale = 1.0;   // < 1 or > 1 when --size-mib resized every segment
  std::vector<SegmentShape> segments;

  uint64_t logical_bytes() const;
  uint64_t kv_segments() const;  // main + speculative KV segments
  std::string Describe() const;  // "17 KV segments x 201.5 MiB + 3 state parts + hidden + manifest"
};

inline constexpr uint64_t kManifestBytes = 256;  // a server manifest is a few hundred bytes

// The checkpoint of `profile` at `tokens` tokens (KV rounded up to whole pages).
CheckpointShape ShapeForTokens(const ModelProfile& profile, uint64_t tokens);

// The same segments as ShapeForTokens(profile, tokens), each resized by one factor (segments
// rounded to 4 KiB, at least 4 KiB; hidden state and manifest kept) so that the total is about
// `bytes`. INVALID_ARGUMENT when `bytes` is too small to hold one 4 KiB block per segment.
Result<CheckpointShape> ShapeForBytes(const ModelProfile& profile, uint64_t tokens, uint64_t bytes);

}  // namespace tier::bench
