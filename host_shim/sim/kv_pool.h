// kv_pool.h -- the simulator's stand-in for an engine's paged KV pool and lane state, with
// synthetic contents that are a pure function of the token prefix, so every restored page and
// state buffer can be checked against what the model would hold.
//
// The pool lives on the Host's transfer engine (host memory on the CPU path). Page p of a sequence
// whose blocks are B holds bytes derived from (the hash of B's prefix up to p's block, p, layer):
// the same prefix gives the same KV, as in a real model. A checkpoint's state buffers hold bytes
// derived from its key. Sizes are the model profile's divided by the bytes scale.
//
// Pages are reference counted: a request's own references, plus one "held by the Host" flag set
// at Seal and cleared by Event::kPagesReleased. A page is free when neither holds it.
// Simulator thread only.
#pragma once

#include <tier/device/transfer_engine.h>
#include <tier/host/host.h>
#include <tier/host/model_profile.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace tier::sim {

// The pool layout for `profile` at `bytes_scale`: one plane per layer, full-attention layers then
// MTP layers, each page the real page's bytes / scale (at least 1).
device::PoolLayout SimPoolLayout(const ModelProfile& profile, uint64_t bytes_scale,
                                 uint32_t page_count);
// The state buffers' shapes (StateImage parts, hidden state), scaled.
std::vector<StateBuffer> SimStateShapes(const ModelProfile& profile, uint64_t bytes_scale);

class KvPool {
 public:
  static Result<std::unique_ptr<KvPool>> Create(device::TransferEngine* engine,
                                                const ModelProfile& profile, uint64_t bytes_scale,
                                                uint32_t page_count);

  // The view Host::Open needs.
  tier::KvPool view() const;
  uint32_t tokens_per_page() const { return layout_.tokens_per_page(); }
  uint32_t free_pages() const { return static_cast<uint32_t>(free_.size()); }
  uint32_t page_count() const { return layout_.page_count(); }

  // `count` free pages with one request reference each; false (nothing taken) if too few.
  bool Allocate(uint32_t count, std::vector<uint32_t>* pages);
  // Adds / drops one request reference.
  void Ref(std::span<const uint32_t> pages);
  void Unref(std::span<const uint32_t> pages);
  // The Host now holds / no longer holds these pages.
  void HeldByHost(std::span<const uint32_t> pages);
  void ReleasedByHost(std::span<const uint32_t> pages);

  // Writes the synthetic KV of pages [first, first + pages.size()) of the sequence `blocks`
  // (block_tokens tokens a block) into `pages`; positions past the blocks get filler.
  void Fill(std::span<const uint64_t> prefix_hashes, uint32_t block_tokens, uint32_t first,
            std::span<const uint32_t> pages);
  // True when `pages` hold exactly what Fill wrote for the first pages.size() pages.
  bool Check(std::span<const uint64_t> prefix_hashes, uint32_t block_tokens,
             std::span<const uint32_t> pages) const;

  // A set of lane state buffers (device memory of the engine), sized like SimStateShapes.
  struct StateSet {
    std::vector<device::DeviceBuffer> memory;
    std::vector<StateBuffer> buffers;
  };
  Result<std::unique_ptr<StateSet>> NewStateSet();
  // Writes / checks the state of checkpoint `key` in `set`.
  static void FillState(const tier_key& key, StateSet* set);
  static bool CheckState(const tier_key& key, const StateSet& set);

 private:
  KvPool(device::TransferEngine* engine, device::DevicePool pool, std::vector<StateBuffer> shapes)
      : engine_(engine),
        pool_(std::move(pool)),
        layout_(pool_.layout),
        shapes_(std::move(shapes)) {}
  void Release(uint32_t page);
  uint64_t PageSeed(std::span<const uint64_t> prefix_hashes, uint32_t block_tokens,
                    uint32_t page_index, uint32_t layer) const;

  device::TransferEngine* engine_;
  device::DevicePool pool_;
  device::PoolLayout layout_;
  std::vector<StateBuffer> shapes_;
  std::vector<uint32_t> free_;
  std::vector<uint32_t> refs_;  // request references per page
  std::vector<uint8_t> held_;   // 1 while the Host holds the page
};

}  // namespace tier::sim
