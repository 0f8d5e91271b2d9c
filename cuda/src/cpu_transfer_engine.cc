#include "tier/device/cpu_transfer_engine.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "page_copy_job.h"
#include "staged_copy.h"
#include "tier/check.h"
#include "tier/shuffle/byte_shuffle.h"

namespace tier::device {

struct CpuStream::State {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  std::uint64_t enqueued = 0;
  std::uint64_t done = 0;
  bool stopping = false;
  std::thread worker;  // last: starts after everything it uses exists
};

namespace {

std::mutex& StreamRegistryMutex() {
  static std::mutex mu;
  return mu;
}
std::set<const void*>& StreamRegistry() {
  static std::set<const void*> live;
  return live;
}

}  // namespace

CpuStream::CpuStream() : state_(std::make_unique<State>()) {
  State* st = state_.get();
  st->worker = std::thread([st] {
    for (;;) {
      std::function<void()> work;
      {
        std::unique_lock<std::mutex> lock(st->mu);
        st->cv.wait(lock, [&] { return st->stopping || !st->queue.empty(); });
        if (st->queue.empty()) return;  // stopping and drained
        work = std::move(st->queue.front());
        st->queue.pop_front();
      }
      work();
      std::lock_guard<std::mutex> lock(st->mu);
      ++st->done;
      st->cv.notify_all();
    }
  });
  std::lock_guard<std::mutex> lock(StreamRegistryMutex());
  StreamRegistry().insert(this);
}

CpuStream::~CpuStream() {
  {
    std::lock_guard<std::mutex> lock(StreamRegistryMutex());
    StreamRegistry().erase(this);
  }
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
    state_->cv.notify_all();
  }
  state_->worker.join();
}

void CpuStream::Enqueue(std::function<void()> work) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->queue.push_back(std::move(work));
  ++state_->enqueued;
  state_->cv.notify_all();
}

void CpuStream::Synchronize() {
  WaitFor(Record());
}

std::uint64_t CpuStream::Record() {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->enqueued;
}

void CpuStream::WaitFor(std::uint64_t marker) {
  std::unique_lock<std::mutex> lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->done >= marker; });
}

CpuStream* CpuStream::FromHandle(NativeStream handle) {
  if (handle == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(StreamRegistryMutex());
  return StreamRegistry().count(handle) != 0 ? static_cast<CpuStream*>(handle) : nullptr;
}

namespace {

class CpuCompletion final : public Completion, public std::enable_shared_from_this<CpuCompletion> {
 public:
  void Finish(Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = std::move(status);
    done_ = true;
    cv_.notify_all();
  }
  Status Wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    return status_;
  }
  bool IsDone() override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  // A CpuStream waits on its own thread (the caller does not block); anything else blocks.
  Status MakeStreamWait(void* native_stream) override {
    CpuStream* stream = CpuStream::FromHandle(native_stream);
    if (stream == nullptr) return Wait();
    std::shared_ptr<CpuCompletion> self = shared_from_this();
    stream->Enqueue([self] { self->Wait().IgnoreError(); });
    return Status::Ok();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
};

class CpuTransferEngine final : public TransferEngine {
 public:
  explicit CpuTransferEngine(const CpuEngineOptions& options)
      : options_(options),
        host_allocator_(options.host_allocator ? options.host_allocator
                                               : MakeAlignedHostAllocator()),
        device_allocator_(options.device_allocator ? options.device_allocator
                                                   : MakeAlignedHostAllocator()),
        staging_(options.staging_bytes) {
    if (options_.worker_thread) worker_ = std::thread([this] { RunWorker(); });
  }

  ~CpuTransferEngine() override {
    if (worker_.joinable()) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
        cv_.notify_all();
      }
      worker_.join();  // the worker drains the queue before it stops
    }
  }

  const char* path_name() const override { return "cpu"; }
  std::string description() const override {
    std::string d = "CPU reference (";
    d += options_.worker_thread ? "worker thread" : "inline";
    if (options_.staging_bytes != 0) {
      d += ", staged through " + std::to_string(options_.staging_bytes) + " bytes";
    }
    return d + ")";
  }
  std::shared_ptr<HostAllocator> host_allocator() override { return host_allocator_; }
  NativeStream native_stream() const override { return nullptr; }

  Result<DeviceBuffer> AllocateDevice(std::uint64_t bytes) override {
    if (bytes == 0) return Status::InvalidArgument("device allocation of 0 bytes");
    Result<void*> mem = device_allocator_->Allocate(bytes);
    if (!mem.ok()) return mem.status();
    std::shared_ptr<HostAllocator> allocator = device_allocator_;
    return DeviceBuffer(static_cast<std::byte*>(*mem), bytes,
                        [allocator, bytes](std::byte* p) { allocator->Deallocate(p, bytes); });
  }

  Result<Transfer> CopyToHost(void* host_dst, const void* device_src,
                              std::uint64_t bytes) override {
    return Copy(host_dst, device_src, bytes, "CopyToHost", kD2h);
  }
  Result<Transfer> CopyToDevice(void* device_dst, const void* host_src,
                                std::uint64_t bytes) override {
    return Copy(device_dst, host_src, bytes, "CopyToDevice", kH2d);
  }

  Result<Transfer> CopyOnDevice(void* device_dst, const void* device_src,
                                std::uint64_t bytes) override {
    // Its device memory is host memory.
    return Copy(device_dst, device_src, bytes, "CopyOnDevice", kH2d);
  }

  // Later transfers wait for the producer's work enqueued so far: a marker task on the worker
  // (or, inline, a wait in the caller) that blocks until the stream has run that far.
  Status OrderAfter(NativeStream producer) override {
    if (producer == nullptr) return Status::Ok();
    CpuStream* stream = CpuStream::FromHandle(producer);
    if (stream == nullptr) {
      return Status::InvalidArgument(
          "OrderAfter: the CPU engine knows no stream at this handle (pass a CpuStream's "
          "handle(), or nullptr)");
    }
    const std::uint64_t marker = stream->Record();
    // No handle: it touches no buffer of the caller, and dropping a handle would wait for it.
    // One marker per direction, so neither runs later work before the producer's.
    for (Direction lane : {kD2h, kH2d}) {
      SubmitTask(
          [stream, marker] {
            stream->WaitFor(marker);
            return Status::Ok();
          },
          lane);
      if (!options_.restores_first) break;
    }
    return Status::Ok();
  }

  Status CheckDeviceMemory(const void* ptr, std::uint64_t bytes) const override {
    if (ptr == nullptr) return Status::InvalidArgument("device memory: null pointer");
    return options_.check_device_memory ? options_.check_device_memory(ptr, bytes) : Status::Ok();
  }

  Status Synchronize() override {
    Transfer d2h = Submit([] { return Status::Ok(); }, 0, kD2h).value();
    Transfer h2d = Submit([] { return Status::Ok(); }, 0, kH2d).value();
    TIER_RETURN_IF_ERROR(d2h.Wait());
    return h2d.Wait();
  }

 protected:
  Result<Transfer> SubmitPageCopy(detail::PageCopyJob&& job) override {
    const std::uint64_t bytes = job.segment_bytes;
    if (options_.staging_bytes != 0 && detail::PagesPerStage(job, options_.staging_bytes) == 0) {
      return Status::NoSpace("staging buffer of " + std::to_string(options_.staging_bytes) +
                             " bytes cannot hold one page of layer " + std::to_string(job.layer) +
                             " (" + std::to_string(job.layer_page_bytes()) + " bytes)");
    }
    auto shared = std::make_shared<detail::PageCopyJob>(std::move(job));
    return Submit(
        [this, shared] {
          if (options_.staging_bytes == 0) {
            detail::RunPageCopyOnHost(*shared);
          } else {
            RunStaged(*shared);
          }
          return Status::Ok();
        },
        bytes, shared->direction == detail::CopyDirection::kGather ? kD2h : kH2d);
  }

  Result<Transfer> SubmitByteShuffle(void* device_dst, const void* device_src, std::uint64_t bytes,
                                     std::uint32_t element_bytes, bool inverse) override {
    return Submit(
        [=] {
          std::span<const std::byte> src(static_cast<const std::byte*>(device_src), bytes);
          std::span<std::byte> dst(static_cast<std::byte*>(device_dst), bytes);
          return inverse ? shuffle::ByteUnshuffle(src, dst, element_bytes)
                         : shuffle::ByteShuffle(src, dst, element_bytes);
        },
        0, kH2d);
  }

 private:
  struct Task {
    std::function<Status()> work;
    std::shared_ptr<CpuCompletion> completion;
  };
  // The CUDA engine's two directions; one queue unless options_.restores_first.
  enum Direction : int { kD2h = 0, kH2d = 1 };

  Result<Transfer> Copy(void* dst, const void* src, std::uint64_t bytes, const char* op,
                        Direction lane) {
    if (bytes == 0) return Transfer();
    if (dst == nullptr || src == nullptr) {
      return Status::InvalidArgument(std::string(op) + ": null buffer");
    }
    return Submit(
        [=] {
          std::memcpy(dst, src, bytes);
          return Status::Ok();
        },
        bytes, lane);
  }

  Result<Transfer> Submit(std::function<Status()> work, std::uint64_t bytes, Direction lane) {
    return Transfer(SubmitTask(std::move(work), lane), bytes);
  }

  std::shared_ptr<CpuCompletion> SubmitTask(std::function<Status()> work, Direction lane) {
    auto completion = std::make_shared<CpuCompletion>();
    if (!options_.worker_thread) {
      std::lock_guard<std::mutex> lock(inline_mu_);  // one transfer at a time, like a stream
      if (options_.before_transfer) options_.before_transfer();
      completion->Finish(work());
      return completion;
    }
    std::unique_lock<std::mutex> lock(mu_);
    space_cv_.wait(lock, [&] { return queued() < options_.max_queued_transfers; });
    queues_[options_.restores_first ? lane : kD2h].push_back(Task{std::move(work), completion});
    cv_.notify_all();
    return completion;
  }

  std::size_t queued() const { return queues_[kD2h].size() + queues_[kH2d].size(); }

  void RunWorker() {
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || queued() != 0; });
        if (queued() == 0) return;  // stopping and drained
        // Restores first: host-to-device work runs before queued device-to-host work.
        std::deque<Task>& queue = queues_[kH2d].empty() ? queues_[kD2h] : queues_[kH2d];
        task = std::move(queue.front());
        queue.pop_front();
        space_cv_.notify_all();
      }
      if (options_.before_transfer) options_.before_transfer();
      task.completion->Finish(task.work());
    }
  }

  // The CUDA engine's sequence, with memcpy for the kernel and for cudaMemcpyAsync.
  void RunStaged(const detail::PageCopyJob& job) {
    const std::uint32_t per_stage = detail::PagesPerStage(job, options_.staging_bytes);
    TIER_CHECK_MSG(per_stage >= 1, "layer %u: refused at submit", job.layer);
    const auto pages = static_cast<std::uint32_t>(job.page_ids.size());
    detail::PlaneRun runs[kMaxPlanesPerLayer];
    auto params = std::make_unique<detail::PageCopyParams>();
    for (std::uint32_t first = 0; first < pages; first += per_stage) {
      const std::uint32_t count = std::min(per_stage, pages - first);
      detail::MakeStage(job, first, count, staging_.data(), params.get(), runs);
      if (job.direction == detail::CopyDirection::kGather) {
        detail::GatherStageOnHost(*params);
        for (std::uint32_t q = 0; q < job.plane_count; ++q) {
          std::memcpy(job.segment + runs[q].segment_offset,
                      staging_.data() + runs[q].staging_offset, runs[q].bytes);
        }
      } else {
        for (std::uint32_t q = 0; q < job.plane_count; ++q) {
          std::memcpy(staging_.data() + runs[q].staging_offset,
                      job.segment + runs[q].segment_offset, runs[q].bytes);
        }
        detail::ScatterStageOnHost(*params);
      }
    }
  }

  const CpuEngineOptions options_;
  const std::shared_ptr<HostAllocator> host_allocator_;
  const std::shared_ptr<HostAllocator> device_allocator_;  // aligned host memory unless a test's
  std::vector<unsigned char> staging_;                     // used by one transfer at a time
  std::mutex inline_mu_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable space_cv_;
  std::deque<Task> queues_[2];  // by Direction (all in kD2h unless restores_first)
  bool stopping_ = false;
  std::thread worker_;  // last: starts after everything it uses exists
};

}  // namespace

Result<std::unique_ptr<TransferEngine>> MakeCpuTransferEngine(const CpuEngineOptions& options) {
  if (options.max_queued_transfers == 0) {
    return Status::InvalidArgument("cpu engine: max_queued_transfers is 0");
  }
  if (options.staging_bytes > (std::uint64_t{1} << 34)) {
    return Status::InvalidArgument("cpu engine: staging_bytes above 16 GiB");
  }
  std::unique_ptr<TransferEngine> engine = std::make_unique<CpuTransferEngine>(options);
  return engine;
}

}  // namespace tier::device
