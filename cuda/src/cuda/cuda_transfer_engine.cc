// The CUDA engine: host-side code only (the kernels are in *.cu). Every runtime call is checked.
#include "tier/device/cuda_transfer_engine.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>

#include "../page_copy_job.h"
#include "../staged_copy.h"
#include "cuda_check.h"
#include "kernels.h"

#ifndef TIER_CUDA_ARCHITECTURES
#define TIER_CUDA_ARCHITECTURES "unknown"
#endif

namespace tier::device {
namespace {

using detail::CudaErrorText;
using detail::CudaStatus;
using detail::DeviceGuard;

constexpr std::uint64_t kHostAlignBytes = 4096;

class CudaCompletion final : public Completion {
 public:
  explicit CudaCompletion(cudaEvent_t event) : event_(event) {}
  ~CudaCompletion() override { (void)cudaEventDestroy(event_); }
  CudaCompletion(const CudaCompletion&) = delete;
  CudaCompletion& operator=(const CudaCompletion&) = delete;

  Status Wait() override { return CudaStatus(cudaEventSynchronize(event_), "transfer"); }
  bool IsDone() override { return cudaEventQuery(event_) != cudaErrorNotReady; }
  Status MakeStreamWait(void* native_stream) override {
    return CudaStatus(cudaStreamWaitEvent(static_cast<cudaStream_t>(native_stream), event_, 0),
                      "cudaStreamWaitEvent");
  }

 private:
  cudaEvent_t event_;
};

class CudaPinnedAllocator final : public HostAllocator {
 public:
  explicit CudaPinnedAllocator(int device) : device_(device) {}
  const char* name() const override { return "cuda_pinned"; }
  bool pinned() const override { return true; }
  Result<void*> Allocate(std::uint64_t bytes) override {
    if (bytes == 0) return Status::InvalidArgument("pinned allocation of 0 bytes");
    DeviceGuard guard(device_);
    TIER_RETURN_IF_ERROR(guard.status());
    void* ptr = nullptr;
    TIER_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable));
    if (reinterpret_cast<std::uintptr_t>(ptr) % kHostAlignBytes != 0) {
      (void)cudaFreeHost(ptr);
      return Status::Internal("cudaHostAlloc returned memory not aligned to 4096 bytes");
    }
    return ptr;
  }
  void Deallocate(void* ptr, std::uint64_t /*bytes*/) override { (void)cudaFreeHost(ptr); }

 private:
  const int device_;
};

class CudaTransferEngine final : public TransferEngine {
 public:
  static Result<std::unique_ptr<TransferEngine>> Create(const CudaEngineOptions& options) {
    Result<int> count = CudaDeviceCount();
    if (!count.ok()) return count.status();
    if (options.device < 0 || options.device >= *count) {
      return Status::Unsupported("no CUDA device " + std::to_string(options.device) + " (" +
                                 std::to_string(*count) + " present)");
    }
    if (options.staging_bytes < 4096) {
      return Status::InvalidArgument("cuda engine: staging_bytes " +
                                     std::to_string(options.staging_bytes) + " is below 4096");
    }
    DeviceGuard guard(options.device);
    TIER_RETURN_IF_ERROR(guard.status());
    cudaDeviceProp prop{};
    TIER_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, options.device));
    const std::string arch = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
    const cudaError_t image = detail::CheckKernelImages();
    if (image != cudaSuccess) {
      return Status::Unsupported("GPU " + std::to_string(options.device) + " (" + prop.name + ", " +
                                 arch + ") cannot run this build's kernels (built for " +
                                 TIER_CUDA_ARCHITECTURES + "): " + CudaErrorText(image));
    }
    std::unique_ptr<CudaTransferEngine> engine(new CudaTransferEngine(options));
    TIER_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&engine->stream_, cudaStreamNonBlocking));
    void* staging = nullptr;
    TIER_CUDA_RETURN_IF_ERROR(cudaMalloc(&staging, options.staging_bytes));
    engine->staging_ = static_cast<unsigned char*>(staging);
    engine->description_ = "GPU " + std::to_string(options.device) + ": " + prop.name + " (" +
                           arch + ", " + std::to_string(prop.totalGlobalMem >> 30) + " GiB)";
    std::unique_ptr<TransferEngine> out = std::move(engine);
    return out;
  }

  ~CudaTransferEngine() override {
    DeviceGuard guard(options_.device);
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    if (staging_ != nullptr) (void)cudaFree(staging_);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }

  const char* path_name() const override { return "cuda"; }
  std::string description() const override { return description_; }
  std::shared_ptr<HostAllocator> host_allocator() override { return host_allocator_; }
  NativeStream native_stream() const override { return stream_; }

  Result<DeviceBuffer> AllocateDevice(std::uint64_t bytes) override {
    if (bytes == 0) return Status::InvalidArgument("device allocation of 0 bytes");
    DeviceGuard guard(options_.device);
    TIER_RETURN_IF_ERROR(guard.status());
    void* ptr = nullptr;
    const cudaError_t error = cudaMalloc(&ptr, bytes);
    if (error != cudaSuccess) {
      return Status::NoSpace("cudaMalloc of " + std::to_string(bytes) +
                             " bytes: " + CudaErrorText(error));
    }
    const int device = options_.device;
    return DeviceBuffer(static_cast<std::byte*>(ptr), bytes, [device](std::byte* p) {
      DeviceGuard free_guard(device);
      (void)cudaFree(p);
    });
  }

  Result<Transfer> CopyToHost(void* host_dst, const void* device_src,
                              std::uint64_t bytes) override {
    return Copy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost);
  }
  Result<Transfer> CopyToDevice(void* device_dst, const void* host_src,
                                std::uint64_t bytes) override {
    return Copy(device_dst, host_src, bytes, cudaMemcpyHostToDevice);
  }

  Result<Transfer> CopyOnDevice(void* device_dst, const void* device_src,
                                std::uint64_t bytes) override {
    return Copy(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice);
  }

  Status OrderAfter(NativeStream producer) override {
    std::lock_guard<std::mutex> lock(submit_mu_);
    DeviceGuard guard(options_.device);
    TIER_RETURN_IF_ERROR(guard.status());
    cudaEvent_t event = nullptr;
    TIER_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    Status status = CudaStatus(cudaEventRecord(event, static_cast<cudaStream_t>(producer)),
                               "cudaEventRecord(producer)");
    if (status.ok()) {
      status = CudaStatus(cudaStreamWaitEvent(stream_, event, 0), "cudaStreamWaitEvent");
    }
    (void)cudaEventDestroy(event);  // released once the wait is satisfied
    return status;
  }

  Status CheckDeviceMemory(const void* ptr, std::uint64_t bytes) const override {
    if (ptr == nullptr) return Status::InvalidArgument("device memory: null pointer");
    DeviceGuard guard(options_.device);
    TIER_RETURN_IF_ERROR(guard.status());
    cudaPointerAttributes attributes{};
    const cudaError_t error = cudaPointerGetAttributes(&attributes, ptr);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();
      return Status::InvalidArgument("device memory: cudaPointerGetAttributes of " +
                                     std::to_string(bytes) + " bytes: " + CudaErrorText(error));
    }
    const bool device_memory =
        attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
    if (!device_memory) {
      return Status::InvalidArgument(
          std::string("device memory: ") + std::to_string(bytes) + " bytes at this address are " +
          (attributes.type == cudaMemoryTypeHost ? "pinned host memory" : "pageable host memory") +
          ", not device memory of GPU " + std::to_string(options_.device));
    }
    if (attributes.device != options_.device) {
      return Status::InvalidArgument("device memory: " + std::to_string(bytes) +
                                     " bytes at this address are on GPU " +
                                     std::to_string(attributes.device) + ", the engine's is GPU " +
                                     std::to_string(options_.device));
    }
    return Status::Ok();
  }

  Status Synchronize() override {
    DeviceGuard guard(options_.device);
    TIER_RETURN_IF_ERROR(guard.status());
    return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

 protected:
  Result<Transfer> SubmitPageCopy(detail::PageCopyJob&& job) override {
    const std::uint32_t per_stage = detail::PagesPerStage(job, options_.staging_bytes);
    if (per_stage == 0) {
      return Status::NoSpace("staging buffer of " + std::to_string(options_.staging_bytes) +
                             " bytes cannot hold one page of layer " + std::to_string(job.layer) +
                             " (" + std::to_string(job.layer_page_bytes()) + " bytes)");
    }
    std::lock_guard<std::mutex> lock(submit_mu_);
    DeviceGuard guard(options_.device);
    TIER_RETURN_IF_ERROR(guard.status());
    Status status = EnqueueStages(job, per_stage);
    if (!status.ok()) return Abandon(std::move(status));
    return Record(job.segment_bytes);
  }

  Result<Transfer> SubmitByteShuffle(void* device_dst, const void* device_src, std::uint64_t bytes,
                                     std::uint32_t element_bytes, bool inverse) override {
    std::lock_guard<std::mutex> lock(submit_mu_);
    DeviceGuard guard(options_.device);
    TIER_RETURN_IF_ERROR(guard.status());
    Status status = CudaStatus(
        detail::LaunchByteShuffle(device_dst, device_src, bytes, element_bytes, inverse, stream_),
        "byte shuffle kernel launch");
    if (!status.ok()) return Abandon(std::move(status));
    return Record(0);
  }

 private:
  explicit CudaTransferEngine(const CudaEngineOptions& options)
      : options_(options), host_allocator_(std::make_shared<CudaPinnedAllocator>(options.device)) {}

  // Stage by stage, in stream order: gather = kernel (pool -> staging) then one D2H copy per
  // plane (staging -> segment); scatter = one H2D copy per plane then kernel (staging -> pool).
  // Stream order makes reusing the one staging buffer safe.
  Status EnqueueStages(const detail::PageCopyJob& job, std::uint32_t per_stage) {
    const auto pages = static_cast<std::uint32_t>(job.page_ids.size());
    const bool gather = job.direction == detail::CopyDirection::kGather;
    detail::PlaneRun runs[kMaxPlanesPerLayer];
    auto params = std::make_unique<detail::PageCopyParams>();
    for (std::uint32_t first = 0; first < pages; first += per_stage) {
      const std::uint32_t count = std::min(per_stage, pages - first);
      detail::MakeStage(job, first, count, staging_, params.get(), runs);
      if (gather) {
        TIER_CUDA_RETURN_IF_ERROR(detail::LaunchGatherStage(*params, stream_));
      }
      for (std::uint32_t q = 0; q < job.plane_count; ++q) {
        std::byte* host = job.segment + runs[q].segment_offset;
        unsigned char* stage = staging_ + runs[q].staging_offset;
        if (gather) {
          TIER_CUDA_RETURN_IF_ERROR(
              cudaMemcpyAsync(host, stage, runs[q].bytes, cudaMemcpyDeviceToHost, stream_));
        } else {
          TIER_CUDA_RETURN_IF_ERROR(
              cudaMemcpyAsync(stage, host, runs[q].bytes, cudaMemcpyHostToDevice, stream_));
        }
      }
      if (!gather) {
        TIER_CUDA_RETURN_IF_ERROR(detail::LaunchScatterStage(*params, stream_));
      }
    }
    return Status::Ok();
  }

  Result<Transfer> Copy(void* dst, const void* src, std::uint64_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0) return Transfer();
    if (dst == nullptr || src == nullptr) return Status::InvalidArgument("copy: null buffer");
    std::lock_guard<std::mutex> lock(submit_mu_);
    DeviceGuard guard(options_.device);
    TIER_RETURN_IF_ERROR(guard.status());
    Status status = CudaStatus(cudaMemcpyAsync(dst, src, bytes, kind, stream_),
                               kind == cudaMemcpyDeviceToHost   ? "cudaMemcpyAsync(D2H)"
                               : kind == cudaMemcpyHostToDevice ? "cudaMemcpyAsync(H2D)"
                                                                : "cudaMemcpyAsync(D2D)");
    if (!status.ok()) return Abandon(std::move(status));
    return Record(bytes);
  }

  // An event after everything queued so far: the transfer's completion. submit_mu_ held.
  Result<Transfer> Record(std::uint64_t bytes) {
    cudaEvent_t event = nullptr;
    Status status =
        CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    if (status.ok()) status = CudaStatus(cudaEventRecord(event, stream_), "cudaEventRecord");
    if (!status.ok()) {
      if (event != nullptr) (void)cudaEventDestroy(event);
      return Abandon(std::move(status));
    }
    return Transfer(std::make_shared<CudaCompletion>(event), bytes);
  }

  // A submit failed part-way: wait for what it queued so no caller buffer is still in use, then
  // report the first error. submit_mu_ held.
  Status Abandon(Status status) {
    (void)cudaStreamSynchronize(stream_);
    return status;
  }

  const CudaEngineOptions options_;
  const std::shared_ptr<HostAllocator> host_allocator_;
  cudaStream_t stream_ = nullptr;
  unsigned char* staging_ = nullptr;  // options_.staging_bytes of device memory
  std::string description_;
  std::mutex submit_mu_;  // one submit at a time: a submit's stages share staging_
};

}  // namespace

bool CudaCompiledIn() {
  return true;
}
const char* CudaArchitectures() {
  return TIER_CUDA_ARCHITECTURES;
}

namespace {

std::string CudaVersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace

CudaProbe ProbeCuda() {
  CudaProbe probe;
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  (void)cudaGetLastError();
  if (cudaDriverGetVersion(&probe.driver_version) != cudaSuccess) probe.driver_version = 0;
  if (cudaRuntimeGetVersion(&probe.runtime_version) != cudaSuccess) probe.runtime_version = 0;
  (void)cudaGetLastError();
  if (error == cudaSuccess && count > 0) {
    probe.state = CudaProbeState::kDevicePresent;
    probe.device_count = count;
    return probe;
  }
  const std::string call =
      error == cudaSuccess ? "0 devices" : "cudaGetDeviceCount: " + CudaErrorText(error);
  if (error == cudaSuccess || error == cudaErrorNoDevice) {
    probe.state = CudaProbeState::kNoDevice;
    probe.detail = "no CUDA device present (" + call + ")";
  } else if (error == cudaErrorInsufficientDriver && probe.driver_version == 0) {
    probe.state = CudaProbeState::kNoDriver;
    probe.detail = "no CUDA device present (no NVIDIA driver; " + call + ")";
  } else if (error == cudaErrorInsufficientDriver) {
    probe.state = CudaProbeState::kDriverTooOld;
    probe.detail = "the NVIDIA driver supports CUDA " + CudaVersionText(probe.driver_version) +
                   ", older than this build's runtime (CUDA " +
                   CudaVersionText(probe.runtime_version) + "): " + call;
  } else {
    probe.state = CudaProbeState::kProbeFailed;
    probe.detail = "CUDA devices unusable (" + call + ")";
  }
  return probe;
}

Result<int> CudaDeviceCount() {
  const CudaProbe probe = ProbeCuda();
  switch (probe.state) {
    case CudaProbeState::kDevicePresent:
      return probe.device_count;
    case CudaProbeState::kNotCompiledIn:
    case CudaProbeState::kNoDriver:
    case CudaProbeState::kNoDevice:
      return Status::Unsupported(probe.detail);
    case CudaProbeState::kDriverTooOld:
    case CudaProbeState::kProbeFailed:
      break;
  }
  return Status::IoError(probe.detail);
}

Result<std::unique_ptr<TransferEngine>> MakeCudaTransferEngine(const CudaEngineOptions& options) {
  return CudaTransferEngine::Create(options);
}

}  // namespace tier::device
