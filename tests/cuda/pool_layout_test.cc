#include "tier/device/pool_layout.h"

#include <gtest/gtest.h>

namespace tier::device::test {
namespace {

NinferLayoutSpec Qwen(KvDtype dtype) {
  return NinferLayoutSpec{.dtype = dtype, .page_count = 1563};  // 100k tokens
}

TEST(PoolLayout, NinferInt8MatchesTheBriefsBytesPerToken) {
  Result<PoolLayout> layout = MakeNinferLayout(Qwen(KvDtype::kInt8G64));
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  EXPECT_EQ(layout->layer_count(), 16u);
  EXPECT_EQ(layout->tokens_per_page(), 64u);
  ASSERT_EQ(layout->plane_count(0), 4u);
  EXPECT_EQ(layout->plane(0, 0).name, "k");
  EXPECT_EQ(layout->plane(0, 0).bytes_per_page, 64u * 4 * 256);
  EXPECT_EQ(layout->plane(0, 1).name, "v");
  EXPECT_EQ(layout->plane(0, 2).name, "k_scale");
  EXPECT_EQ(layout->plane(0, 2).bytes_per_page, 64u * 4 * 4 * 2);  // FP16 per 64 values
  EXPECT_EQ(layout->plane(0, 2).element_bytes, 2u);
  EXPECT_EQ(layout->page_bytes() / 64, 33792u);
  // A 100k-token checkpoint holds ~3.38 GB of KV.
  EXPECT_EQ(layout->checkpoint_bytes(1563), 1563ull * 64 * 33792);
  EXPECT_NEAR(static_cast<double>(layout->checkpoint_bytes(1563)) / 1e9, 3.38, 0.01);
}

TEST(PoolLayout, NinferBf16AndMtp) {
  Result<PoolLayout> bf16 = MakeNinferLayout(Qwen(KvDtype::kBf16));
  ASSERT_TRUE(bf16.ok());
  ASSERT_EQ(bf16->plane_count(0), 2u);
  EXPECT_EQ(bf16->plane(0, 0).element_bytes, 2u);
  EXPECT_EQ(bf16->page_bytes() / 64, 65536u);

  NinferLayoutSpec spec = Qwen(KvDtype::kInt8G64);
  spec.mtp_layer = true;
  Result<PoolLayout> mtp = MakeNinferLayout(spec);
  ASSERT_TRUE(mtp.ok());
  EXPECT_EQ(mtp->layer_count(), 17u);
  EXPECT_EQ(mtp->layer(16).name, "mtp");
  EXPECT_EQ(mtp->page_bytes(), 33792ull * 64 * 17 / 16);  // MTP adds 1/16

  PoolLayout added = bf16.value();
  added.AddLayer(LayerSpec{"mtp", bf16->layer(0).planes});
  ASSERT_TRUE(added.Validate().ok());
  EXPECT_EQ(added.layer_count(), 17u);
}

TEST(PoolLayout, SegmentIsPlaneMajor) {
  PoolLayout layout(10, 4, {LayerSpec{"l", {{"k", 100, 1}, {"v", 200, 2}, {"s", 8, 4}}}});
  ASSERT_TRUE(layout.Validate().ok());
  EXPECT_EQ(layout.layer_page_bytes(0), 308u);
  EXPECT_EQ(layout.segment_bytes(0, 3), 924u);
  EXPECT_EQ(layout.segment_plane_offset(0, 0, 3), 0u);
  EXPECT_EQ(layout.segment_plane_offset(0, 1, 3), 300u);
  EXPECT_EQ(layout.segment_plane_offset(0, 2, 3), 900u);
  EXPECT_EQ(layout.plane_pool_bytes(0, 1), 2000u);
  EXPECT_EQ(layout.pool_bytes(), 3080u);
}

TEST(PoolLayout, ValidateRefusesBrokenLayouts) {
  auto code = [](const PoolLayout& l) { return l.Validate().code(); };
  const LayerSpec ok{"l", {{"k", 64, 1}}};
  EXPECT_EQ(code(PoolLayout(0, 1, {ok})), TIER_INVALID_ARGUMENT);  // no pages
  EXPECT_EQ(code(PoolLayout(4, 0, {ok})), TIER_INVALID_ARGUMENT);  // no tokens
  EXPECT_EQ(code(PoolLayout(4, 1, {})), TIER_INVALID_ARGUMENT);    // no layers
  EXPECT_EQ(code(PoolLayout(4, 1, {LayerSpec{"l", {}}})), TIER_INVALID_ARGUMENT);
  EXPECT_EQ(code(PoolLayout(4, 1, {LayerSpec{"l", {{"k", 0, 1}}}})), TIER_INVALID_ARGUMENT);
  EXPECT_EQ(code(PoolLayout(4, 1, {LayerSpec{"l", {{"k", 6, 4}}}})), TIER_INVALID_ARGUMENT);
  EXPECT_EQ(code(PoolLayout(4, 1, {LayerSpec{"l", {{"k", 6, 3}}}})), TIER_INVALID_ARGUMENT);
  LayerSpec nine{"l", std::vector<PlaneSpec>(9, PlaneSpec{"p", 16, 1})};
  const Status too_many = PoolLayout(4, 1, {nine}).Validate();
  EXPECT_EQ(too_many.code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(too_many.message().find("9 planes"), std::string::npos) << too_many.ToString();
  EXPECT_TRUE(PoolLayout(4, 1, {ok}).Validate().ok());
}

TEST(PoolLayout, NinferSpecErrors) {
  NinferLayoutSpec spec = Qwen(KvDtype::kInt8G64);
  spec.scale_group = 48;  // does not divide 256
  EXPECT_EQ(MakeNinferLayout(spec).status().code(), TIER_INVALID_ARGUMENT);
  spec = Qwen(KvDtype::kInt8G64);
  spec.scale_bytes = 3;
  EXPECT_EQ(MakeNinferLayout(spec).status().code(), TIER_INVALID_ARGUMENT);
  spec = Qwen(KvDtype::kInt8G64);
  spec.page_count = 0;
  EXPECT_EQ(MakeNinferLayout(spec).status().code(), TIER_INVALID_ARGUMENT);
  spec = Qwen(KvDtype::kInt8G64);
  spec.kv_heads = 0;
  EXPECT_EQ(MakeNinferLayout(spec).status().code(), TIER_INVALID_ARGUMENT);
}

// The device side's errors are the project's one Status, with the ABI's codes and names.
TEST(DeviceStatus, NamesAndResult) {
  EXPECT_EQ(Status().ToString(), "ok");
  EXPECT_EQ(Status::InvalidArgument("x").ToString(), "invalid_argument: x");
  EXPECT_STREQ(Status::Unsupported("CUDA not compiled in").code_name(), "unsupported");
  Result<int> bad(Status::InvalidArgument("nope"));
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), TIER_INVALID_ARGUMENT);
  Result<int> good(7);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 7);
}

}  // namespace
}  // namespace tier::device::test
