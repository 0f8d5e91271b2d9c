// Gather/scatter on every engine (the CPU engines always, the CUDA ones when a device is present)
// and every test layout, checked against the documented segment byte order computed
// independently from a host mirror of the pool.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <tuple>

#include "test_support.h"

namespace tier::device::test {
namespace {

constexpr int kLayoutCount = 5;  // TestLayouts().size()

class GatherScatter : public ::testing::TestWithParam<std::tuple<EngineKind, int>> {
 protected:
  EngineKind kind() const { return std::get<0>(GetParam()); }
  NamedLayout named() const { return TestLayouts()[std::get<1>(GetParam())]; }
};

// Gathers `table` of every layer, checks each segment against the reference, scatters the
// segments into `targets` (other pages), and checks the whole pool afterwards: each target page
// equals its source page, every other page is untouched.
void RoundTrip(TransferEngine& engine, const PoolLayout& layout, std::uint64_t seed,
               const std::vector<std::uint32_t>& table, const std::vector<std::uint32_t>& targets) {
  ASSERT_EQ(table.size(), targets.size());
  Result<DevicePool> pool = engine.AllocatePool(layout);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  const PoolMirror before = RandomMirror(layout, seed);
  Upload(engine, *pool, before);

  std::vector<std::vector<std::byte>> segments;
  std::vector<Transfer> transfers;
  for (std::uint32_t l = 0; l < layout.layer_count(); ++l) {
    segments.emplace_back(layout.segment_bytes(l, table.size()), std::byte{0xEE});
  }
  // Queue every layer before waiting on any: transfers must not depend on the caller waiting.
  for (std::uint32_t l = 0; l < layout.layer_count(); ++l) {
    Result<Transfer> t = engine.Gather(layout, pool->view, l, table, segments[l]);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->bytes(), segments[l].size());
    transfers.push_back(*t);
  }
  for (const Transfer& t : transfers) ASSERT_TRUE(t.Wait().ok());
  for (std::uint32_t l = 0; l < layout.layer_count(); ++l) {
    ASSERT_EQ(segments[l], ExpectedSegment(layout, before, l, table)) << "layer " << l;
  }

  transfers.clear();
  for (std::uint32_t l = 0; l < layout.layer_count(); ++l) {
    Result<Transfer> t = engine.Scatter(layout, pool->view, l, segments[l], targets);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    transfers.push_back(*t);
  }
  ASSERT_TRUE(engine.Synchronize().ok());
  for (const Transfer& t : transfers) {
    EXPECT_TRUE(t.IsDone());
    ASSERT_TRUE(t.Wait().ok());
  }

  const PoolMirror after = Download(engine, *pool);
  std::vector<int> target_of(layout.page_count(), -1);
  for (std::size_t i = 0; i < targets.size(); ++i) target_of[targets[i]] = static_cast<int>(i);
  for (std::uint32_t l = 0; l < layout.layer_count(); ++l) {
    for (std::uint32_t q = 0; q < layout.plane_count(l); ++q) {
      const std::uint64_t bpp = layout.plane(l, q).bytes_per_page;
      for (std::uint32_t p = 0; p < layout.page_count(); ++p) {
        const std::byte* got = after[l][q].data() + p * bpp;
        const std::uint32_t source = target_of[p] >= 0 ? table[target_of[p]] : p;
        const std::byte* want = before[l][q].data() + static_cast<std::uint64_t>(source) * bpp;
        ASSERT_EQ(std::memcmp(got, want, bpp), 0) << "layer " << l << " plane " << q << " page "
                                                  << p << " (source page " << source << ")";
      }
    }
  }
}

TEST_P(GatherScatter, ScatterIntoShuffledFreePagesReproducesEveryPage) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, kind());
  const PoolLayout layout = named().layout;
  std::mt19937_64 rng(1234);
  for (int round = 0; round < 4; ++round) {
    // A checkpoint of up to half the pool; the free pages are the rest, shuffled.
    const std::uint32_t count = 1 + static_cast<std::uint32_t>(rng() % (layout.page_count() / 2));
    std::vector<std::uint32_t> perm = RandomTable(layout.page_count(), layout.page_count(), rng);
    std::vector<std::uint32_t> table(perm.begin(), perm.begin() + count);
    std::vector<std::uint32_t> free_pages(perm.begin() + count, perm.end());
    std::shuffle(free_pages.begin(), free_pages.end(), rng);
    free_pages.resize(count);
    SCOPED_TRACE("round " + std::to_string(round) + ", " + std::to_string(count) + " pages");
    RoundTrip(*engine, layout, 100 + round, table, free_pages);
    if (HasFatalFailure()) return;
  }
}

TEST_P(GatherScatter, WholePoolPermutedOntoItself) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, kind());
  const PoolLayout layout = named().layout;
  std::mt19937_64 rng(99);
  const std::vector<std::uint32_t> table =
      RandomTable(layout.page_count(), layout.page_count(), rng);
  const std::vector<std::uint32_t> targets =
      RandomTable(layout.page_count(), layout.page_count(), rng);
  RoundTrip(*engine, layout, 7, table, targets);
}

TEST_P(GatherScatter, SinglePageCheckpoint) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, kind());
  const PoolLayout layout = named().layout;
  RoundTrip(*engine, layout, 3, {layout.page_count() - 1}, {0});
}

TEST_P(GatherScatter, EmptyCheckpointIsANoOp) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, kind());
  const PoolLayout layout = named().layout;
  Result<DevicePool> pool = engine->AllocatePool(layout);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  const PoolMirror before = RandomMirror(layout, 5);
  Upload(*engine, *pool, before);
  for (std::uint32_t l = 0; l < layout.layer_count(); ++l) {
    EXPECT_EQ(layout.segment_bytes(l, 0), 0u);
    Result<Transfer> g = engine->Gather(layout, pool->view, l, {}, {});
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_TRUE(g->IsDone());
    EXPECT_EQ(g->bytes(), 0u);
    Result<Transfer> s = engine->Scatter(layout, pool->view, l, {}, {});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_TRUE(s->Wait().ok());
  }
  EXPECT_EQ(Download(*engine, *pool), before);
}

TEST_P(GatherScatter, GatherAllowsRepeatedPages) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, kind());
  const PoolLayout layout = named().layout;
  Result<DevicePool> pool = engine->AllocatePool(layout);
  ASSERT_TRUE(pool.ok());
  const PoolMirror before = RandomMirror(layout, 11);
  Upload(*engine, *pool, before);
  const std::vector<std::uint32_t> table = {2, 0, 2, 1};
  std::vector<std::byte> seg(layout.segment_bytes(0, table.size()));
  Result<Transfer> t = engine->Gather(layout, pool->view, 0, table, seg);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_TRUE(t->Wait().ok());
  EXPECT_EQ(seg, ExpectedSegment(layout, before, 0, table));
}

TEST_P(GatherScatter, InvalidPageIdsAreRefusedAndNothingMoves) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, kind());
  const PoolLayout layout = named().layout;
  Result<DevicePool> pool = engine->AllocatePool(layout);
  ASSERT_TRUE(pool.ok());
  const PoolMirror before = RandomMirror(layout, 13);
  Upload(*engine, *pool, before);
  const std::uint32_t bad = layout.page_count();
  const std::vector<std::uint32_t> table = {0, 1, bad, 2};
  std::vector<std::byte> seg(layout.segment_bytes(0, table.size()), std::byte{0x5A});
  const std::vector<std::byte> untouched = seg;

  Result<Transfer> g = engine->Gather(layout, pool->view, 0, table, seg);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(g.status().message().find("page id " + std::to_string(bad) +
                                      " at index 2 is outside the pool (page_count " +
                                      std::to_string(layout.page_count()) + ")"),
            std::string::npos)
      << g.status().ToString();
  EXPECT_EQ(seg, untouched);

  Result<Transfer> s = engine->Scatter(layout, pool->view, 0, seg, table);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(s.status().message().find("scatter layer 0: page id"), std::string::npos);

  const std::vector<std::uint32_t> dup = {4, 1, 4};
  std::vector<std::byte> seg3(layout.segment_bytes(0, dup.size()));
  Result<Transfer> d = engine->Scatter(layout, pool->view, 0, seg3, dup);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(d.status().message().find("page id 4 appears twice in the target page table "
                                      "(indexes 0 and 2)"),
            std::string::npos)
      << d.status().ToString();
  ASSERT_TRUE(engine->Synchronize().ok());
  EXPECT_EQ(Download(*engine, *pool), before);
}

TEST_P(GatherScatter, MalformedRequestsAreRefused) {
  TIER_MAKE_ENGINE_OR_SKIP(engine, kind());
  const PoolLayout layout = named().layout;
  Result<DevicePool> pool = engine->AllocatePool(layout);
  ASSERT_TRUE(pool.ok());
  const std::vector<std::uint32_t> table = {0, 1};
  std::vector<std::byte> seg(layout.segment_bytes(0, table.size()));

  // A segment one byte short.
  Result<Transfer> r = engine->Gather(layout, pool->view, 0, table, {seg.data(), seg.size() - 1});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(r.status().message().find("segment has"), std::string::npos);

  // A layer past the end.
  r = engine->Gather(layout, pool->view, layout.layer_count(), table, seg);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), TIER_INVALID_ARGUMENT);

  // A pool view missing a plane.
  PoolView holes = pool->view;
  holes.plane_base[0][0] = nullptr;
  r = engine->Gather(layout, holes, 0, table, seg);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), TIER_INVALID_ARGUMENT);

  // A view of the wrong shape.
  PoolView short_view = pool->view;
  short_view.plane_base.pop_back();
  r = engine->Scatter(layout, short_view, 0, seg, table);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), TIER_INVALID_ARGUMENT);

  // A page table longer than the pool.
  std::vector<std::uint32_t> too_long(layout.page_count() + 1, 0);
  std::vector<std::byte> big(layout.segment_bytes(0, too_long.size()));
  r = engine->Gather(layout, pool->view, 0, too_long, big);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), TIER_INVALID_ARGUMENT);
}

std::string ParamName(const ::testing::TestParamInfo<std::tuple<EngineKind, int>>& info) {
  return std::string(EngineKindName(std::get<0>(info.param))) + "_" +
         TestLayouts()[std::get<1>(info.param)].name;
}

INSTANTIATE_TEST_SUITE_P(Cpu, GatherScatter,
                         ::testing::Combine(::testing::Values(EngineKind::kCpuInline,
                                                              EngineKind::kCpuWorker,
                                                              EngineKind::kCpuStaged),
                                            ::testing::Range(0, kLayoutCount)),
                         ParamName);

// GPU: compiled everywhere, skipped with "no CUDA device present" where there is none.
INSTANTIATE_TEST_SUITE_P(Gpu, GatherScatter,
                         ::testing::Combine(::testing::Values(EngineKind::kCuda,
                                                              EngineKind::kCudaSmallStaging),
                                            ::testing::Range(0, kLayoutCount)),
                         ParamName);

}  // namespace
}  // namespace tier::device::test
