// Asynchronous copies, completion, ordering and bounds, on every engine; what a transfer's last
// handle does when it goes.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <vector>

#include "test_support.h"

namespace tier::device::test {
namespace {

class AsyncCopy : public ::testing::TestWithParam<EngineKind> {};

TEST_P(AsyncCopy, CopiesRoundTripInStreamOrder) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, GetParam());
  constexpr std::uint64_t kBytes = (3 << 20) + 5;
  const std::vector<std::byte> src = RandomBytes(kBytes, 42);
  std::vector<std::byte> back(kBytes);
  Result<DeviceBuffer> dev = engine->AllocateDevice(kBytes);
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(dev->bytes(), kBytes);
  // No wait between the two: the second runs after the first because they share the stream.
  Result<Transfer> up = engine->CopyToDevice(dev->data(), src.data(), kBytes);
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  Result<Transfer> down = engine->CopyToHost(back.data(), dev->data(), kBytes);
  ASSERT_TRUE(down.ok()) << down.status().ToString();
  EXPECT_EQ(down->bytes(), kBytes);
  ASSERT_TRUE(down->Wait().ok());
  EXPECT_TRUE(down->IsDone());
  EXPECT_TRUE(up->IsDone());
  EXPECT_TRUE(down->Wait().ok());  // waiting twice is fine
  EXPECT_EQ(back, src);
}

TEST_P(AsyncCopy, DeviceToDeviceCopiesInStreamOrder) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, GetParam());
  constexpr std::uint64_t kBytes = (1 << 20) + 3;
  const std::vector<std::byte> src = RandomBytes(kBytes, 7);
  std::vector<std::byte> back(kBytes);
  Result<DeviceBuffer> a = engine->AllocateDevice(kBytes);
  Result<DeviceBuffer> b = engine->AllocateDevice(kBytes);
  ASSERT_TRUE(a.ok() && b.ok());
  // Up, across, down: queued back to back, each after the one before.
  ASSERT_TRUE(engine->CopyToDevice(a->data(), src.data(), kBytes).ok());
  Result<Transfer> across = engine->CopyOnDevice(b->data(), a->data(), kBytes);
  ASSERT_TRUE(across.ok()) << across.status().ToString();
  EXPECT_EQ(across->bytes(), kBytes);
  Result<Transfer> down = engine->CopyToHost(back.data(), b->data(), kBytes);
  ASSERT_TRUE(down.ok() && down->Wait().ok());
  EXPECT_EQ(back, src);
  EXPECT_EQ(engine->CopyOnDevice(nullptr, a->data(), 16).status().code(), TIER_INVALID_ARGUMENT);
}

TEST_P(AsyncCopy, ManyQueuedTransfersAllComplete) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, GetParam());
  constexpr int kCopies = 600;  // more than the CPU engine's default queue bound
  constexpr std::uint64_t kBytes = 4096;
  const std::vector<std::byte> src = RandomBytes(kBytes * kCopies, 9);
  std::vector<std::byte> back(kBytes * kCopies);
  Result<DeviceBuffer> dev = engine->AllocateDevice(kBytes * kCopies);
  ASSERT_TRUE(dev.ok());
  std::vector<Transfer> transfers;
  for (int i = 0; i < kCopies; ++i) {
    Result<Transfer> t =
        engine->CopyToDevice(dev->data() + i * kBytes, src.data() + i * kBytes, kBytes);
    ASSERT_TRUE(t.ok());
    transfers.push_back(*t);
  }
  for (int i = 0; i < kCopies; ++i) {
    Result<Transfer> t =
        engine->CopyToHost(back.data() + i * kBytes, dev->data() + i * kBytes, kBytes);
    ASSERT_TRUE(t.ok());
    transfers.push_back(*t);
  }
  ASSERT_TRUE(engine->Synchronize().ok());
  for (const Transfer& t : transfers) EXPECT_TRUE(t.IsDone());
  EXPECT_EQ(back, src);
}

TEST_P(AsyncCopy, EmptyAndInvalidCopies) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, GetParam());
  Result<Transfer> empty = engine->CopyToHost(nullptr, nullptr, 0);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->IsDone());
  EXPECT_EQ(empty->bytes(), 0u);
  std::vector<std::byte> host(16);
  EXPECT_EQ(engine->CopyToDevice(nullptr, host.data(), 16).status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_EQ(engine->AllocateDevice(0).status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_TRUE(Transfer().Wait().ok());
  EXPECT_TRUE(Transfer().IsDone());
}

TEST_P(AsyncCopy, OrderingHooks) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, GetParam());
  // The legacy default stream (nullptr) is a valid producer.
  EXPECT_TRUE(engine->OrderAfter(nullptr).ok());
  std::vector<std::byte> src = RandomBytes(1 << 16, 1), back(1 << 16);
  Result<DeviceBuffer> dev = engine->AllocateDevice(src.size());
  ASSERT_TRUE(dev.ok());
  Result<Transfer> up = engine->CopyToDevice(dev->data(), src.data(), src.size());
  ASSERT_TRUE(up.ok());
  // Work on the engine's own stream (or nothing on the CPU) may be ordered after the transfer.
  EXPECT_TRUE(up->MakeStreamWait(engine->native_stream()).ok());
  Result<Transfer> down = engine->CopyToHost(back.data(), dev->data(), src.size());
  ASSERT_TRUE(down.ok());
  ASSERT_TRUE(down->Wait().ok());
  EXPECT_EQ(back, src);
  EXPECT_STRNE(engine->path_name(), "");
  EXPECT_FALSE(engine->description().empty());
}

TEST(CpuEngine, SmallQueueBoundStillCompletesEverything) {
  auto engine = MakeCpuTransferEngine({.worker_thread = true, .max_queued_transfers = 2});
  ASSERT_TRUE(engine.ok());
  std::vector<std::byte> src = RandomBytes(1 << 20, 3), back(1 << 20);
  Result<DeviceBuffer> dev = (*engine)->AllocateDevice(src.size());
  ASSERT_TRUE(dev.ok());
  std::vector<Transfer> queued;  // kept, so that submits run into the bound of 2
  for (int i = 0; i < 64; ++i) {
    const std::uint64_t off = i * (src.size() / 64);
    Result<Transfer> t =
        (*engine)->CopyToDevice(dev->data() + off, src.data() + off, src.size() / 64);
    ASSERT_TRUE(t.ok());
    queued.push_back(*t);
  }
  Result<Transfer> down = (*engine)->CopyToHost(back.data(), dev->data(), back.size());
  ASSERT_TRUE(down.ok());
  ASSERT_TRUE((*engine)->Synchronize().ok());
  EXPECT_EQ(back, src);
  EXPECT_STREQ((*engine)->path_name(), "cpu");
  EXPECT_EQ((*engine)->native_stream(), nullptr);
  EXPECT_FALSE(MakeCpuTransferEngine({.max_queued_transfers = 0}).ok());
}

TEST(CpuEngine, StagingTooSmallForOnePageIsRefused) {
  auto engine = MakeCpuTransferEngine({.staging_bytes = 100});
  ASSERT_TRUE(engine.ok());
  PoolLayout layout(4, 1, {LayerSpec{"l", {{"k", 64, 1}, {"v", 64, 1}}}});
  Result<DevicePool> pool = (*engine)->AllocatePool(layout);
  ASSERT_TRUE(pool.ok());
  std::vector<std::byte> seg(layout.segment_bytes(0, 1));
  Result<Transfer> t = (*engine)->Gather(layout, pool->view, 0, std::vector<std::uint32_t>{1}, seg);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), TIER_NO_SPACE);
  EXPECT_NE(t.status().message().find("cannot hold one page"), std::string::npos);
}

// The last handle of a transfer waits for it (transfer.h): a caller that drops its handles and
// then frees the buffers never frees memory under queued work. The worker starts every transfer
// late; the device memory is quarantined, so a write after its free would show.
TEST(TransferHandle, DroppedHandlesWaitBeforeTheBufferIsFreed) {
  auto quarantine = std::make_shared<QuarantineAllocator>();
  auto engine = MakeCpuTransferEngine(
      {.worker_thread = true, .device_allocator = quarantine, .before_transfer = SlowWorker()});
  ASSERT_TRUE(engine.ok());
  constexpr std::uint64_t kBytes = 1 << 16;
  const std::vector<std::byte> src = RandomBytes(kBytes, 21);
  {
    Result<DeviceBuffer> dev = (*engine)->AllocateDevice(kBytes);
    ASSERT_TRUE(dev.ok()) << dev.status().ToString();
    std::vector<Transfer> queued;  // declared after `dev`: released before it
    for (int i = 0; i < 3; ++i) {
      Result<Transfer> t = (*engine)->CopyToDevice(dev->data(), src.data(), kBytes);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      queued.push_back(*t);  // a copy: the Result's handle goes at the end of the iteration
    }
  }  // the handles go, then the buffer
  EXPECT_EQ(quarantine->freed_blocks(), 1u);
  ASSERT_TRUE((*engine)->Synchronize().ok());
  EXPECT_EQ(quarantine->BytesWrittenAfterFree(), 0u);
}

TEST(TransferHandle, AssigningOverAPendingTransferWaitsForIt) {
  auto quarantine = std::make_shared<QuarantineAllocator>();
  auto engine = MakeCpuTransferEngine(
      {.worker_thread = true, .device_allocator = quarantine, .before_transfer = SlowWorker()});
  ASSERT_TRUE(engine.ok());
  constexpr std::uint64_t kBytes = 1 << 16;
  const std::vector<std::byte> src = RandomBytes(kBytes, 22);
  std::vector<std::byte> back(kBytes);
  Result<DeviceBuffer> dev = (*engine)->AllocateDevice(kBytes);
  ASSERT_TRUE(dev.ok());
  Result<Transfer> up = (*engine)->CopyToDevice(dev->data(), src.data(), kBytes);
  ASSERT_TRUE(up.ok());
  Result<Transfer> down = (*engine)->CopyToHost(back.data(), dev->data(), kBytes);
  ASSERT_TRUE(down.ok());
  Transfer shared = *down;  // two handles of the download
  *down = Transfer();       // not the last one: the download may still be queued
  shared = Transfer();      // the last one: returns when the download is done
  EXPECT_EQ(back, src);     // so its bytes are there, without a Wait()
  EXPECT_TRUE(up->IsDone());
  dev->Reset();
  ASSERT_TRUE((*engine)->Synchronize().ok());
  EXPECT_EQ(quarantine->BytesWrittenAfterFree(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Cpu, AsyncCopy,
                         ::testing::Values(EngineKind::kCpuInline, EngineKind::kCpuWorker),
                         [](const auto& info) { return EngineKindName(info.param); });
INSTANTIATE_TEST_SUITE_P(Gpu, AsyncCopy, ::testing::Values(EngineKind::kCuda),
                         [](const auto& info) { return EngineKindName(info.param); });

// Holds the worker in before_transfer until opened, and says when it is held.
class HeldWorker {
 public:
  void Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    ++entered_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
  }
  void WaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return entered_ >= n; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int entered_ = 0;
  bool open_ = false;
};

// Issue 27, defect 5, as the CPU engine models it: with restores_first, a restore (host to
// device) queued behind seals (device to host) runs before them, as on the CUDA engine's higher
// priority stream; without it (the negative control) everything runs in submission order.
TEST(CpuEngine, RestoresFirstRunsAQueuedRestoreBeforeQueuedSeals) {
  for (const bool restores_first : {true, false}) {
    SCOPED_TRACE(restores_first ? "restores_first" : "submission order");
    auto held = std::make_shared<HeldWorker>();
    auto engine = MakeCpuTransferEngine(
        {.restores_first = restores_first, .before_transfer = [held] { held->Pass(); }});
    ASSERT_TRUE(engine.ok());
    auto device = (*engine)->AllocateDevice(4096);
    ASSERT_TRUE(device.ok());
    std::memset(device->data(), 0, 4096);
    std::vector<std::byte> first(4096), second(4096), restore(4096, std::byte{0xAB});
    auto seal0 = (*engine)->CopyToHost(first.data(), device->data(), 4096);
    ASSERT_TRUE(seal0.ok());
    held->WaitEntered(1);  // the worker holds seal0
    auto seal1 = (*engine)->CopyToHost(second.data(), device->data(), 4096);
    auto restored = (*engine)->CopyToDevice(device->data(), restore.data(), 4096);
    ASSERT_TRUE(seal1.ok());
    ASSERT_TRUE(restored.ok());
    held->Open();
    ASSERT_TRUE(seal1->Wait().ok());
    ASSERT_TRUE(restored->Wait().ok());
    EXPECT_EQ(first[0], std::byte{0});
    EXPECT_EQ(second[0], restores_first ? std::byte{0xAB} : std::byte{0});
    ASSERT_TRUE((*engine)->Synchronize().ok());
  }
}

}  // namespace
}  // namespace tier::device::test
