#include "tier/device/engine_select.h"

#include <gtest/gtest.h>

namespace tier::device {
namespace {

TEST(EngineSelectTest, AutoPicksCudaOnlyWhenADeviceIsPresent) {
  const EngineSelection s = select_transfer_engine();
  ASSERT_NE(s.engine, nullptr) << s.reason;
  EXPECT_EQ(s.path, s.engine->path_name());
  Result<int> devices = cuda_device_count();
  if (devices.ok()) {
    EXPECT_EQ(s.path, kDevicePathCuda);
    EXPECT_EQ(s.reason.rfind("using GPU 0: ", 0), 0u) << s.reason;
  } else {
    EXPECT_EQ(s.path, kDevicePathCpu);
    // The reason the server logs: why not CUDA.
    EXPECT_EQ(s.reason, devices.status().message());
    if (cuda_compiled_in()) {
      EXPECT_NE(s.reason.find("no CUDA device present"), std::string::npos) << s.reason;
    } else {
      EXPECT_EQ(s.reason, "CUDA not compiled in");
    }
  }
}

TEST(EngineSelectTest, CpuOnRequest) {
  EngineOptions options;
  options.prefer = DevicePreference::kCpu;
  const EngineSelection s = select_transfer_engine(options);
  ASSERT_NE(s.engine, nullptr);
  EXPECT_EQ(s.path, "cpu");
  EXPECT_EQ(s.reason, "CPU path requested");
  EXPECT_STREQ(s.engine->path_name(), "cpu");
}

TEST(EngineSelectTest, CudaOnRequestOrNothing) {
  EngineOptions options;
  options.prefer = DevicePreference::kCuda;
  const EngineSelection s = select_transfer_engine(options);
  if (cuda_device_count().ok()) {
    ASSERT_NE(s.engine, nullptr) << s.reason;
    EXPECT_EQ(s.path, "cuda");
  } else {
    EXPECT_EQ(s.engine, nullptr);
    EXPECT_EQ(s.path, "");
    EXPECT_EQ(s.reason.rfind("CUDA path requested but unusable: ", 0), 0u) << s.reason;
  }
}

TEST(EngineSelectTest, CompiledInFlagMatchesTheBuild) {
  EXPECT_EQ(cuda_compiled_in(), TIER_DEVICE_HAVE_CUDA != 0);
  EXPECT_EQ(std::string(cuda_architectures()).empty(), !cuda_compiled_in());
  EXPECT_EQ(make_cuda_transfer_engine({.device = 99}).status().code(), StatusCode::kUnavailable);
}

TEST(EngineSelectTest, ParsePreference) {
  EXPECT_EQ(parse_device_preference("auto").value(), DevicePreference::kAuto);
  EXPECT_EQ(parse_device_preference("cpu").value(), DevicePreference::kCpu);
  EXPECT_EQ(parse_device_preference("cuda").value(), DevicePreference::kCuda);
  Result<DevicePreference> bad = parse_device_preference("gpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'gpu'"), std::string::npos);
}

}  // namespace
}  // namespace tier::device
