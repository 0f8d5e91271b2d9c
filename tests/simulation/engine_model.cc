#include "engine_model.h"

#include <tier/check.h>

#include <cstring>

#include "choices.h"

namespace tier::simulation {

namespace {

// Bytes of a content id at a position: poison for kPoison, a keyed mix otherwise.
void Generate(uint64_t content, uint64_t salt, std::byte* out, size_t bytes) {
  if (content == kPoison) {
    std::memset(out, 0xdb, bytes);
    return;
  }
  for (size_t i = 0; i < bytes; i += 8) {
    const uint64_t w = Mix64(content ^ Mix64(salt + i));
    std::memcpy(out + i, &w, std::min<size_t>(8, bytes - i));
  }
}

bool Matches(uint64_t content, uint64_t salt, const std::byte* in, size_t bytes) {
  std::byte expect[256];
  for (size_t at = 0; at < bytes; at += sizeof(expect)) {
    const size_t n = std::min(sizeof(expect), bytes - at);
    Generate(content, salt + at, expect, n);
    if (std::memcmp(expect, in + at, n) != 0) return false;
  }
  return true;
}

const uint64_t kStateBytes[3] = {200, 56, 40};

}  // namespace

ModelProfile SimProfile() {
  ModelProfile p;
  p.name = "sim";
  p.model = "sim";
  p.gpu = "none";
  p.kv_dtype = "int8";
  p.tokens_per_page = kTokensPerPage;
  p.full_attention_layers = kLayers;
  p.kv_bytes_per_token = kLayers * 2 * kPlaneBytes / kTokensPerPage;
  p.mtp_layers = 0;
  p.state_image = {{"recurrent", kStateBytes[0]}, {"conv", kStateBytes[1]}};
  p.hidden_state_bytes = kStateBytes[2];
  p.prefill_chunk_tokens = 2048;
  // A prefill of at least 2 s: a restore's wait is bounded by the prefill it replaces, and a
  // held completion must not meet that bound while the run takes its next steps.
  p.prefill_chunk_ns = 2e9;
  p.prefill_token_ns = 1e5;
  p.attention_pair_ns = 10;
  p.decode_token_ns = 1e6;
  p.transfer_batch_ns = 100;
  p.transfer_op_ns = 10;
  p.d2h_ns_per_byte = 0.01;
  p.h2d_ns_per_byte = 0.01;
  return p;
}

std::unique_ptr<StateSet> NewStateSet() {
  auto set = std::make_unique<StateSet>();
  const tier_segment_kind kinds[3] = {TIER_SEGMENT_STATE_IMAGE, TIER_SEGMENT_STATE_IMAGE,
                                      TIER_SEGMENT_HIDDEN_STATE};
  const uint32_t index[3] = {0, 1, 0};
  set->parts.resize(3);
  for (int i = 0; i < 3; ++i) {
    set->parts[i].resize(kStateBytes[i]);
    set->buffers.push_back({kinds[i], index[i], set->parts[i].data(), kStateBytes[i]});
  }
  FillState(set.get(), kPoison);
  return set;
}

void FillState(StateSet* set, uint64_t content) {
  set->content = content;
  for (size_t i = 0; i < set->parts.size(); ++i) {
    Generate(content, 0x57a7e000 + i * 4096, set->parts[i].data(), set->parts[i].size());
  }
}

int StateDiffers(const StateSet& set, uint64_t content) {
  for (size_t i = 0; i < set.parts.size(); ++i) {
    if (!Matches(content, 0x57a7e000 + i * 4096, set.parts[i].data(), set.parts[i].size())) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

Pool::Pool(device::TransferEngine* engine) {
  std::vector<device::LayerSpec> layers;
  for (uint32_t l = 0; l < kLayers; ++l) {
    layers.push_back({"layer" + std::to_string(l), {{"k", kPlaneBytes, 1}, {"v", kPlaneBytes, 1}}});
  }
  auto pool = engine->AllocatePool(device::PoolLayout(kPages, kTokensPerPage, std::move(layers)));
  TIER_CHECK(pool.ok());
  pool_ = std::move(pool).value();
  std::memset(pool_.memory.data(), 0, pool_.memory.bytes());
  shadow_.assign(pool_.memory.bytes(), std::byte{0});
  for (uint32_t p = 0; p < kPages; ++p) Write(p, kPoison);
}

KvPool Pool::view() const {
  KvPool v;
  v.layout = pool_.layout;
  v.view = pool_.view;
  v.main_kv_layers = kLayers;
  return v;
}

std::byte* Pool::ShadowOf(uint32_t layer, uint32_t plane, uint32_t page) {
  return shadow_.data() + (pool_.page(layer, plane, page) - pool_.memory.data());
}

void Pool::Expect(uint32_t page, uint64_t content) {
  for (uint32_t l = 0; l < kLayers; ++l) {
    for (uint32_t q = 0; q < 2; ++q) {
      Generate(content, (uint64_t{l} << 40) | (uint64_t{q} << 32), ShadowOf(l, q, page),
               kPlaneBytes);
    }
  }
}

void Pool::Write(uint32_t page, uint64_t content) {
  Expect(page, content);
  for (uint32_t l = 0; l < kLayers; ++l) {
    for (uint32_t q = 0; q < 2; ++q) {
      std::memcpy(pool_.page(l, q, page), ShadowOf(l, q, page), kPlaneBytes);
    }
  }
}

bool Pool::SameAsShadow(uint32_t page) const {
  for (uint32_t l = 0; l < kLayers; ++l) {
    for (uint32_t q = 0; q < 2; ++q) {
      const std::byte* real = pool_.page(l, q, page);
      if (std::memcmp(real, shadow_.data() + (real - pool_.memory.data()), kPlaneBytes) != 0) {
        return false;
      }
    }
  }
  return true;
}

bool Pool::Holds(uint32_t page, uint64_t content) const {
  for (uint32_t l = 0; l < kLayers; ++l) {
    for (uint32_t q = 0; q < 2; ++q) {
      if (!Matches(content, (uint64_t{l} << 40) | (uint64_t{q} << 32), pool_.page(l, q, page),
                   kPlaneBytes)) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace tier::simulation
