// GPU tests of what only a device shows (issue 27). Built where CUDA is compiled in; each test
// skips with "no CUDA device present: ..." where there is none. Bytes are checked against the CPU
// engine on the same inputs (never CUDA against itself: a symmetric gather/scatter bug would pass
// that). Lines "[  METRIC  ] name value unit" are what tests/gpu/device-check.sh tabulates.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "gpu_test_kernels.h"
#include "test_support.h"
#include "tier/device/engine_select.h"
#include "tier/device/host_arena.h"

namespace tier::device::test {
namespace {

std::uint64_t EnvOr(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

void Metric(const char* name, double value, const char* unit) {
  std::printf("[  METRIC  ] %s %.3f %s\n", name, value, unit);
  std::fflush(stdout);
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A fast deterministic fill (splitmix64 per 8 bytes) of host memory: page p's bytes depend on p.
void FillPattern(std::byte* data, std::uint64_t bytes, std::uint64_t seed) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  std::uint64_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    x += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(data + i, &z, 8);
  }
  for (; i < bytes; ++i) data[i] = static_cast<std::byte>(x >> (i % 8));
}

class GpuDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cuda = MakeCudaTransferEngine({});
    if (!cuda.ok() && cuda.status().code() == TIER_UNSUPPORTED) {
      GTEST_SKIP() << SkipMessage(cuda.status());
    }
    ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
    cuda_ = std::move(cuda).value();
    auto cpu = MakeCpuTransferEngine({});
    ASSERT_TRUE(cpu.ok());
    cpu_ = std::move(cpu).value();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  }

  // The same pool on both engines: the CPU pool filled with the pattern, copied to the GPU's.
  void MakePools(const PoolLayout& layout, std::uint64_t seed) {
    auto gpu = cuda_->AllocatePool(layout);
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    auto cpu = cpu_->AllocatePool(layout);
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    gpu_pool_ = std::move(gpu).value();
    cpu_pool_ = std::move(cpu).value();
    for (std::uint32_t l = 0; l < layout.layer_count(); ++l) {
      for (std::uint32_t q = 0; q < layout.plane_count(l); ++q) {
        const std::uint64_t bytes = layout.plane_pool_bytes(l, q);
        FillPattern(cpu_pool_.view.plane_base[l][q], bytes, seed * 1000 + l * 10 + q);
        auto up = cuda_->CopyToDevice(gpu_pool_.view.plane_base[l][q],
                                      cpu_pool_.view.plane_base[l][q], bytes);
        ASSERT_TRUE(up.ok()) << up.status().ToString();
        ASSERT_TRUE(up->Wait().ok());
      }
    }
  }

  std::unique_ptr<HostArena> PinnedArena(std::uint64_t bytes) {
    auto arena = HostArena::Create(
        {.capacity_bytes = (bytes + 4095) / 4096 * 4096 + (64ull << 20), .chunk_bytes = 1ull << 30},
        cuda_->host_allocator());
    EXPECT_TRUE(arena.ok()) << arena.status().ToString();
    return arena.ok() ? std::move(arena).value() : nullptr;
  }

  std::unique_ptr<TransferEngine> cuda_, cpu_;
  DevicePool gpu_pool_, cpu_pool_;
};

// Defect 1 on the device: a producer kernel on the server's stream spins, then writes a pattern.
// A gather ordered after that stream (OrderAfter) sees the pattern; the negative control, not
// ordered, runs while the producer spins and sees the old bytes. Also measured: how long Gather()
// blocks its submitting thread while a compute kernel keeps every SM busy.
TEST_F(GpuDevice, GatherOrderedAfterTheServersStreamSeesTheProducersBytes) {
  PoolLayout layout(16, 16, {LayerSpec{"l", {{"k", 65536, 2}, {"s", 2048, 2}}}});
  MakePools(layout, 1);
  cudaStream_t server = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&server, cudaStreamNonBlocking), cudaSuccess);
  const std::vector<std::uint32_t> table{3, 7};
  auto arena = PinnedArena(layout.segment_bytes(0, 2));
  ASSERT_NE(arena, nullptr);
  auto seg = arena->Allocate(layout.segment_bytes(0, 2));
  ASSERT_TRUE(seg.ok());
  std::span<std::byte> segment(seg->data, seg->bytes);
  for (const bool ordered : {true, false}) {
    SCOPED_TRACE(ordered ? "ordered" : "not ordered (negative control)");
    ASSERT_EQ(cudaMemset(gpu_pool_.view.plane_base[0][0], 0x11, layout.plane_pool_bytes(0, 0)),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(LaunchSpinThenFill(gpu_pool_.view.plane_base[0][0], layout.plane_pool_bytes(0, 0),
                                 0xAB, 300ull * 1000 * 1000, server),
              0);
    if (ordered) {
      ASSERT_TRUE(cuda_->OrderAfter(server).ok());
    }
    auto g = cuda_->Gather(layout, gpu_pool_.view, 0, table, segment);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_TRUE(g->Wait().ok());
    const std::byte expect = ordered ? std::byte{0xAB} : std::byte{0x11};
    const std::uint64_t k_bytes = 2 * 65536;
    EXPECT_TRUE(std::all_of(segment.begin(), segment.begin() + k_bytes,
                            [&](std::byte b) { return b == expect; }));
    ASSERT_EQ(cudaStreamSynchronize(server), cudaSuccess);
  }
  // A compute kernel on every SM: the submit must not wait for it.
  ASSERT_EQ(LaunchBusyKernel(500ull * 1000 * 1000, server), 0);
  const auto start = std::chrono::steady_clock::now();
  auto g = cuda_->Gather(layout, gpu_pool_.view, 0, table, segment);
  const double submit_s = SecondsSince(start);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(g->Wait().ok());
  Metric("gather_submit_blocks_ms_during_compute", submit_s * 1e3, "ms");
  EXPECT_LT(submit_s, 0.25) << "Gather() waited for the server's compute kernel";
  ASSERT_EQ(cudaStreamSynchronize(server), cudaSuccess);
  ASSERT_TRUE(arena->Release(*seg).ok());
  ASSERT_EQ(cudaStreamDestroy(server), cudaSuccess);
}

// Submits from several threads at once (seals on d2h, restores on h2d): every byte as the CPU's.
TEST_F(GpuDevice, SubmitsFromSeveralThreadsMatchTheCpu) {
  Result<PoolLayout> layout = MakeNinferLayout({.layers = 4, .page_count = 256});
  ASSERT_TRUE(layout.ok());
  MakePools(*layout, 2);
  std::mt19937_64 rng(5);
  const std::vector<std::uint32_t> table = RandomTable(256, 100, rng);
  const std::vector<std::uint32_t> targets = RandomTable(256, 100, rng);
  auto arena = PinnedArena(layout->checkpoint_bytes(100) * 2);
  ASSERT_NE(arena, nullptr);
  std::vector<HostExtent> gpu_segments;
  for (std::uint32_t l = 0; l < 4; ++l) {
    auto e = arena->Allocate(layout->segment_bytes(l, 100));
    ASSERT_TRUE(e.ok());
    gpu_segments.push_back(*e);
  }
  std::vector<Status> results(4);
  std::vector<std::thread> threads;
  for (std::uint32_t l = 0; l < 4; ++l) {
    threads.emplace_back([&, l] {
      for (int round = 0; round < 4 && results[l].ok(); ++round) {
        std::span<std::byte> seg(gpu_segments[l].data, gpu_segments[l].bytes);
        auto g = cuda_->Gather(*layout, gpu_pool_.view, l, table, seg);
        if (!g.ok()) {
          results[l] = g.status();
          break;
        }
        results[l] = g->Wait();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (std::uint32_t l = 0; l < 4; ++l) {
    ASSERT_TRUE(results[l].ok()) << results[l].ToString();
    std::vector<std::byte> cpu_seg(layout->segment_bytes(l, 100));
    auto c = cpu_->Gather(*layout, cpu_pool_.view, l, table, cpu_seg);
    ASSERT_TRUE(c.ok() && c->Wait().ok());
    EXPECT_EQ(std::memcmp(cpu_seg.data(), gpu_segments[l].data, cpu_seg.size()), 0)
        << "layer " << l;
  }
  // Scatters from four threads into other pages, then one gather of those pages per layer.
  threads.clear();
  for (std::uint32_t l = 0; l < 4; ++l) {
    threads.emplace_back([&, l] {
      std::span<const std::byte> seg(gpu_segments[l].data, gpu_segments[l].bytes);
      auto s = cuda_->Scatter(*layout, gpu_pool_.view, l, seg, targets);
      results[l] = s.ok() ? s->Wait() : s.status();
    });
  }
  for (auto& t : threads) t.join();
  for (std::uint32_t l = 0; l < 4; ++l) {
    ASSERT_TRUE(results[l].ok()) << results[l].ToString();
    std::vector<std::byte> back(layout->segment_bytes(l, 100));
    auto g = cuda_->Gather(*layout, gpu_pool_.view, l, targets, back);
    ASSERT_TRUE(g.ok() && g->Wait().ok());
    EXPECT_EQ(std::memcmp(back.data(), gpu_segments[l].data, back.size()), 0) << "layer " << l;
  }
  for (const HostExtent& e : gpu_segments) ASSERT_TRUE(arena->Release(e).ok());
}

// A 100k-token INT8-G64 checkpoint (TIER_GPU_TEST_TOKENS), all 16 layers queued before any wait,
// gathered into pinned segments and compared with the CPU engine's segment by segment; then
// scattered into other pages (all queued) and gathered again. The restore's latency is measured.
TEST_F(GpuDevice, Checkpoint100kAllLayersQueuedMatchesTheCpuSegmentBySegment) {
  const std::uint64_t tokens = EnvOr("TIER_GPU_TEST_TOKENS", 100000);
  const auto pages = static_cast<std::uint32_t>((tokens + 63) / 64);
  Result<PoolLayout> layout =
      MakeNinferLayout({.layers = 16, .page_count = pages * 2 + 8, .mtp_layer = true});
  ASSERT_TRUE(layout.ok());
  MakePools(*layout, 3);
  std::mt19937_64 rng(9);
  const std::vector<std::uint32_t> table = RandomTable(layout->page_count(), pages, rng);
  const std::vector<std::uint32_t> targets = RandomTable(layout->page_count(), pages, rng);
  auto arena = PinnedArena(layout->checkpoint_bytes(pages));
  ASSERT_NE(arena, nullptr);
  std::vector<HostExtent> segs;
  std::vector<Transfer> gpu, cpu;
  std::vector<std::vector<std::byte>> cpu_segs;
  for (std::uint32_t l = 0; l < layout->layer_count(); ++l) {
    auto e = arena->Allocate(layout->segment_bytes(l, pages));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    segs.push_back(*e);
    cpu_segs.emplace_back(layout->segment_bytes(l, pages));
  }
  for (std::uint32_t l = 0; l < layout->layer_count(); ++l) {
    auto g = cuda_->Gather(*layout, gpu_pool_.view, l, table, {segs[l].data, segs[l].bytes});
    auto c = cpu_->Gather(*layout, cpu_pool_.view, l, table, cpu_segs[l]);
    ASSERT_TRUE(g.ok() && c.ok());
    gpu.push_back(*g);
    cpu.push_back(*c);
  }
  for (std::uint32_t l = 0; l < layout->layer_count(); ++l) {
    ASSERT_TRUE(gpu[l].Wait().ok());
    ASSERT_TRUE(cpu[l].Wait().ok());
    ASSERT_EQ(std::memcmp(segs[l].data, cpu_segs[l].data(), cpu_segs[l].size()), 0)
        << "layer " << l << " differs from the CPU engine's segment";
  }
  gpu.clear();
  const auto start = std::chrono::steady_clock::now();
  for (std::uint32_t l = 0; l < layout->layer_count(); ++l) {
    auto s = cuda_->Scatter(*layout, gpu_pool_.view, l, {segs[l].data, segs[l].bytes}, targets);
    ASSERT_TRUE(s.ok());
    gpu.push_back(*s);
  }
  for (const Transfer& t : gpu) ASSERT_TRUE(t.Wait().ok());
  Metric("restore_host_to_device_ms_100k", SecondsSince(start) * 1e3, "ms");
  for (std::uint32_t l = 0; l < layout->layer_count(); ++l) {
    std::vector<std::byte> back(cpu_segs[l].size());
    auto g = cuda_->Gather(*layout, gpu_pool_.view, l, targets, back);
    ASSERT_TRUE(g.ok() && g->Wait().ok());
    ASSERT_EQ(std::memcmp(back.data(), cpu_segs[l].data(), back.size()), 0) << "layer " << l;
  }
  for (const HostExtent& e : segs) ASSERT_TRUE(arena->Release(e).ok());
}

// A plane above 4 GiB (page offsets past 2^32 bytes): pages on both sides of the boundary gather
// as on the CPU.
TEST_F(GpuDevice, PlaneAbove4GiBMatchesTheCpu) {
  const std::uint32_t page_count = 66560;  // 66560 x 64 KiB = 4.06 GiB
  PoolLayout layout(page_count, 64, {LayerSpec{"big", {{"k", 65536, 2}, {"s", 2048, 2}}}});
  MakePools(layout, 4);
  const std::vector<std::uint32_t> table{0, 65535, 65536, 65537, page_count - 1, 12345};
  auto arena = PinnedArena(layout.segment_bytes(0, table.size()));
  ASSERT_NE(arena, nullptr);
  auto seg = arena->Allocate(layout.segment_bytes(0, table.size()));
  ASSERT_TRUE(seg.ok());
  std::vector<std::byte> cpu_seg(seg->bytes);
  auto g = cuda_->Gather(layout, gpu_pool_.view, 0, table, {seg->data, seg->bytes});
  auto c = cpu_->Gather(layout, cpu_pool_.view, 0, table, cpu_seg);
  ASSERT_TRUE(g.ok() && c.ok());
  ASSERT_TRUE(g->Wait().ok() && c->Wait().ok());
  EXPECT_EQ(std::memcmp(seg->data, cpu_seg.data(), cpu_seg.size()), 0);
  ASSERT_TRUE(arena->Release(*seg).ok());
}

// Defect 2 on the device: with the HBM filled, auto must not hand out the CPU engine (it would
// memcpy from device pointers), and device allocations say NO_SPACE.
TEST_F(GpuDevice, FullHbmIsNoSpaceAndAutoDoesNotFallBackToTheCpu) {
  std::vector<void*> hogs;
  for (std::uint64_t chunk = 1ull << 30; chunk >= (16ull << 20);) {
    void* p = nullptr;
    if (cudaMalloc(&p, chunk) == cudaSuccess) {
      hogs.push_back(p);
    } else {
      (void)cudaGetLastError();
      chunk /= 2;
    }
  }
  auto more = cuda_->AllocateDevice(64ull << 20);
  EXPECT_EQ(more.status().code(), TIER_NO_SPACE) << more.status().ToString();
  EngineSelection s = SelectTransferEngine();
  EXPECT_NE(s.path, kDevicePathCpu)
      << "auto fell back to the CPU with the device full: " << s.reason;
  if (s.engine == nullptr) {
    EXPECT_FALSE(s.status.ok());
    std::printf("[   INFO   ] auto with the HBM full: %s\n", s.status.ToString().c_str());
  }
  s.engine.reset();
  for (void* p : hogs) ASSERT_EQ(cudaFree(p), cudaSuccess);
}

// Defect 3's cost at a server's size (TIER_GPU_TEST_PIN_GIB, default 16): pinning the Host
// tier's bound as the Host does at Open (one chunk, halving on refusal).
TEST_F(GpuDevice, PinningCostAtTheServersSize) {
  const std::uint64_t bytes = EnvOr("TIER_GPU_TEST_PIN_GIB", 16) << 30;
  const auto start = std::chrono::steady_clock::now();
  auto arena = HostArena::Create({.capacity_bytes = bytes,
                                  .chunk_bytes = bytes,
                                  .reserve_bytes = bytes,
                                  .min_reserve_chunk_bytes = 256ull << 20,
                                  .grow = false},
                                 cuda_->host_allocator());
  const double s = SecondsSince(start);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  Metric("pinned_gib", static_cast<double>((*arena)->allocated_bytes()) / (1ull << 30), "GiB");
  Metric("pin_seconds", s, "s");
  EXPECT_GT((*arena)->allocated_bytes(), 0u);
}

}  // namespace
}  // namespace tier::device::test
