// The CUDA engine: host-side code only (the kernels are in *.cu). Every runtime call is checked.
#include "tier/device/cuda_transfer_engine.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
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
using detail::UseDevice;

constexpr std::uint64_t kHostAlignBytes = 4096;

// A transfer's completion: a blocking-sync event (a waiting thread sleeps instead of spinning on
// the scheduler's core), waited for on the engine's device whatever thread waits.
class CudaCompletion final : public Completion {
 public:
  CudaCompletion(cudaEvent_t event, int device) : event_(event), device_(device) {}
  ~CudaCompletion() override {
    UseDevice(device_).IgnoreError();
    (void)cudaEventDestroy(event_);
  }
  CudaCompletion(const CudaCompletion&) = delete;
  CudaCompletion& operator=(const CudaCompletion&) = delete;

  Status Wait() override {
    TIER_RETURN_IF_ERROR(UseDevice(device_));
    return CudaStatus(cudaEventSynchronize(event_), "transfer");
  }
  bool IsDone() override {
    if (!UseDevice(device_).ok()) return true;  // Wait() reports the error
    return cudaEventQuery(event_) != cudaErrorNotReady;
  }
  Status MakeStreamWait(void* native_stream) override {
    TIER_RETURN_IF_ERROR(UseDevice(device_));
    return CudaStatus(cudaStreamWaitEvent(static_cast<cudaStream_t>(native_stream), event_, 0),
                      "cudaStreamWaitEvent");
  }

 private:
  cudaEvent_t event_;
  const int device_;
};

class CudaPinnedAllocator final : public HostAllocator {
 public:
  explicit CudaPinnedAllocator(int device) : device_(device) {}
  const char* name() const override { return "cuda_pinned"; }
  bool pinned() const override { return true; }
  Result<void*> Allocate(std::uint64_t bytes) override {
    if (bytes == 0) return Status::InvalidArgument("pinned allocation of 0 bytes");
    TIER_RETURN_IF_ERROR(UseDevice(device_));
    void* ptr = nullptr;
    TIER_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable));
    if (reinterpret_cast<std::uintptr_t>(ptr) % kHostAlignBytes != 0) {
      (void)cudaFreeHost(ptr);
      return Status::Internal("cudaHostAlloc returned memory not aligned to 4096 bytes");
    }
    return ptr;
  }
  void Deallocate(void* ptr, std::uint64_t /*bytes*/) override {
    UseDevice(device_).IgnoreError();  // the releaser's thread, or any other
    (void)cudaFreeHost(ptr);
  }

 private:
  const int device_;
};

// One direction of the engine: a copy stream (cudaMemcpyAsync; the transfers' completions are
// recorded here, so they complete in submission order), a kernel stream, and two staging slots
// used alternately, so a stage's kernel runs while the previous stage's copy is on the copy
// engine. Events order the two streams: a slot is refilled only after its last use is done.
struct Direction {
  const char* name = "";
  cudaStream_t copy = nullptr;
  cudaStream_t kernel = nullptr;
  unsigned char* staging[2] = {nullptr, nullptr};
  cudaEvent_t slot_free[2] = {nullptr, nullptr};    // last use of the slot is done
  cudaEvent_t slot_filled[2] = {nullptr, nullptr};  // the slot holds the stage's pages
  cudaEvent_t join = nullptr;                       // for joining one stream to the other
  unsigned slot = 0;                                // the next slot to use
  std::mutex mu;  // one page copy at a time: its stages share the slots
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
    TIER_RETURN_IF_ERROR(UseDevice(options.device));
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
    // Restores (host to device) first: the higher priority (numerically lower) of the range.
    int least = 0, greatest = 0;
    TIER_CUDA_RETURN_IF_ERROR(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    TIER_RETURN_IF_ERROR(engine->MakeDirection(&engine->d2h_, "d2h", least));
    TIER_RETURN_IF_ERROR(engine->MakeDirection(&engine->h2d_, "h2d", greatest));
    engine->description_ = "GPU " + std::to_string(options.device) + ": " + prop.name + " (" +
                           arch + ", " + std::to_string(prop.totalGlobalMem >> 30) + " GiB)";
    std::unique_ptr<TransferEngine> out = std::move(engine);
    return out;
  }

  ~CudaTransferEngine() override {
    UseDevice(options_.device).IgnoreError();
    for (Direction* d : {&d2h_, &h2d_}) {
      if (d->copy != nullptr) (void)cudaStreamSynchronize(d->copy);
      if (d->kernel != nullptr) (void)cudaStreamSynchronize(d->kernel);
      for (int k = 0; k < 2; ++k) {
        if (d->staging[k] != nullptr) (void)cudaFree(d->staging[k]);
        if (d->slot_free[k] != nullptr) (void)cudaEventDestroy(d->slot_free[k]);
        if (d->slot_filled[k] != nullptr) (void)cudaEventDestroy(d->slot_filled[k]);
      }
      if (d->join != nullptr) (void)cudaEventDestroy(d->join);
      if (d->copy != nullptr) (void)cudaStreamDestroy(d->copy);
      if (d->kernel != nullptr) (void)cudaStreamDestroy(d->kernel);
    }
  }

  const char* path_name() const override { return "cuda"; }
  std::string description() const override { return description_; }
  std::shared_ptr<HostAllocator> host_allocator() override { return host_allocator_; }
  // The device-to-host copy stream (gathers complete there).
  NativeStream native_stream() const override { return d2h_.copy; }

  Result<DeviceBuffer> AllocateDevice(std::uint64_t bytes) override {
    if (bytes == 0) return Status::InvalidArgument("device allocation of 0 bytes");
    TIER_RETURN_IF_ERROR(UseDevice(options_.device));
    void* ptr = nullptr;
    const cudaError_t error = cudaMalloc(&ptr, bytes);
    if (error != cudaSuccess) {
      (void)cudaGetLastError();
      return Status::NoSpace("cudaMalloc of " + std::to_string(bytes) +
                             " bytes: " + CudaErrorText(error));
    }
    const int device = options_.device;
    return DeviceBuffer(static_cast<std::byte*>(ptr), bytes, [device](std::byte* p) {
      UseDevice(device).IgnoreError();
      (void)cudaFree(p);
    });
  }

  Result<Transfer> CopyToHost(void* host_dst, const void* device_src,
                              std::uint64_t bytes) override {
    return Copy(d2h_, host_dst, device_src, bytes, cudaMemcpyDeviceToHost);
  }
  Result<Transfer> CopyToDevice(void* device_dst, const void* host_src,
                                std::uint64_t bytes) override {
    return Copy(h2d_, device_dst, host_src, bytes, cudaMemcpyHostToDevice);
  }
  Result<Transfer> CopyOnDevice(void* device_dst, const void* device_src,
                                std::uint64_t bytes) override {
    return Copy(h2d_, device_dst, device_src, bytes, cudaMemcpyDeviceToDevice);
  }

  // Both directions, both their streams, wait for the producer's work queued so far.
  Status OrderAfter(NativeStream producer) override {
    if (producer == nullptr) return Status::Ok();
    TIER_RETURN_IF_ERROR(UseDevice(options_.device));
    cudaEvent_t event = nullptr;
    TIER_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    Status status = CudaStatus(cudaEventRecord(event, static_cast<cudaStream_t>(producer)),
                               "cudaEventRecord(producer)");
    for (Direction* d : {&d2h_, &h2d_}) {
      std::lock_guard<std::mutex> lock(d->mu);
      for (cudaStream_t stream : {d->copy, d->kernel}) {
        if (status.ok()) {
          status = CudaStatus(cudaStreamWaitEvent(stream, event, 0), "cudaStreamWaitEvent");
        }
      }
    }
    (void)cudaEventDestroy(event);  // released once the waits are satisfied
    return status;
  }

  Status CheckDeviceMemory(const void* ptr, std::uint64_t bytes) const override {
    if (ptr == nullptr) return Status::InvalidArgument("device memory: null pointer");
    TIER_RETURN_IF_ERROR(UseDevice(options_.device));
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
    TIER_RETURN_IF_ERROR(UseDevice(options_.device));
    Status first;
    for (Direction* d : {&d2h_, &h2d_}) {
      for (cudaStream_t stream : {d->kernel, d->copy}) {
        const Status done = CudaStatus(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        if (first.ok()) first = done;
      }
    }
    return first;
  }

 protected:
  Result<Transfer> SubmitPageCopy(detail::PageCopyJob&& job) override {
    const std::uint32_t per_stage = detail::PagesPerStage(job, options_.staging_bytes);
    if (per_stage == 0) {
      return Status::NoSpace("staging buffer of " + std::to_string(options_.staging_bytes) +
                             " bytes cannot hold one page of layer " + std::to_string(job.layer) +
                             " (" + std::to_string(job.layer_page_bytes()) + " bytes)");
    }
    Direction& d = job.direction == detail::CopyDirection::kGather ? d2h_ : h2d_;
    std::lock_guard<std::mutex> lock(d.mu);
    TIER_RETURN_IF_ERROR(UseDevice(options_.device));
    Status status = EnqueueStages(d, job, per_stage);
    if (!status.ok()) return Abandon(d, std::move(status));
    return Record(d, job.segment_bytes);
  }

  Result<Transfer> SubmitByteShuffle(void* device_dst, const void* device_src, std::uint64_t bytes,
                                     std::uint32_t element_bytes, bool inverse) override {
    std::lock_guard<std::mutex> lock(h2d_.mu);
    TIER_RETURN_IF_ERROR(UseDevice(options_.device));
    Status status = CudaStatus(
        detail::LaunchByteShuffle(device_dst, device_src, bytes, element_bytes, inverse, h2d_.copy),
        "byte shuffle kernel launch");
    if (!status.ok()) return Abandon(h2d_, std::move(status));
    return Record(h2d_, 0);
  }

 private:
  explicit CudaTransferEngine(const CudaEngineOptions& options)
      : options_(options), host_allocator_(std::make_shared<CudaPinnedAllocator>(options.device)) {}

  Status MakeDirection(Direction* d, const char* name, int priority) {
    d->name = name;
    TIER_CUDA_RETURN_IF_ERROR(
        cudaStreamCreateWithPriority(&d->copy, cudaStreamNonBlocking, priority));
    TIER_CUDA_RETURN_IF_ERROR(
        cudaStreamCreateWithPriority(&d->kernel, cudaStreamNonBlocking, priority));
    for (int k = 0; k < 2; ++k) {
      void* staging = nullptr;
      const cudaError_t error = cudaMalloc(&staging, options_.staging_bytes);
      if (error != cudaSuccess) {
        (void)cudaGetLastError();
        return Status::NoSpace("cuda engine: " + std::string(name) + " staging slot of " +
                               std::to_string(options_.staging_bytes) +
                               " bytes: cudaMalloc: " + CudaErrorText(error));
      }
      d->staging[k] = static_cast<unsigned char*>(staging);
      TIER_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&d->slot_free[k], cudaEventDisableTiming));
      TIER_CUDA_RETURN_IF_ERROR(
          cudaEventCreateWithFlags(&d->slot_filled[k], cudaEventDisableTiming));
    }
    TIER_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&d->join, cudaEventDisableTiming));
    return Status::Ok();
  }

  // `later` waits for everything queued on `first` so far. d.mu held.
  static Status Join(Direction& d, cudaStream_t first, cudaStream_t later) {
    TIER_CUDA_RETURN_IF_ERROR(cudaEventRecord(d.join, first));
    TIER_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(later, d.join, 0));
    return Status::Ok();
  }

  // Stage by stage, alternating the two staging slots. Gather: kernel (pool -> slot) on the
  // kernel stream after the slot's previous copy-out, then one D2H copy per plane on the copy
  // stream after the kernel. Scatter: H2D copies into the slot on the copy stream after the
  // slot's previous kernel, then the kernel (slot -> pool) after them. The kernel stream starts
  // after what the copy stream holds (the direction's order), and the copy stream ends after the
  // kernel stream, so the transfer's event covers every stage. d.mu held.
  Status EnqueueStages(Direction& d, const detail::PageCopyJob& job, std::uint32_t per_stage) {
    const auto pages = static_cast<std::uint32_t>(job.page_ids.size());
    const bool gather = job.direction == detail::CopyDirection::kGather;
    detail::PlaneRun runs[kMaxPlanesPerLayer];
    auto params = std::make_unique<detail::PageCopyParams>();
    TIER_RETURN_IF_ERROR(Join(d, d.copy, d.kernel));
    for (std::uint32_t first = 0; first < pages; first += per_stage) {
      const std::uint32_t count = std::min(per_stage, pages - first);
      const unsigned k = d.slot;
      d.slot ^= 1u;
      detail::MakeStage(job, first, count, d.staging[k], params.get(), runs);
      if (gather) {
        TIER_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(d.kernel, d.slot_free[k], 0));
        TIER_CUDA_RETURN_IF_ERROR(detail::LaunchGatherStage(*params, d.kernel));
        TIER_CUDA_RETURN_IF_ERROR(cudaEventRecord(d.slot_filled[k], d.kernel));
        TIER_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(d.copy, d.slot_filled[k], 0));
      } else {
        TIER_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(d.copy, d.slot_free[k], 0));
      }
      for (std::uint32_t q = 0; q < job.plane_count; ++q) {
        std::byte* host = job.segment + runs[q].segment_offset;
        unsigned char* stage = d.staging[k] + runs[q].staging_offset;
        if (gather) {
          TIER_CUDA_RETURN_IF_ERROR(
              cudaMemcpyAsync(host, stage, runs[q].bytes, cudaMemcpyDeviceToHost, d.copy));
        } else {
          TIER_CUDA_RETURN_IF_ERROR(
              cudaMemcpyAsync(stage, host, runs[q].bytes, cudaMemcpyHostToDevice, d.copy));
        }
      }
      if (gather) {
        TIER_CUDA_RETURN_IF_ERROR(cudaEventRecord(d.slot_free[k], d.copy));
      } else {
        TIER_CUDA_RETURN_IF_ERROR(cudaEventRecord(d.slot_filled[k], d.copy));
        TIER_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(d.kernel, d.slot_filled[k], 0));
        TIER_CUDA_RETURN_IF_ERROR(detail::LaunchScatterStage(*params, d.kernel));
        TIER_CUDA_RETURN_IF_ERROR(cudaEventRecord(d.slot_free[k], d.kernel));
      }
    }
    return Join(d, d.kernel, d.copy);
  }

  // A plain copy needs no staging: no lock (a cudaMemcpyAsync from pageable memory, which turns
  // synchronous, holds up no other submit). The event recorded after it may also cover a page
  // copy's stages queued meanwhile: it completes no earlier than the copy, which is all a
  // completion promises.
  Result<Transfer> Copy(Direction& d, void* dst, const void* src, std::uint64_t bytes,
                        cudaMemcpyKind kind) {
    if (bytes == 0) return Transfer();
    if (dst == nullptr || src == nullptr) return Status::InvalidArgument("copy: null buffer");
    TIER_RETURN_IF_ERROR(UseDevice(options_.device));
    Status status = CudaStatus(cudaMemcpyAsync(dst, src, bytes, kind, d.copy),
                               kind == cudaMemcpyDeviceToHost   ? "cudaMemcpyAsync(D2H)"
                               : kind == cudaMemcpyHostToDevice ? "cudaMemcpyAsync(H2D)"
                                                                : "cudaMemcpyAsync(D2D)");
    if (!status.ok()) return Abandon(d, std::move(status));
    return Record(d, bytes);
  }

  // A blocking-sync event after everything queued on the direction's copy stream so far: the
  // transfer's completion.
  Result<Transfer> Record(Direction& d, std::uint64_t bytes) {
    cudaEvent_t event = nullptr;
    Status status =
        CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventBlockingSync),
                   "cudaEventCreate");
    if (status.ok()) status = CudaStatus(cudaEventRecord(event, d.copy), "cudaEventRecord");
    if (!status.ok()) {
      if (event != nullptr) (void)cudaEventDestroy(event);
      return Abandon(d, std::move(status));
    }
    return Transfer(std::make_shared<CudaCompletion>(event, options_.device), bytes);
  }

  // A submit failed part-way: wait for what the direction queued so no caller buffer is still in
  // use, then report the first error.
  static Status Abandon(Direction& d, Status status) {
    (void)cudaStreamSynchronize(d.kernel);
    (void)cudaStreamSynchronize(d.copy);
    (void)cudaGetLastError();
    return status;
  }

  const CudaEngineOptions options_;
  const std::shared_ptr<HostAllocator> host_allocator_;
  Direction d2h_;  // Gather, CopyToHost: seals and demotions
  Direction h2d_;  // Scatter, CopyToDevice, CopyOnDevice, ByteShuffle: restores and hits first
  std::string description_;
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
