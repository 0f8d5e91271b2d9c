#include "tier/device/engine_select.h"

#include <gtest/gtest.h>

namespace tier::device::test {
namespace {

TEST(EngineSelect, AutoPicksCudaOnlyWhenADeviceIsPresent) {
  const CudaProbe probe = ProbeCuda();
  const EngineSelection s = SelectTransferEngine();
  if (probe.state == CudaProbeState::kDriverTooOld || probe.state == CudaProbeState::kProbeFailed) {
    EXPECT_EQ(s.engine, nullptr) << "a broken CUDA must not fall back to the CPU path";
    return;
  }
  ASSERT_NE(s.engine, nullptr) << s.reason;
  EXPECT_TRUE(s.status.ok());
  EXPECT_EQ(s.path, s.engine->path_name());
  Result<int> devices = CudaDeviceCount();
  if (devices.ok()) {
    EXPECT_EQ(s.path, kDevicePathCuda);
    EXPECT_EQ(s.reason.rfind("using GPU 0: ", 0), 0u) << s.reason;
  } else {
    EXPECT_EQ(s.path, kDevicePathCpu);
    // The reason the server logs: why not CUDA.
    EXPECT_EQ(s.reason, devices.status().message());
    EXPECT_EQ(s.reason, probe.detail);
    if (CudaCompiledIn()) {
      EXPECT_NE(s.reason.find("no CUDA device present"), std::string::npos) << s.reason;
    } else {
      EXPECT_EQ(s.reason, "CUDA not compiled in");
    }
  }
}

CudaProbe ProbeOf(CudaProbeState state, std::string detail) {
  CudaProbe p;
  p.state = state;
  p.device_count = state == CudaProbeState::kDevicePresent ? 1 : 0;
  p.detail = std::move(detail);
  return p;
}

// Issue 27, defect 2: auto falls back to the CPU only when nothing here holds device memory.
TEST(EngineSelect, AutoFallsBackOnlyWithoutDeviceOrCudaBuild) {
  struct Case {
    CudaProbeState state;
    EngineChoice choice;
    tier_status code;
  };
  const Case cases[] = {
      {CudaProbeState::kNotCompiledIn, EngineChoice::kCpu, TIER_OK},
      {CudaProbeState::kNoDriver, EngineChoice::kCpu, TIER_OK},
      {CudaProbeState::kNoDevice, EngineChoice::kCpu, TIER_OK},
      {CudaProbeState::kDriverTooOld, EngineChoice::kNone, TIER_IO_ERROR},
      {CudaProbeState::kProbeFailed, EngineChoice::kNone, TIER_IO_ERROR},
      {CudaProbeState::kDevicePresent, EngineChoice::kCuda, TIER_OK},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.state));
    const EngineDecision d = DecideEngine(DevicePreference::kAuto, ProbeOf(c.state, "why: x"));
    EXPECT_EQ(d.choice, c.choice);
    EXPECT_EQ(d.status.code(), c.code) << d.status.ToString();
    if (c.choice == EngineChoice::kCpu) {
      EXPECT_EQ(d.reason, "why: x");
    }
    if (c.choice == EngineChoice::kNone) {
      EXPECT_NE(d.reason.find("why: x"), std::string::npos) << "names the cause: " << d.reason;
      EXPECT_NE(d.reason.find("not falling back"), std::string::npos) << d.reason;
    }
  }
}

TEST(EngineSelect, CudaPreferenceNeverFallsBackAndCpuAlwaysCpu) {
  for (CudaProbeState state : {CudaProbeState::kNotCompiledIn, CudaProbeState::kNoDriver,
                               CudaProbeState::kNoDevice, CudaProbeState::kDriverTooOld,
                               CudaProbeState::kProbeFailed, CudaProbeState::kDevicePresent}) {
    SCOPED_TRACE(static_cast<int>(state));
    const EngineDecision cuda = DecideEngine(DevicePreference::kCuda, ProbeOf(state, "why"));
    if (state == CudaProbeState::kDevicePresent) {
      EXPECT_EQ(cuda.choice, EngineChoice::kCuda);
    } else {
      EXPECT_EQ(cuda.choice, EngineChoice::kNone);
      EXPECT_FALSE(cuda.status.ok());
      EXPECT_EQ(cuda.reason, "CUDA path requested but unusable: why");
    }
    const EngineDecision cpu = DecideEngine(DevicePreference::kCpu, ProbeOf(state, "why"));
    EXPECT_EQ(cpu.choice, EngineChoice::kCpu);
    EXPECT_EQ(cpu.reason, "CPU path requested");
  }
}

// The CUDA engine failing on a present device (the 64 MiB staging cudaMalloc on a full GPU, no
// kernel image) is an error with the failure's code, for auto too.
TEST(EngineSelect, CudaEngineFailureOnAPresentDeviceIsAnError) {
  for (DevicePreference prefer : {DevicePreference::kAuto, DevicePreference::kCuda}) {
    const EngineDecision d = DecideAfterCudaFailure(
        prefer, Status::NoSpace("cudaMalloc(&staging, options.staging_bytes): out of memory"));
    EXPECT_EQ(d.choice, EngineChoice::kNone);
    EXPECT_EQ(d.status.code(), TIER_NO_SPACE);
    EXPECT_NE(d.reason.find("cudaMalloc(&staging"), std::string::npos) << d.reason;
  }
  const EngineDecision image = DecideAfterCudaFailure(
      DevicePreference::kAuto, Status::Unsupported("cannot run this build's kernels"));
  EXPECT_EQ(image.choice, EngineChoice::kNone);
  EXPECT_EQ(image.status.code(), TIER_UNSUPPORTED);
}

// The whole selection with a probe given: on this machine's build, a probe that says the driver
// is too old gives no engine at all (not the CPU), and the Host's error keeps the code.
TEST(EngineSelect, SelectionWithABrokenProbeGivesNoEngine) {
  const EngineSelection s = SelectTransferEngine(
      {}, ProbeOf(CudaProbeState::kDriverTooOld, "the NVIDIA driver supports CUDA 11.4"));
  EXPECT_EQ(s.engine, nullptr);
  EXPECT_EQ(s.path, "");
  EXPECT_EQ(s.status.code(), TIER_IO_ERROR);
  EXPECT_NE(s.reason.find("CUDA 11.4"), std::string::npos) << s.reason;
  const EngineSelection none = SelectTransferEngine({}, ProbeOf(CudaProbeState::kNoDevice, "n"));
  ASSERT_NE(none.engine, nullptr);
  EXPECT_EQ(none.path, kDevicePathCpu);
  EXPECT_EQ(none.reason, "n");
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
