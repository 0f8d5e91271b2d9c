// GPU tests: the CUDA path's bytes against the CPU path's for the same random inputs. Compiled in
// every build; each test skips with "no CUDA device present: <why>" where there is none.
#include <gtest/gtest.h>

#include <random>

#include "test_support.h"
#include "tier/device/host_arena.h"

namespace tier::device::testing {
namespace {

class GpuParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<TransferEngine>> cuda =
        make_cuda_transfer_engine({.device = 0, .staging_bytes = 1 << 20});
    if (!cuda.ok() && cuda.status().code() == StatusCode::kUnavailable) {
      GTEST_SKIP() << skip_message(cuda.status());
    }
    ASSERT_TRUE(cuda.ok()) << cuda.status().to_string();
    cuda_ = std::move(cuda).value();
    auto cpu = make_cpu_transfer_engine({});
    ASSERT_TRUE(cpu.ok());
    cpu_ = std::move(cpu).value();
    std::printf("[   INFO   ] CUDA engine: %s (kernels for %s)\n", cuda_->description().c_str(),
                cuda_architectures());
  }

  // Gather and scatter the same random checkpoint on both paths; segments and pools must match.
  void compare(const PoolLayout& layout, std::uint64_t seed) {
    Result<DevicePool> gpu_pool = cuda_->allocate_pool(layout);
    Result<DevicePool> cpu_pool = cpu_->allocate_pool(layout);
    ASSERT_TRUE(gpu_pool.ok()) << gpu_pool.status().to_string();
    ASSERT_TRUE(cpu_pool.ok());
    const PoolMirror mirror = random_mirror(layout, seed);
    upload(*cuda_, *gpu_pool, mirror);
    upload(*cpu_, *cpu_pool, mirror);
    std::mt19937_64 rng(seed);
    const std::uint32_t pages = layout.page_count();
    const std::uint32_t count = 1 + static_cast<std::uint32_t>(rng() % (pages - 1));
    const std::vector<std::uint32_t> table = random_table(pages, count, rng);
    const std::vector<std::uint32_t> targets = random_table(pages, count, rng);

    // GPU segments live in pinned memory from the engine's arena, as in the server.
    auto arena = HostArena::create({.capacity_bytes = 1ull << 32, .chunk_bytes = 64ull << 20},
                                   cuda_->host_allocator());
    ASSERT_TRUE(arena.ok()) << arena.status().to_string();
    ASSERT_TRUE((*arena)->pinned());
    for (std::uint32_t l = 0; l < layout.layer_count(); ++l) {
      const std::uint64_t bytes = layout.segment_bytes(l, count);
      Result<HostExtent> pinned = (*arena)->allocate(bytes);
      ASSERT_TRUE(pinned.ok()) << pinned.status().to_string();
      std::span<std::byte> gpu_seg(pinned->data, bytes);
      std::vector<std::byte> cpu_seg(bytes);
      Result<Transfer> g = cuda_->gather(layout, gpu_pool->view, l, table, gpu_seg);
      Result<Transfer> c = cpu_->gather(layout, cpu_pool->view, l, table, cpu_seg);
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      ASSERT_TRUE(c.ok());
      ASSERT_TRUE(g->wait().ok()) << g->wait().to_string();
      ASSERT_TRUE(c->wait().ok());
      ASSERT_EQ(std::memcmp(gpu_seg.data(), cpu_seg.data(), bytes), 0) << "layer " << l;
      // Scatter the CPU's segment on both paths.
      g = cuda_->scatter(layout, gpu_pool->view, l, cpu_seg, targets);
      c = cpu_->scatter(layout, cpu_pool->view, l, cpu_seg, targets);
      ASSERT_TRUE(g.ok()) << g.status().to_string();
      ASSERT_TRUE(c.ok());
      ASSERT_TRUE(g->wait().ok());
      ASSERT_TRUE(c->wait().ok());
      ASSERT_TRUE((*arena)->release(*pinned).ok());
    }
    EXPECT_EQ(download(*cuda_, *gpu_pool), download(*cpu_, *cpu_pool));
  }

  std::unique_ptr<TransferEngine> cuda_;
  std::unique_ptr<TransferEngine> cpu_;
};

TEST_F(GpuParityTest, SmallLayoutsMatchCpuBytes) {
  int seed = 1;
  for (const NamedLayout& named : test_layouts()) {
    SCOPED_TRACE(named.name);
    compare(named.layout, seed++);
    if (HasFatalFailure()) return;
  }
}

TEST_F(GpuParityTest, NinferInt8LayersMatchCpuBytes) {
  // Real NInfer page geometry (135,168 bytes per layer page), 2 layers + MTP, 300 pages;
  // 1 MiB staging forces many stages.
  Result<PoolLayout> layout = make_ninfer_layout(
      {.layers = 2, .dtype = KvDtype::kInt8G64, .page_count = 300, .mtp_layer = true});
  ASSERT_TRUE(layout.ok());
  compare(*layout, 77);
}

TEST_F(GpuParityTest, NinferBf16MatchesCpuBytes) {
  Result<PoolLayout> layout =
      make_ninfer_layout({.layers = 2, .dtype = KvDtype::kBf16, .page_count = 100});
  ASSERT_TRUE(layout.ok());
  compare(*layout, 78);
}

TEST_F(GpuParityTest, ErrorsMatchCpu) {
  Result<PoolLayout> layout = make_ninfer_layout({.layers = 1, .page_count = 8});
  ASSERT_TRUE(layout.ok());
  Result<DevicePool> gpu_pool = cuda_->allocate_pool(*layout);
  Result<DevicePool> cpu_pool = cpu_->allocate_pool(*layout);
  ASSERT_TRUE(gpu_pool.ok() && cpu_pool.ok());
  const std::vector<std::uint32_t> table = {1, 8};
  std::vector<std::byte> seg(layout->segment_bytes(0, 2));
  Result<Transfer> g = cuda_->gather(*layout, gpu_pool->view, 0, table, seg);
  Result<Transfer> c = cpu_->gather(*layout, cpu_pool->view, 0, table, seg);
  ASSERT_FALSE(g.ok());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(g.status().to_string(), c.status().to_string());
}

TEST_F(GpuParityTest, StagingTooSmallIsRefused) {
  auto tiny = make_cuda_transfer_engine({.device = 0, .staging_bytes = 4096});
  ASSERT_TRUE(tiny.ok()) << tiny.status().to_string();
  Result<PoolLayout> layout = make_ninfer_layout({.layers = 1, .page_count = 4});
  ASSERT_TRUE(layout.ok());
  Result<DevicePool> pool = (*tiny)->allocate_pool(*layout);
  ASSERT_TRUE(pool.ok());
  std::vector<std::byte> seg(layout->segment_bytes(0, 1));
  Result<Transfer> t = (*tiny)->gather(*layout, pool->view, 0, std::vector<std::uint32_t>{0}, seg);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace tier::device::testing
