// GPU tests: the CUDA path's bytes against the CPU path's for the same random inputs. Compiled in
// every build; each test skips with "no CUDA device present: <why>" where there is none.
#include <gtest/gtest.h>

#include <random>

#include "test_support.h"
#include "tier/device/host_arena.h"

namespace tier::device::test {
namespace {

class GpuParity : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<TransferEngine>> cuda =
        MakeCudaTransferEngine({.device = 0, .staging_bytes = 1 << 20});
    if (!cuda.ok() && cuda.status().code() == TIER_UNSUPPORTED) {
      GTEST_SKIP() << SkipMessage(cuda.status());
    }
    ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
    cuda_ = std::move(cuda).value();
    auto cpu = MakeCpuTransferEngine({});
    ASSERT_TRUE(cpu.ok());
    cpu_ = std::move(cpu).value();
    std::printf("[   INFO   ] CUDA engine: %s (kernels for %s)\n", cuda_->description().c_str(),
                CudaArchitectures());
  }

  // Gather and scatter the same random checkpoint on both paths; segments and pools must match.
  void compare(const PoolLayout& layout, std::uint64_t seed) {
    Result<DevicePool> gpu_pool = cuda_->AllocatePool(layout);
    Result<DevicePool> cpu_pool = cpu_->AllocatePool(layout);
    ASSERT_TRUE(gpu_pool.ok()) << gpu_pool.status().ToString();
    ASSERT_TRUE(cpu_pool.ok());
    const PoolMirror mirror = RandomMirror(layout, seed);
    Upload(*cuda_, *gpu_pool, mirror);
    Upload(*cpu_, *cpu_pool, mirror);
    std::mt19937_64 rng(seed);
    const std::uint32_t pages = layout.page_count();
    const std::uint32_t count = 1 + static_cast<std::uint32_t>(rng() % (pages - 1));
    const std::vector<std::uint32_t> table = RandomTable(pages, count, rng);
    const std::vector<std::uint32_t> targets = RandomTable(pages, count, rng);

    // GPU segments live in pinned memory from the engine's arena, as in the server.
    auto arena = HostArena::Create({.capacity_bytes = 1ull << 32, .chunk_bytes = 64ull << 20},
                                   cuda_->host_allocator());
    ASSERT_TRUE(arena.ok()) << arena.status().ToString();
    ASSERT_TRUE((*arena)->pinned());
    for (std::uint32_t l = 0; l < layout.layer_count(); ++l) {
      const std::uint64_t bytes = layout.segment_bytes(l, count);
      Result<HostExtent> pinned = (*arena)->Allocate(bytes);
      ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
      std::span<std::byte> gpu_seg(pinned->data, bytes);
      std::vector<std::byte> cpu_seg(bytes);
      Result<Transfer> g = cuda_->Gather(layout, gpu_pool->view, l, table, gpu_seg);
      Result<Transfer> c = cpu_->Gather(layout, cpu_pool->view, l, table, cpu_seg);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      ASSERT_TRUE(c.ok());
      ASSERT_TRUE(g->Wait().ok()) << g->Wait().ToString();
      ASSERT_TRUE(c->Wait().ok());
      ASSERT_EQ(std::memcmp(gpu_seg.data(), cpu_seg.data(), bytes), 0) << "layer " << l;
      // Scatter the CPU's segment on both paths.
      g = cuda_->Scatter(layout, gpu_pool->view, l, cpu_seg, targets);
      c = cpu_->Scatter(layout, cpu_pool->view, l, cpu_seg, targets);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      ASSERT_TRUE(c.ok());
      ASSERT_TRUE(g->Wait().ok());
      ASSERT_TRUE(c->Wait().ok());
      ASSERT_TRUE((*arena)->Release(*pinned).ok());
    }
    EXPECT_EQ(Download(*cuda_, *gpu_pool), Download(*cpu_, *cpu_pool));
  }

  std::unique_ptr<TransferEngine> cuda_;
  std::unique_ptr<TransferEngine> cpu_;
};

TEST_F(GpuParity, SmallLayoutsMatchCpuBytes) {
  int seed = 1;
  for (const NamedLayout& named : TestLayouts()) {
    SCOPED_TRACE(named.name);
    compare(named.layout, seed++);
    if (HasFatalFailure()) return;
  }
}

TEST_F(GpuParity, NinferInt8LayersMatchCpuBytes) {
  // Real NInfer page geometry (135,168 bytes per layer page), 2 layers + MTP, 300 pages;
  // 1 MiB staging forces many stages.
  Result<PoolLayout> layout = MakeNinferLayout(
      {.layers = 2, .dtype = KvDtype::kInt8G64, .page_count = 300, .mtp_layer = true});
  ASSERT_TRUE(layout.ok());
  compare(*layout, 77);
}

TEST_F(GpuParity, NinferBf16MatchesCpuBytes) {
  Result<PoolLayout> layout =
      MakeNinferLayout({.layers = 2, .dtype = KvDtype::kBf16, .page_count = 100});
  ASSERT_TRUE(layout.ok());
  compare(*layout, 78);
}

TEST_F(GpuParity, ErrorsMatchCpu) {
  Result<PoolLayout> layout = MakeNinferLayout({.layers = 1, .page_count = 8});
  ASSERT_TRUE(layout.ok());
  Result<DevicePool> gpu_pool = cuda_->AllocatePool(*layout);
  Result<DevicePool> cpu_pool = cpu_->AllocatePool(*layout);
  ASSERT_TRUE(gpu_pool.ok() && cpu_pool.ok());
  const std::vector<std::uint32_t> table = {1, 8};
  std::vector<std::byte> seg(layout->segment_bytes(0, 2));
  Result<Transfer> g = cuda_->Gather(*layout, gpu_pool->view, 0, table, seg);
  Result<Transfer> c = cpu_->Gather(*layout, cpu_pool->view, 0, table, seg);
  ASSERT_FALSE(g.ok());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(g.status().ToString(), c.status().ToString());
}

TEST_F(GpuParity, StagingTooSmallIsRefused) {
  auto tiny = MakeCudaTransferEngine({.device = 0, .staging_bytes = 4096});
  ASSERT_TRUE(tiny.ok()) << tiny.status().ToString();
  Result<PoolLayout> layout = MakeNinferLayout({.layers = 1, .page_count = 4});
  ASSERT_TRUE(layout.ok());
  Result<DevicePool> pool = (*tiny)->AllocatePool(*layout);
  ASSERT_TRUE(pool.ok());
  std::vector<std::byte> seg(layout->segment_bytes(0, 1));
  Result<Transfer> t = (*tiny)->Gather(*layout, pool->view, 0, std::vector<std::uint32_t>{0}, seg);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), TIER_NO_SPACE);
}

}  // namespace
}  // namespace tier::device::test
