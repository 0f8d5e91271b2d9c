#include "tier/device/host_arena.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "test_support.h"

namespace tier::device {
namespace {

constexpr std::uint64_t kChunk = 1 << 20;

// Counts allocations and refuses once `fail_after` have been made.
class CountingAllocator final : public HostAllocator {
 public:
  explicit CountingAllocator(int fail_after = 1 << 30) : fail_after_(fail_after) {}
  const char* name() const override { return "counting"; }
  bool pinned() const override { return false; }
  Result<void*> allocate(std::uint64_t bytes) override {
    if (allocations_ >= fail_after_) return resource_exhausted("test allocator says no");
    ++allocations_;
    ++live_;
    return inner_->allocate(bytes);
  }
  void deallocate(void* ptr, std::uint64_t bytes) override {
    --live_;
    inner_->deallocate(ptr, bytes);
  }
  int live() const { return live_; }

 private:
  std::shared_ptr<HostAllocator> inner_ = make_aligned_host_allocator();
  int fail_after_;
  std::atomic<int> allocations_{0};
  std::atomic<int> live_{0};
};

std::unique_ptr<HostArena> make_arena(std::uint64_t capacity, std::shared_ptr<HostAllocator> a,
                                      std::uint64_t reserve = 0) {
  auto arena = HostArena::create(
      {.capacity_bytes = capacity, .chunk_bytes = kChunk, .reserve_bytes = reserve}, std::move(a));
  EXPECT_TRUE(arena.ok()) << arena.status().to_string();
  return arena.ok() ? std::move(arena).value() : nullptr;
}

TEST(HostArenaTest, AllocatesAlignedExtentsInChunksOnDemand) {
  auto counting = std::make_shared<CountingAllocator>();
  auto arena = make_arena(4 * kChunk, counting);
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(arena->chunk_count(), 0u);
  Result<HostExtent> a = arena->allocate(1000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->bytes, 1000u);
  EXPECT_EQ(a->reserved_bytes, 4096u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a->data) % 4096, 0u);
  std::memset(a->data, 0xAB, a->bytes);  // usable memory
  EXPECT_EQ(arena->chunk_count(), 1u);
  EXPECT_EQ(arena->allocated_bytes(), kChunk);
  // Does not fit in what is left of chunk 1: a second chunk.
  Result<HostExtent> b = arena->allocate(kChunk - 1000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(arena->chunk_count(), 2u);
  EXPECT_EQ(arena->live_extents(), 2u);
  EXPECT_EQ(arena->used_bytes(), 4096u + kChunk);
  ASSERT_TRUE(arena->release(*a).ok());
  ASSERT_TRUE(arena->release(*b).ok());
  EXPECT_EQ(arena->used_bytes(), 0u);
  EXPECT_EQ(arena->chunk_count(), 2u);  // kept until trim
  EXPECT_EQ(arena->trim(), 2 * kChunk);
  EXPECT_EQ(arena->chunk_count(), 0u);
  EXPECT_EQ(counting->live(), 0);
}

TEST(HostArenaTest, EnforcesTheByteBound) {
  auto arena = make_arena(2 * kChunk, make_aligned_host_allocator());
  ASSERT_NE(arena, nullptr);
  Result<HostExtent> a = arena->allocate(kChunk);
  Result<HostExtent> b = arena->allocate(kChunk);
  ASSERT_TRUE(a.ok() && b.ok());
  Result<HostExtent> c = arena->allocate(1);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("capacity 2097152"), std::string::npos)
      << c.status().to_string();
  Result<HostExtent> huge = arena->allocate(3 * kChunk);
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(arena->release(*a).ok());
  EXPECT_TRUE(arena->allocate(1).ok());  // room again
}

TEST(HostArenaTest, OversizeExtentGetsADedicatedAllocationFreedOnRelease) {
  auto counting = std::make_shared<CountingAllocator>();
  auto arena = make_arena(8 * kChunk, counting);
  ASSERT_NE(arena, nullptr);
  Result<HostExtent> big = arena->allocate(3 * kChunk + 5);
  ASSERT_TRUE(big.ok()) << big.status().to_string();
  std::memset(big->data, 1, big->bytes);
  EXPECT_EQ(arena->chunk_count(), 1u);
  EXPECT_EQ(arena->allocated_bytes(), 3 * kChunk + 4096);
  ASSERT_TRUE(arena->release(*big).ok());
  EXPECT_EQ(arena->chunk_count(), 0u);
  EXPECT_EQ(arena->allocated_bytes(), 0u);
  EXPECT_EQ(counting->live(), 0);
}

TEST(HostArenaTest, ReleasedRangesCoalesce) {
  auto arena = make_arena(kChunk, make_aligned_host_allocator());
  ASSERT_NE(arena, nullptr);
  const std::uint64_t quarter = kChunk / 4;
  std::vector<HostExtent> e;
  for (int i = 0; i < 4; ++i) {
    Result<HostExtent> r = arena->allocate(quarter);
    ASSERT_TRUE(r.ok());
    e.push_back(*r);
  }
  EXPECT_FALSE(arena->allocate(1).ok());  // full
  ASSERT_TRUE(arena->release(e[1]).ok());
  ASSERT_TRUE(arena->release(e[2]).ok());
  ASSERT_TRUE(arena->release(e[0]).ok());
  Result<HostExtent> three = arena->allocate(3 * quarter);  // needs the three merged
  ASSERT_TRUE(three.ok()) << three.status().to_string();
  EXPECT_EQ(three->data, e[0].data);
  EXPECT_EQ(arena->chunk_count(), 1u);
}

TEST(HostArenaTest, RefusesDoubleAndForeignRelease) {
  auto arena = make_arena(kChunk, make_aligned_host_allocator());
  ASSERT_NE(arena, nullptr);
  Result<HostExtent> a = arena->allocate(100);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(arena->release(*a).ok());
  Status twice = arena->release(*a);
  EXPECT_EQ(twice.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(twice.message().find("not live"), std::string::npos) << twice.to_string();
  std::vector<std::byte> elsewhere(64);
  EXPECT_EQ(arena->release(HostExtent{elsewhere.data(), 64, 4096}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(arena->release(HostExtent{}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(arena->used_bytes(), 0u);
}

TEST(HostArenaTest, ReserveAllocatesUpFrontAndAllocatorFailureIsReported) {
  auto counting = std::make_shared<CountingAllocator>();
  auto arena = make_arena(4 * kChunk, counting, 2 * kChunk + 1);
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(arena->chunk_count(), 3u);
  EXPECT_EQ(counting->live(), 3);

  auto refusing = std::make_shared<CountingAllocator>(/*fail_after=*/1);
  auto small = make_arena(4 * kChunk, refusing);
  ASSERT_NE(small, nullptr);
  ASSERT_TRUE(small->allocate(kChunk).ok());
  Result<HostExtent> r = small->allocate(kChunk);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("test allocator says no"), std::string::npos);
}

TEST(HostArenaTest, BadOptionsAreRefused) {
  auto a = make_aligned_host_allocator();
  EXPECT_FALSE(HostArena::create({.capacity_bytes = 0}, a).ok());
  EXPECT_FALSE(HostArena::create({.capacity_bytes = kChunk, .chunk_bytes = 1000}, a).ok());
  EXPECT_FALSE(
      HostArena::create({.capacity_bytes = kChunk, .chunk_bytes = kChunk, .alignment_bytes = 3}, a)
          .ok());
  EXPECT_FALSE(HostArena::create({.capacity_bytes = kChunk}, nullptr).ok());
  auto arena = make_arena(kChunk, a);
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(arena->allocate(0).status().code(), StatusCode::kInvalidArgument);
}

TEST(HostArenaTest, ConcurrentAllocateAndRelease) {
  auto arena = make_arena(64 * kChunk, make_aligned_host_allocator());
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
          Result<HostExtent> e = arena->allocate(1 + rng() % (64 << 10));
          if (!e.ok()) {
            ++(e.status().code() == StatusCode::kResourceExhausted ? full : failures);
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
          if (!arena->release(e).ok()) ++failures;
        }
      }
      for (const HostExtent& e : mine) {
        if (!arena->release(e).ok()) ++failures;
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
TEST(HostArenaTest, OnEngineAllocators) {
  for (auto kind : {testing::EngineKind::kCpuWorker, testing::EngineKind::kCuda}) {
    auto engine = testing::make_engine(kind);
    if (!engine.ok()) {
      ASSERT_EQ(engine.status().code(), StatusCode::kUnavailable);
      std::printf("[   INFO   ] %s; pinned arena not exercised\n",
                  testing::skip_message(engine.status()).c_str());
      continue;
    }
    auto arena = make_arena(2 * kChunk, (*engine)->host_allocator());
    ASSERT_NE(arena, nullptr);
    EXPECT_EQ(arena->pinned(), kind == testing::EngineKind::kCuda);
    Result<HostExtent> e = arena->allocate(kChunk + 1);
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    std::memset(e->data, 7, e->bytes);
    ASSERT_TRUE(arena->release(*e).ok());
  }
}

}  // namespace
}  // namespace tier::device
