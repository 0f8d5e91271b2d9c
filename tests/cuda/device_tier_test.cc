// The server's Device tier (host_shim/device_tier.cc) over a CPU engine whose worker starts every
// transfer late and whose memory is quarantined when freed: an upload or a download that fails
// part-way returns only when nothing it queued can still write, and keeps the device's code.
#include "device_tier.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "host_copy.h"
#include "test_support.h"
#include "tier/device/host_arena.h"

namespace tier::device::test {
namespace {

constexpr std::uint64_t kArenaBytes = 1 << 20;

struct Rig {
  std::shared_ptr<QuarantineAllocator> device_memory;
  std::unique_ptr<DeviceTier> tier;
};

// A Device tier whose engine may allocate `device_allocations` buffers.
Rig MakeRig(int device_allocations) {
  Rig rig;
  rig.device_memory = std::make_shared<QuarantineAllocator>(device_allocations);
  auto engine = MakeCpuTransferEngine({.worker_thread = true,
                                       .device_allocator = rig.device_memory,
                                       .before_transfer = SlowWorker()});
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  if (engine.ok()) rig.tier = MakeEngineDeviceTier(std::move(engine).value());
  return rig;
}

std::unique_ptr<HostArena> MakeHostArena(std::shared_ptr<HostAllocator> allocator) {
  auto arena = HostArena::Create({.capacity_bytes = kArenaBytes, .chunk_bytes = kArenaBytes},
                                 std::move(allocator));
  EXPECT_TRUE(arena.ok()) << arena.status().ToString();
  return arena.ok() ? std::move(arena).value() : nullptr;
}

// A host copy of segments of `segment_bytes`, filled with random bytes.
std::unique_ptr<HostCopy> MakeHostCopy(HostArena* arena,
                                       const std::vector<std::uint64_t>& segment_bytes) {
  auto copy = HostCopy::Allocate(arena, segment_bytes);
  EXPECT_TRUE(copy.ok()) << copy.status().ToString();
  if (!copy.ok()) return nullptr;
  for (std::size_t i = 0; i < (*copy)->segment_count(); ++i) {
    const std::vector<std::byte> bytes = RandomBytes((*copy)->segment(i).size(), 40 + i);
    std::copy(bytes.begin(), bytes.end(), (*copy)->segment(i).begin());
  }
  return std::move(copy).value();
}

TEST(DeviceTier, UploadThenDownloadIsByteExact) {
  Rig rig = MakeRig(/*device_allocations=*/8);
  ASSERT_NE(rig.tier, nullptr);
  auto arena = MakeHostArena(MakeAlignedHostAllocator());
  ASSERT_NE(arena, nullptr);
  auto source = MakeHostCopy(arena.get(), {4096, 0, 10000});
  auto back = MakeHostCopy(arena.get(), {4096, 0, 10000});
  ASSERT_TRUE(source != nullptr && back != nullptr);
  auto copy = rig.tier->Upload(*source);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();
  Status downloaded = rig.tier->Download(**copy, back.get());
  ASSERT_TRUE(downloaded.ok()) << downloaded.ToString();
  for (std::size_t i = 0; i < source->segment_count(); ++i) {
    EXPECT_TRUE(std::equal(source->segment(i).begin(), source->segment(i).end(),
                           back->segment(i).begin(), back->segment(i).end()))
        << "segment " << i;
  }
}

// The third segment finds no device memory while the copies of the first two are still queued:
// the upload fails with the device's NO_SPACE, frees the two buffers, and the queued copies never
// write into them afterwards.
TEST(DeviceTier, UploadOutOfDeviceMemoryWaitsForWhatItQueued) {
  Rig rig = MakeRig(/*device_allocations=*/2);
  ASSERT_NE(rig.tier, nullptr);
  auto arena = MakeHostArena(MakeAlignedHostAllocator());
  ASSERT_NE(arena, nullptr);
  auto source = MakeHostCopy(arena.get(), {8192, 4096, 4096, 100});
  ASSERT_NE(source, nullptr);

  auto copy = rig.tier->Upload(*source);
  ASSERT_FALSE(copy.ok());
  EXPECT_EQ(copy.status().code(), TIER_NO_SPACE) << copy.status().ToString();
  EXPECT_EQ(
      copy.status().message().rfind("device: quarantine allocator: no room for 4096 bytes", 0), 0u)
      << copy.status().ToString();
  EXPECT_EQ(rig.device_memory->freed_blocks(), 2u);  // both buffers were freed on return

  rig.tier.reset();  // the engine's worker drains its queue
  EXPECT_EQ(rig.device_memory->BytesWrittenAfterFree(), 0u);
}

// A download into a host copy of the wrong shape is refused; once it has returned, the caller frees
// the host memory, and nothing writes into it afterwards.
TEST(DeviceTier, RefusedDownloadLeavesNothingWritingIntoTheHostCopy) {
  Rig rig = MakeRig(/*device_allocations=*/8);
  ASSERT_NE(rig.tier, nullptr);
  auto arena = MakeHostArena(MakeAlignedHostAllocator());
  ASSERT_NE(arena, nullptr);
  auto source = MakeHostCopy(arena.get(), {8192, 4096});
  ASSERT_NE(source, nullptr);
  auto copy = rig.tier->Upload(*source);
  ASSERT_TRUE(copy.ok()) << copy.status().ToString();

  auto host_memory = std::make_shared<QuarantineAllocator>();
  auto target_arena = MakeHostArena(host_memory);
  ASSERT_NE(target_arena, nullptr);
  auto target = MakeHostCopy(target_arena.get(), {8192, 4097});  // segment 1 one byte long
  ASSERT_NE(target, nullptr);
  Status downloaded = rig.tier->Download(**copy, target.get());
  ASSERT_FALSE(downloaded.ok());
  EXPECT_EQ(downloaded.code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(downloaded.message().find("device segment 1 has another size"), std::string::npos)
      << downloaded.ToString();

  target.reset();
  target_arena.reset();  // frees (quarantines) the host memory
  EXPECT_EQ(host_memory->freed_blocks(), 1u);
  rig.tier.reset();  // the engine's worker drains its queue
  EXPECT_EQ(host_memory->BytesWrittenAfterFree(), 0u);
}

}  // namespace
}  // namespace tier::device::test
