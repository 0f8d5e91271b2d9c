// Asynchronous copies, completion, ordering and bounds, on every engine.
#include <gtest/gtest.h>

#include <vector>

#include "test_support.h"

namespace tier::device::testing {
namespace {

class TransferTest : public ::testing::TestWithParam<EngineKind> {};

TEST_P(TransferTest, CopiesRoundTripInStreamOrder) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, GetParam());
  constexpr std::uint64_t kBytes = (3 << 20) + 5;
  const std::vector<std::byte> src = random_bytes(kBytes, 42);
  std::vector<std::byte> back(kBytes);
  Result<DeviceBuffer> dev = engine->allocate_device(kBytes);
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  EXPECT_EQ(dev->bytes(), kBytes);
  // No wait between the two: the second runs after the first because they share the stream.
  Result<Transfer> up = engine->copy_to_device(dev->data(), src.data(), kBytes);
  ASSERT_TRUE(up.ok()) << up.status().to_string();
  Result<Transfer> down = engine->copy_to_host(back.data(), dev->data(), kBytes);
  ASSERT_TRUE(down.ok()) << down.status().to_string();
  EXPECT_EQ(down->bytes(), kBytes);
  ASSERT_TRUE(down->wait().ok());
  EXPECT_TRUE(down->is_done());
  EXPECT_TRUE(up->is_done());
  EXPECT_TRUE(down->wait().ok());  // waiting twice is fine
  EXPECT_EQ(back, src);
}

TEST_P(TransferTest, ManyQueuedTransfersAllComplete) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, GetParam());
  constexpr int kCopies = 600;  // more than the CPU engine's default queue bound
  constexpr std::uint64_t kBytes = 4096;
  const std::vector<std::byte> src = random_bytes(kBytes * kCopies, 9);
  std::vector<std::byte> back(kBytes * kCopies);
  Result<DeviceBuffer> dev = engine->allocate_device(kBytes * kCopies);
  ASSERT_TRUE(dev.ok());
  std::vector<Transfer> transfers;
  for (int i = 0; i < kCopies; ++i) {
    Result<Transfer> t =
        engine->copy_to_device(dev->data() + i * kBytes, src.data() + i * kBytes, kBytes);
    ASSERT_TRUE(t.ok());
    transfers.push_back(*t);
  }
  for (int i = 0; i < kCopies; ++i) {
    Result<Transfer> t =
        engine->copy_to_host(back.data() + i * kBytes, dev->data() + i * kBytes, kBytes);
    ASSERT_TRUE(t.ok());
    transfers.push_back(*t);
  }
  ASSERT_TRUE(engine->synchronize().ok());
  for (const Transfer& t : transfers) EXPECT_TRUE(t.is_done());
  EXPECT_EQ(back, src);
}

TEST_P(TransferTest, EmptyAndInvalidCopies) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, GetParam());
  Result<Transfer> empty = engine->copy_to_host(nullptr, nullptr, 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->is_done());
  EXPECT_EQ(empty->bytes(), 0u);
  std::vector<std::byte> host(16);
  EXPECT_EQ(engine->copy_to_device(nullptr, host.data(), 16).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->allocate_device(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Transfer().wait().ok());
  EXPECT_TRUE(Transfer().is_done());
}

TEST_P(TransferTest, OrderingHooks) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, GetParam());
  // The legacy default stream (nullptr) is a valid producer.
  EXPECT_TRUE(engine->order_after(nullptr).ok());
  std::vector<std::byte> src = random_bytes(1 << 16, 1), back(1 << 16);
  Result<DeviceBuffer> dev = engine->allocate_device(src.size());
  ASSERT_TRUE(dev.ok());
  Result<Transfer> up = engine->copy_to_device(dev->data(), src.data(), src.size());
  ASSERT_TRUE(up.ok());
  // Work on the engine's own stream (or nothing on the CPU) may be ordered after the transfer.
  EXPECT_TRUE(up->make_stream_wait(engine->native_stream()).ok());
  Result<Transfer> down = engine->copy_to_host(back.data(), dev->data(), src.size());
  ASSERT_TRUE(down.ok());
  ASSERT_TRUE(down->wait().ok());
  EXPECT_EQ(back, src);
  EXPECT_STRNE(engine->path_name(), "");
  EXPECT_FALSE(engine->description().empty());
}

TEST(CpuTransferEngineTest, SmallQueueBoundStillCompletesEverything) {
  auto engine = make_cpu_transfer_engine({.worker_thread = true, .max_queued_transfers = 2});
  ASSERT_TRUE(engine.ok());
  std::vector<std::byte> src = random_bytes(1 << 20, 3), back(1 << 20);
  Result<DeviceBuffer> dev = (*engine)->allocate_device(src.size());
  ASSERT_TRUE(dev.ok());
  for (int i = 0; i < 64; ++i) {
    const std::uint64_t off = i * (src.size() / 64);
    ASSERT_TRUE(
        (*engine)->copy_to_device(dev->data() + off, src.data() + off, src.size() / 64).ok());
  }
  ASSERT_TRUE((*engine)->copy_to_host(back.data(), dev->data(), back.size()).ok());
  ASSERT_TRUE((*engine)->synchronize().ok());
  EXPECT_EQ(back, src);
  EXPECT_STREQ((*engine)->path_name(), "cpu");
  EXPECT_EQ((*engine)->native_stream(), nullptr);
  EXPECT_FALSE(make_cpu_transfer_engine({.max_queued_transfers = 0}).ok());
}

TEST(CpuTransferEngineTest, StagingTooSmallForOnePageIsRefused) {
  auto engine = make_cpu_transfer_engine({.staging_bytes = 100});
  ASSERT_TRUE(engine.ok());
  PoolLayout layout(4, 1, {LayerSpec{"l", {{"k", 64, 1}, {"v", 64, 1}}}});
  Result<DevicePool> pool = (*engine)->allocate_pool(layout);
  ASSERT_TRUE(pool.ok());
  std::vector<std::byte> seg(layout.segment_bytes(0, 1));
  Result<Transfer> t = (*engine)->gather(layout, pool->view, 0, std::vector<std::uint32_t>{1}, seg);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(t.status().message().find("cannot hold one page"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Cpu, TransferTest,
                         ::testing::Values(EngineKind::kCpuInline, EngineKind::kCpuWorker),
                         [](const auto& info) { return engine_kind_name(info.param); });
INSTANTIATE_TEST_SUITE_P(Gpu, TransferTest, ::testing::Values(EngineKind::kCuda),
                         [](const auto& info) { return engine_kind_name(info.param); });

}  // namespace
}  // namespace tier::device::testing
