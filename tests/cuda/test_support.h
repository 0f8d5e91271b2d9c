// test_support.h -- shared helpers of the tier_cuda tests: engines by kind, small layouts, random
// pools, an independent reference of the segment byte order, and the seams that show what runs
// after a caller has freed its buffers (a quarantining allocator, a slow worker).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <numeric>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tier/device/cpu_transfer_engine.h"
#include "tier/device/cuda_transfer_engine.h"
#include "tier/device/host_arena.h"
#include "tier/device/pool_layout.h"
#include "tier/device/transfer_engine.h"
#include "tier/status.h"

namespace tier::device::test {

enum class EngineKind { kCpuInline, kCpuWorker, kCpuStaged, kCuda, kCudaSmallStaging };

inline const char* EngineKindName(EngineKind kind) {
  switch (kind) {
    case EngineKind::kCpuInline:
      return "CpuInline";
    case EngineKind::kCpuWorker:
      return "CpuWorker";
    case EngineKind::kCpuStaged:
      return "CpuStaged";
    case EngineKind::kCuda:
      return "Cuda";
    case EngineKind::kCudaSmallStaging:
      return "CudaSmallStaging";
  }
  return "?";
}

// So that gtest prints "Cuda" rather than "4-byte object <04-00 00-00>".
inline void PrintTo(EngineKind kind, std::ostream* os) {
  *os << EngineKindName(kind);
}

// Staging small enough that every test layout needs several stages, and not a multiple of any
// layer page size, so stages end mid-table.
inline constexpr std::uint64_t kSmallStagingBytes = 3 * 8192 + 4096 + 48;

// The engine of `kind`, or a Status saying why there is none (UNSUPPORTED: no CUDA device).
inline Result<std::unique_ptr<TransferEngine>> MakeEngine(EngineKind kind) {
  switch (kind) {
    case EngineKind::kCpuInline:
      return MakeCpuTransferEngine({.worker_thread = false});
    case EngineKind::kCpuWorker:
      return MakeCpuTransferEngine({.worker_thread = true});
    case EngineKind::kCpuStaged:
      return MakeCpuTransferEngine({.worker_thread = true, .staging_bytes = kSmallStagingBytes});
    case EngineKind::kCuda:
      return MakeCudaTransferEngine({});
    case EngineKind::kCudaSmallStaging:
      return MakeCudaTransferEngine({.device = 0, .staging_bytes = kSmallStagingBytes});
  }
  return Status::Internal("unknown engine kind");
}

// The message a GPU test skips with: it always starts "no CUDA device present".
inline std::string SkipMessage(const Status& why) {
  const std::string prefix = "no CUDA device present";
  return why.message().rfind(prefix, 0) == 0 ? why.message() : prefix + ": " + why.message();
}

// Skips the calling test when the engine is a CUDA one and no device is present.
#define TIER_MAKE_ENGINE_OR_SKIP(var, kind)                              \
  std::unique_ptr<::tier::device::TransferEngine> var;                   \
  {                                                                      \
    auto made_ = ::tier::device::test::MakeEngine(kind);                 \
    if (!made_.ok() && made_.status().code() == TIER_UNSUPPORTED) {      \
      GTEST_SKIP() << ::tier::device::test::SkipMessage(made_.status()); \
    }                                                                    \
    ASSERT_TRUE(made_.ok()) << made_.status().ToString();                \
    var = std::move(made_).value();                                      \
  }

struct NamedLayout {
  std::string name;
  PoolLayout layout;
};

// Small versions of NInfer's layouts (so tests stay fast) plus odd ones for the byte path.
inline std::vector<NamedLayout> TestLayouts() {
  std::vector<NamedLayout> out;
  NinferLayoutSpec int8{.layers = 3,
                        .kv_heads = 2,
                        .head_dim = 128,
                        .tokens_per_page = 16,
                        .dtype = KvDtype::kInt8G64,
                        .page_count = 48};
  out.push_back({"Int8G64", MakeNinferLayout(int8).value()});
  NinferLayoutSpec bf16 = int8;
  bf16.dtype = KvDtype::kBf16;
  out.push_back({"Bf16", MakeNinferLayout(bf16).value()});
  NinferLayoutSpec mtp = int8;
  mtp.mtp_layer = true;
  mtp.scale_bytes = 4;
  out.push_back({"Int8G64Fp32ScalesMtp", MakeNinferLayout(mtp).value()});
  // Sizes that are not multiples of 16: the kernels' byte path and unaligned plane offsets.
  PoolLayout odd(37, 4,
                 {LayerSpec{"a", {{"x", 1000, 1}, {"y", 6, 2}, {"z", 4100, 4}}},
                  LayerSpec{"b", {{"x", 3, 1}}}});
  out.push_back({"OddSizes", odd});
  // More pages than one launch takes (kMaxPagesPerLaunch = 896): stages split by the page cap.
  PoolLayout tiny(2000, 1, {LayerSpec{"t", {{"k", 16, 2}, {"s", 4, 4}}}});
  out.push_back({"ManyTinyPages", tiny});
  return out;
}

inline std::vector<std::byte> RandomBytes(std::uint64_t bytes, std::uint64_t seed) {
  std::vector<std::byte> out(bytes);
  std::mt19937_64 rng(seed);
  std::uint64_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  for (; i < bytes; ++i) out[i] = static_cast<std::byte>(rng());
  return out;
}

// A host copy of every plane of a pool: mirror[layer][plane] = page_count * bytes_per_page bytes.
using PoolMirror = std::vector<std::vector<std::vector<std::byte>>>;

inline PoolMirror RandomMirror(const PoolLayout& layout, std::uint64_t seed) {
  PoolMirror m(layout.layer_count());
  for (std::uint32_t l = 0; l < layout.layer_count(); ++l) {
    for (std::uint32_t q = 0; q < layout.plane_count(l); ++q) {
      m[l].push_back(RandomBytes(layout.plane_pool_bytes(l, q), seed * 1000 + l * 10 + q));
    }
  }
  return m;
}

// Writes the mirror into the pool (device) and waits.
inline void Upload(TransferEngine& engine, const DevicePool& pool, const PoolMirror& m) {
  for (std::uint32_t l = 0; l < pool.layout.layer_count(); ++l) {
    for (std::uint32_t q = 0; q < pool.layout.plane_count(l); ++q) {
      auto t = engine.CopyToDevice(pool.view.plane_base[l][q], m[l][q].data(), m[l][q].size());
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      ASSERT_TRUE(t->Wait().ok());
    }
  }
}

// Reads the whole pool back.
inline PoolMirror Download(TransferEngine& engine, const DevicePool& pool) {
  PoolMirror m(pool.layout.layer_count());
  for (std::uint32_t l = 0; l < pool.layout.layer_count(); ++l) {
    for (std::uint32_t q = 0; q < pool.layout.plane_count(l); ++q) {
      m[l].emplace_back(pool.layout.plane_pool_bytes(l, q));
      auto t = engine.CopyToHost(m[l][q].data(), pool.view.plane_base[l][q], m[l][q].size());
      EXPECT_TRUE(t.ok()) << t.status().ToString();
      if (t.ok()) {
        EXPECT_TRUE(t->Wait().ok());
      }
    }
  }
  return m;
}

// The documented segment byte order, computed from a mirror without any library code:
// plane-major, pages in table order.
inline std::vector<std::byte> ExpectedSegment(const PoolLayout& layout, const PoolMirror& m,
                                              std::uint32_t layer,
                                              const std::vector<std::uint32_t>& table) {
  std::vector<std::byte> seg;
  for (std::uint32_t q = 0; q < layout.plane_count(layer); ++q) {
    const std::uint64_t bpp = layout.plane(layer, q).bytes_per_page;
    for (std::uint32_t id : table) {
      const std::byte* page = m[layer][q].data() + static_cast<std::uint64_t>(id) * bpp;
      seg.insert(seg.end(), page, page + bpp);
    }
  }
  return seg;
}

// Device memory for the CPU engine's test seam (CpuEngineOptions::device_allocator) that keeps
// what is freed: Deallocate() fills a block with kPoison and holds it until the allocator goes,
// so a write after the free shows as a changed byte. Refuses (NO_SPACE) every allocation after
// the first `allocations_allowed`. Thread-safe.
class QuarantineAllocator final : public HostAllocator {
 public:
  static constexpr std::byte kPoison{0xDD};

  explicit QuarantineAllocator(int allocations_allowed = 1 << 30)
      : allocations_left_(allocations_allowed) {}
  ~QuarantineAllocator() override {
    for (const auto& [data, bytes] : freed_) inner_->Deallocate(data, bytes);
  }
  const char* name() const override { return "quarantine"; }
  bool pinned() const override { return false; }
  Result<void*> Allocate(std::uint64_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (allocations_left_ == 0) {
      return Status::NoSpace("quarantine allocator: no room for " + std::to_string(bytes) +
                             " bytes (test bound)");
    }
    --allocations_left_;
    return inner_->Allocate(bytes);
  }
  void Deallocate(void* data, std::uint64_t bytes) override {
    std::memset(data, static_cast<int>(kPoison), bytes);
    std::lock_guard<std::mutex> lock(mu_);
    freed_.emplace_back(static_cast<std::byte*>(data), bytes);
  }

  // Blocks freed so far.
  std::size_t freed_blocks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return freed_.size();
  }
  // Bytes of freed blocks that no longer hold the poison: written after they were freed. Call it
  // once nothing runs any more (after Synchronize(), or with the engine gone).
  std::uint64_t BytesWrittenAfterFree() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::uint64_t written_bytes = 0;
    for (const auto& [data, bytes] : freed_) {
      written_bytes += static_cast<std::uint64_t>(
          std::count_if(data, data + bytes, [](std::byte b) { return b != kPoison; }));
    }
    return written_bytes;
  }

 private:
  const std::shared_ptr<HostAllocator> inner_ = MakeAlignedHostAllocator();
  mutable std::mutex mu_;
  int allocations_left_;
  std::vector<std::pair<std::byte*, std::uint64_t>> freed_;
};

// A CpuEngineOptions::before_transfer that makes the worker slow: every transfer starts
// `delay_ms` late, so a caller that returns without waiting is long gone when it runs.
inline std::function<void()> SlowWorker(int delay_ms = 30) {
  return [delay_ms] { std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms)); };
}

// `count` distinct page ids of [0, page_count) in random order.
inline std::vector<std::uint32_t> RandomTable(std::uint32_t page_count, std::uint32_t count,
                                              std::mt19937_64& rng) {
  std::vector<std::uint32_t> all(page_count);
  std::iota(all.begin(), all.end(), 0u);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(count);
  return all;
}

}  // namespace tier::device::test
