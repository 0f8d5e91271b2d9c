// engine_model.h -- the server side of the simulation, written from host.h alone: a paged KV pool
// of its own (two layers of K and V planes) whose every page carries bytes derived from a content
// id the model chose, free pages poisoned; lanes with state buffers; and the ledger of who may
// write each page. The Host is only ever handed pages and buffers through the public API, so any
// byte that changes where the ledger says the Host has no business is a Host write.
#pragma once

#include <tier/device/transfer_engine.h>
#include <tier/host/host.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace tier::simulation {

constexpr uint32_t kTokensPerPage = 16;
constexpr uint32_t kPagesPerBlock = 2;
constexpr uint32_t kBlockTokens = kTokensPerPage * kPagesPerBlock;
constexpr uint32_t kLayers = 2;
constexpr uint32_t kPlaneBytes = 96;  // K and V, each per page per layer
constexpr uint64_t kPoison = 0;       // the content id of a free page or an idle lane

// The profile that matches the pool: 12 bytes a token a layer, two state parts, a hidden state.
ModelProfile SimProfile();

// State buffers of one lane (or of one seal): their shapes follow SimProfile().
struct StateSet {
  std::vector<std::vector<std::byte>> parts;
  std::vector<StateBuffer> buffers;  // views into parts
  uint64_t content = kPoison;        // what they should hold
};
std::unique_ptr<StateSet> NewStateSet();
void FillState(StateSet* set, uint64_t content);
// The first buffer that differs from `content`'s bytes, or -1.
int StateDiffers(const StateSet& set, uint64_t content);

class Pool {
 public:
  static constexpr uint32_t kPages = 256;
  explicit Pool(device::TransferEngine* engine);

  KvPool view() const;
  const device::PoolLayout& layout() const { return pool_.layout; }

  // Writes `content`'s bytes into `page` (the server computing it, or poisoning it).
  void Write(uint32_t page, uint64_t content);
  // Records what `page` must hold from now on without writing it (a restore wrote it).
  void Expect(uint32_t page, uint64_t content);
  // True when `page` holds `content`'s bytes.
  bool Holds(uint32_t page, uint64_t content) const;
  // The first page, among those `check` accepts, whose bytes differ from what it must hold; -1.
  template <typename Check>
  int FirstChanged(const Check& check) const {
    if (std::memcmp(pool_.memory.data(), shadow_.data(), shadow_.size()) == 0) return -1;
    for (uint32_t p = 0; p < kPages; ++p) {
      if (check(p) && !SameAsShadow(p)) return static_cast<int>(p);
    }
    return -1;
  }

 private:
  bool SameAsShadow(uint32_t page) const;
  std::byte* ShadowOf(uint32_t layer, uint32_t plane, uint32_t page);
  device::DevicePool pool_;
  std::vector<std::byte> shadow_;  // the pool's memory as the ledger says it must be
};

// Who may write each page (host.h, PAGES): the server's free pages and the ones it uses, the
// Host's (held by a seal, shared by a Device hit), and pages a pending admission was handed.
struct PageLedger {
  std::array<uint32_t, Pool::kPages> host_refs{};    // seals that named it and took it
  std::array<uint32_t, Pool::kPages> server_uses{};  // computing, a lane reading it, owning it
  std::array<uint64_t, Pool::kPages> pending_for{};  // admission the Host may be writing it for
  std::array<uint64_t, Pool::kPages> content{};      // the bytes it must hold (unless pending)
  std::vector<uint32_t> free;                        // host_refs, server_uses, pending all 0

  bool IsFree(uint32_t p) const {
    return host_refs[p] == 0 && server_uses[p] == 0 && pending_for[p] == 0;
  }
};

}  // namespace tier::simulation
