#include "tier/device/engine_select.h"

#include <gtest/gtest.h>

namespace tier::device::test {
namespace {

TEST(EngineSelect, AutoPicksCudaOnlyWhenADeviceIsPresent) {
  const EngineSelection s = SelectTransferEngine();
  ASSERT_NE(s.engine, nullptr) << s.reason;
  EXPECT_EQ(s.path, s.engine->path_name());
  Result<int> devices = CudaDeviceCount();
  if (devices.ok()) {
    EXPECT_EQ(s.path, kDevicePathCuda);
    EXPECT_EQ(s.reason.rfind("using GPU 0: ", 0), 0u) << s.reason;
  } else {
    EXPECT_EQ(s.path, kDevicePathCpu);
    // The reason the server logs: why not CUDA.
    EXPECT_EQ(s.reason, devices.status().message());
    if (CudaCompiledIn()) {
      EXPECT_NE(s.reason.find("no CUDA device present"), std::string::npos) << s.reason;
    } else {
      EXPECT_EQ(s.reason, "CUDA not compiled in");
    }
  }
}

TEST(EngineSelect, CpuOnRequest) {
  EngineOptions options;
  options.prefer = DevicePreference::kCpu;
  const EngineSelection s = SelectTransferEngine(options);
  ASSERT_NE(s.engine, nullptr);
  EXPECT_EQ(s.path, "cpu");
  EXPECT_EQ(s.reason, "CPU path requested");
  EXPECT_STREQ(s.engine->path_name(), "cpu");
}

TEST(EngineSelect, CudaOnRequestOrNothing) {
  EngineOptions options;
  options.prefer = DevicePreference::kCuda;
  const EngineSelection s = SelectTransferEngine(options);
  if (CudaDeviceCount().ok()) {
    ASSERT_NE(s.engine, nullptr) << s.reason;
    EXPECT_EQ(s.path, "cuda");
  } else {
    EXPECT_EQ(s.engine, nullptr);
    EXPECT_EQ(s.path, "");
    EXPECT_EQ(s.reason.rfind("CUDA path requested but unusable: ", 0), 0u) << s.reason;
  }
}

TEST(EngineSelect, CompiledInFlagMatchesTheBuild) {
  EXPECT_EQ(CudaCompiledIn(), TIER_DEVICE_HAVE_CUDA != 0);
  EXPECT_EQ(std::string(CudaArchitectures()).empty(), !CudaCompiledIn());
  EXPECT_EQ(MakeCudaTransferEngine({.device = 99}).status().code(), TIER_UNSUPPORTED);
}

TEST(EngineSelect, ParsePreference) {
  EXPECT_EQ(ParseDevicePreference("auto").value(), DevicePreference::kAuto);
  EXPECT_EQ(ParseDevicePreference("cpu").value(), DevicePreference::kCpu);
  EXPECT_EQ(ParseDevicePreference("cuda").value(), DevicePreference::kCuda);
  Result<DevicePreference> bad = ParseDevicePreference("gpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'gpu'"), std::string::npos);
}

}  // namespace
}  // namespace tier::device::test
