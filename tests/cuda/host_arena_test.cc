#include "tier/device/host_arena.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "test_support.h"

namespace tier::device::test {
namespace {

constexpr std::uint64_t kChunk = 1 << 20;

// Counts allocations and refuses once `fail_after` have been made.
class CountingAllocator final : public HostAllocator {
 public:
  explicit CountingAllocator(int fail_after = 1 << 30) : fail_after_(fail_after) {}
  const char* name() const override { return "counting"; }
  bool pinned() const override { return false; }
  Result<void*> Allocate(std::uint64_t bytes) override {
    if (allocations_ >= fail_after_) return Status::NoSpace("test allocator says no");
    ++allocations_;
    ++live_;
    return inner_->Allocate(bytes);
  }
  void Deallocate(void* ptr, std::uint64_t bytes) override {
    --live_;
    inner_->Deallocate(ptr, bytes);
  }
  int live() const { return live_; }

 private:
  std::shared_ptr<HostAllocator> inner_ = MakeAlignedHostAllocator();
  int fail_after_;
  std::atomic<int> allocations_{0};
  std::atomic<int> live_{0};
};

std::unique_ptr<HostArena> MakeArena(std::uint64_t capacity_bytes, std::shared_ptr<HostAllocator> a,
                                     std::uint64_t reserve_bytes = 0) {
  auto arena = HostArena::Create(
      {.capacity_bytes = capacity_bytes, .chunk_bytes = kChunk, .reserve_bytes = reserve_bytes},
      std::move(a));
  EXPECT_TRUE(arena.ok()) << arena.status().ToString();
  return arena.ok() ? std::move(arena).value() : nullptr;
}

TEST(HostArena, AllocatesAlignedExtentsInChunksOnDemand) {
  auto counting = std::make_shared<CountingAllocator>();
  auto arena = MakeArena(4 * kChunk, counting);
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(arena->chunk_count(), 0u);
  Result<HostExtent> a = arena->Allocate(1000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->bytes, 1000u);
  EXPECT_EQ(a->reserved_bytes, 4096u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a->data) % 4096, 0u);
  std::memset(a->data, 0xAB, a->bytes);  // usable memory
  EXPECT_EQ(arena->chunk_count(), 1u);
  EXPECT_EQ(arena->allocated_bytes(), kChunk);
  // Does not fit in what is left of chunk 1: a second chunk.
  Result<HostExtent> b = arena->Allocate(kChunk - 1000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(arena->chunk_count(), 2u);
  EXPECT_EQ(arena->live_extents(), 2u);
  EXPECT_EQ(arena->used_bytes(), 4096u + kChunk);
  ASSERT_TRUE(arena->Release(*a).ok());
  ASSERT_TRUE(arena->Release(*b).ok());
  EXPECT_EQ(arena->used_bytes(), 0u);
  EXPECT_EQ(arena->chunk_count(), 2u);  // kept until trim
  EXPECT_EQ(arena->Trim(), 2 * kChunk);
  EXPECT_EQ(arena->chunk_count(), 0u);
  EXPECT_EQ(counting->live(), 0);
}

TEST(HostArena, EnforcesTheByteBound) {
  auto arena = MakeArena(2 * kChunk, MakeAlignedHostAllocator());
  ASSERT_NE(arena, nullptr);
  Result<HostExtent> a = arena->Allocate(kChunk);
  Result<HostExtent> b = arena->Allocate(kChunk);
  ASSERT_TRUE(a.ok() && b.ok());
  Result<HostExtent> c = arena->Allocate(1);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), TIER_NO_SPACE);
  EXPECT_NE(c.status().message().find("capacity 2097152"), std::string::npos)
      << c.status().ToString();
  Result<HostExtent> huge = arena->Allocate(3 * kChunk);
  EXPECT_EQ(huge.status().code(), TIER_NO_SPACE);
  ASSERT_TRUE(arena->Release(*a).ok());
  EXPECT_TRUE(arena->Allocate(1).ok());  // room again
}

TEST(HostArena, OversizeExtentGetsADedicatedAllocationFreedOnRelease) {
  auto counting = std::make_shared<CountingAllocator>();
  auto arena = MakeArena(8 * kChunk, counting);
  ASSERT_NE(arena, nullptr);
  Result<HostExtent> big = arena->Allocate(3 * kChunk + 5);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  std::memset(big->data, 1, big->bytes);
  EXPECT_EQ(arena->chunk_count(), 1u);
  EXPECT_EQ(arena->allocated_bytes(), 3 * kChunk + 4096);
  ASSERT_TRUE(arena->Release(*big).ok());
  EXPECT_EQ(arena->chunk_count(), 0u);
  EXPECT_EQ(arena->allocated_bytes(), 0u);
  EXPECT_EQ(counting->live(), 0);
}

TEST(HostArena, ReleasedRangesCoalesce) {
  auto arena = MakeArena(kChunk, MakeAlignedHostAllocator());
  ASSERT_NE(arena, nullptr);
  const std::uint64_t quarter = kChunk / 4;
  std::vector<HostExtent> e;
  for (int i = 0; i < 4; ++i) {
    Result<HostExtent> r = arena->Allocate(quarter);
    ASSERT_TRUE(r.ok());
    e.push_back(*r);
  }
  EXPECT_FALSE(arena->Allocate(1).ok());  // full
  ASSERT_TRUE(arena->Release(e[1]).ok());
  ASSERT_TRUE(arena->Release(e[2]).ok());
  ASSERT_TRUE(arena->Release(e[0]).ok());
  Result<HostExtent> three = arena->Allocate(3 * quarter);  // needs the three merged
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ(three->data, e[0].data);
  EXPECT_EQ(arena->chunk_count(), 1u);
}

TEST(HostArena, RefusesDoubleAndForeignRelease) {
  auto arena = MakeArena(kChunk, MakeAlignedHostAllocator());
  ASSERT_NE(arena, nullptr);
  Result<HostExtent> a = arena->Allocate(100);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(arena->Release(*a).ok());
  Status twice = arena->Release(*a);
  EXPECT_EQ(twice.code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(twice.message().find("not live"), std::string::npos) << twice.ToString();
  std::vector<std::byte> elsewhere(64);
  EXPECT_EQ(arena->Release(HostExtent{elsewhere.data(), 64, 4096}).code(), TIER_INVALID_ARGUMENT);
  EXPECT_EQ(arena->Release(HostExtent{}).code(), TIER_INVALID_ARGUMENT);
  EXPECT_EQ(arena->used_bytes(), 0u);
}

TEST(HostArena, ReserveAllocatesUpFrontAndAllocatorFailureIsReported) {
  auto counting = std::make_shared<CountingAllocator>();
  auto arena = MakeArena(4 * kChunk, counting, 2 * kChunk + 1);
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(arena->chunk_count(), 3u);
  EXPECT_EQ(counting->live(), 3);

  auto refusing = std::make_shared<CountingAllocator>(/*fail_after=*/1);
  auto small = MakeArena(4 * kChunk, refusing);
  ASSERT_NE(small, nullptr);
  ASSERT_TRUE(small->Allocate(kChunk).ok());
  Result<HostExtent> r = small->Allocate(kChunk);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), TIER_NO_SPACE);
  EXPECT_NE(r.status().message().find("test allocator says no"), std::string::npos);
}

// Issue 27: an arena reserved whole at Create() and made not to grow never asks the allocator
// again, and says so when full.
TEST(HostArena, ReservedWholeArenaDoesNotGrow) {
  auto allocator = std::make_shared<CountingAllocator>();
  HostArenaOptions options{.capacity_bytes = 8 * kChunk,
                           .chunk_bytes = 8 * kChunk,
                           .reserve_bytes = 8 * kChunk,
                           .min_reserve_chunk_bytes = kChunk,
                           .grow = false};
  auto arena = HostArena::Create(options, allocator);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  EXPECT_EQ((*arena)->allocated_bytes(), 8 * kChunk);
  EXPECT_EQ((*arena)->chunk_count(), 1u);
  EXPECT_EQ(allocator->live(), 1);
  // Full: no new chunk is asked for, the error says why.
  auto all = (*arena)->Allocate(8 * kChunk);
  ASSERT_TRUE(all.ok());
  auto more = (*arena)->Allocate(4096);
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().code(), TIER_NO_SPACE);
  EXPECT_NE(more.status().message().find("does not grow"), std::string::npos);
  EXPECT_EQ(allocator->live(), 1);
  ASSERT_TRUE((*arena)->Release(*all).ok());
}

// A size-limited allocator: refuses anything above `max_bytes`, and every call after `calls`.
class SizeLimitedAllocator final : public HostAllocator {
 public:
  SizeLimitedAllocator(std::uint64_t max_bytes, int calls) : max_(max_bytes), calls_left_(calls) {}
  const char* name() const override { return "size_limited"; }
  bool pinned() const override { return false; }
  Result<void*> Allocate(std::uint64_t bytes) override {
    ++calls_;
    if (bytes > max_ || calls_left_ == 0) return Status::NoSpace("size limited");
    --calls_left_;
    return inner_->Allocate(bytes);
  }
  void Deallocate(void* ptr, std::uint64_t bytes) override { inner_->Deallocate(ptr, bytes); }
  int calls() const { return calls_; }

 private:
  std::shared_ptr<HostAllocator> inner_ = MakeAlignedHostAllocator();
  const std::uint64_t max_;
  int calls_left_;
  int calls_ = 0;
};

TEST(HostArena, BestEffortReserveHalvesRefusedChunks) {
  // 8 MiB and 4 MiB refused, two 2 MiB chunks given, then nothing: 4 MiB kept.
  auto allocator = std::make_shared<SizeLimitedAllocator>(3 * kChunk, 2);
  HostArenaOptions options{.capacity_bytes = 8 * kChunk,
                           .chunk_bytes = 8 * kChunk,
                           .reserve_bytes = 8 * kChunk,
                           .min_reserve_chunk_bytes = kChunk,
                           .grow = false};
  auto arena = HostArena::Create(options, allocator);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  EXPECT_EQ((*arena)->allocated_bytes(), 4 * kChunk);
  EXPECT_EQ((*arena)->chunk_count(), 2u);
  const int calls = allocator->calls();
  // Extents fit within one chunk; one larger than any chunk is refused without a call.
  auto a = (*arena)->Allocate(2 * kChunk);
  auto b = (*arena)->Allocate(kChunk);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE((*arena)->Allocate(3 * kChunk).ok());
  EXPECT_EQ(allocator->calls(), calls);
  ASSERT_TRUE((*arena)->Release(*a).ok());
  ASSERT_TRUE((*arena)->Release(*b).ok());
  // Without the floor, the first refusal fails Create (the old behaviour).
  options.min_reserve_chunk_bytes = 0;
  EXPECT_EQ(HostArena::Create(options, allocator).status().code(), TIER_NO_SPACE);
}

TEST(HostArena, BadOptionsAreRefused) {
  auto a = MakeAlignedHostAllocator();
  EXPECT_FALSE(HostArena::Create({.capacity_bytes = 0}, a).ok());
  EXPECT_FALSE(HostArena::Create({.capacity_bytes = kChunk, .chunk_bytes = 1000}, a).ok());
  EXPECT_FALSE(
      HostArena::Create({.capacity_bytes = kChunk, .chunk_bytes = kChunk, .alignment_bytes = 3}, a)
          .ok());
  EXPECT_FALSE(HostArena::Create({.capacity_bytes = kChunk}, nullptr).ok());
  auto arena = MakeArena(kChunk, a);
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(arena->Allocate(0).status().code(), TIER_INVALID_ARGUMENT);
}

TEST(HostArena, ConcurrentAllocateAndRelease) {
  auto arena = MakeArena(64 * kChunk, MakeAlignedHostAllocator());
  ASSERT_NE(arena, nullptr);
  std::atomic<int> failures{0};
  std::atomic<int> full{0};  // the bound refusing is allowed, anything else is not
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<HostExtent> mine;
      for (int i = 0; i < 500; ++i) {
        if (mine.empty() || rng() % 3 != 0) {
          Result<HostExtent> e = arena->Allocate(1 + rng() % (64 << 10));
          if (!e.ok()) {
            ++(e.status().code() == TIER_NO_SPACE ? full : failures);
            continue;
          }
          std::memset(e->data, t, e->bytes);
          mine.push_back(*e);
        } else {
          const HostExtent e = mine.back();
          mine.pop_back();
          for (std::uint64_t k = 0; k < e.bytes; k += 997) {
            if (e.data[k] != static_cast<std::byte>(t)) ++failures;  // someone else wrote here
          }
          if (!arena->Release(e).ok()) ++failures;
        }
      }
      for (const HostExtent& e : mine) {
        if (!arena->Release(e).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LT(full.load(), 100);
  EXPECT_LE(arena->allocated_bytes(), 64 * kChunk);
  EXPECT_EQ(arena->used_bytes(), 0u);
  EXPECT_EQ(arena->live_extents(), 0u);
}

// The arena on each engine's own host allocator (pinned on CUDA).
TEST(HostArena, OnEngineAllocators) {
  for (auto kind : {EngineKind::kCpuWorker, EngineKind::kCuda}) {
    auto engine = MakeEngine(kind);
    if (!engine.ok()) {
      ASSERT_EQ(engine.status().code(), TIER_UNSUPPORTED);
      std::printf("[   INFO   ] %s; pinned arena not exercised\n",
                  SkipMessage(engine.status()).c_str());
      continue;
    }
    auto arena = MakeArena(2 * kChunk, (*engine)->host_allocator());
    ASSERT_NE(arena, nullptr);
    EXPECT_EQ(arena->pinned(), kind == EngineKind::kCuda);
    Result<HostExtent> e = arena->Allocate(kChunk + 1);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    std::memset(e->data, 7, e->bytes);
    ASSERT_TRUE(arena->Release(*e).ok());
  }
}

}  // namespace
}  // namespace tier::device::test
