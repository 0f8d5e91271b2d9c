// HostGpuPath: what the Host does on the GPU path, shown on the CPU engine (issue 27).
//
// Ordering: a device::CpuStream plays the server's stream; its work (the "last decode step's
// kernels") runs late, behind a gate the test opens. The Host's gather, scatter and state copies
// see the producer's bytes only when the request says order_after; the negative controls show
// that without it they read (or are overwritten by) what the producer had not yet written.
#include <gtest/gtest.h>
#include <tier/device/cpu_transfer_engine.h>
#include <tier/device/cuda_transfer_engine.h>
#include <tier/host/host.h>
#include <tier/host/identity.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "host_fixture.h"
#include "kv_pool.h"

namespace tier::host::test {
namespace {

constexpr std::byte kStale{0x11};      // what the pool and the state hold before the producer
constexpr std::byte kProduced{0xAB};   // what the producer's "kernels" write into the pages
constexpr std::byte kState{0xCD};      // ... and into the state buffers
constexpr std::byte kPrevOwner{0xEE};  // a restore target's previous owner's last writes

// A gate a stream's work waits on: closed until Open().
class Gate {
 public:
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// "Device" memory for the CPU engine's seam (CpuEngineOptions::device_allocator, or its
// host_allocator): counts allocations and frees; a freed block is poisoned and kept until the
// allocator goes, so a write after the free shows as a changed byte. Refuses allocations above
// `refuse_above_bytes` (0: none). Thread-safe.
class CountingAllocator final : public device::HostAllocator {
 public:
  static constexpr std::byte kPoison{0xDD};
  explicit CountingAllocator(uint64_t refuse_above_bytes = 0, uint64_t max_allocations = ~0ull)
      : refuse_above_(refuse_above_bytes), max_allocations_(max_allocations) {}
  ~CountingAllocator() override {
    for (const auto& [data, bytes] : freed_) inner_->Deallocate(data, bytes);
  }
  const char* name() const override { return "counting"; }
  bool pinned() const override { return false; }
  Result<void*> Allocate(uint64_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    if ((refuse_above_ != 0 && bytes > refuse_above_) || allocations_ >= max_allocations_) {
      return Status::NoSpace("counting allocator: refused " + std::to_string(bytes) + " bytes");
    }
    ++allocations_;
    allocated_bytes_ += bytes;
    return inner_->Allocate(bytes);
  }
  void Deallocate(void* data, uint64_t bytes) override {
    std::memset(data, static_cast<int>(kPoison), bytes);
    std::lock_guard<std::mutex> lock(mu_);
    freed_.emplace_back(static_cast<std::byte*>(data), bytes);
  }
  uint64_t calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  uint64_t allocations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return allocations_;
  }
  uint64_t allocated_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return allocated_bytes_;
  }
  uint64_t frees() const {
    std::lock_guard<std::mutex> lock(mu_);
    return freed_.size();
  }
  uint64_t BytesWrittenAfterFree() const {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t n = 0;
    for (const auto& [data, bytes] : freed_) {
      n += static_cast<uint64_t>(
          std::count_if(data, data + bytes, [](std::byte b) { return b != kPoison; }));
    }
    return n;
  }

 private:
  const std::shared_ptr<device::HostAllocator> inner_ = device::MakeAlignedHostAllocator();
  const uint64_t refuse_above_;
  const uint64_t max_allocations_;
  mutable std::mutex mu_;
  uint64_t calls_ = 0, allocations_ = 0, allocated_bytes_ = 0;
  std::vector<std::pair<std::byte*, uint64_t>> freed_;
};

// A CpuEngineOptions::before_transfer that holds the engine's worker while closed.
class WorkerGate {
 public:
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = false;
    cv_.notify_all();
  }
  void Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !closed_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
};

class HostGpuPath : public ::testing::Test {
 protected:
  static constexpr uint32_t kPages = 16;

  void OpenHost(uint64_t device_bytes, device::CpuEngineOptions engine_options = {},
                const std::function<void(HostOptions&)>& tweak = nullptr) {
    auto host = TryOpenHost(device_bytes, std::move(engine_options), tweak);
    ASSERT_TRUE(host.ok()) << host.status().ToString();
    host_ = std::move(host).value();
  }
  Result<std::unique_ptr<Host>> TryOpenHost(
      uint64_t device_bytes, device::CpuEngineOptions engine_options = {},
      const std::function<void(HostOptions&)>& tweak = nullptr) {
    // The CUDA engine's order (restores before queued seals): the Host must not rely on more.
    engine_options.restores_first = true;
    auto engine = device::MakeCpuTransferEngine(engine_options);
    if (!engine.ok()) return engine.status();
    engine_ = std::move(engine).value();
    layout_ = sim::SimPoolLayout(profile_, 1, kPages);
    auto pool = engine_->AllocatePool(layout_);
    if (!pool.ok()) return pool.status();
    pool_ = std::move(pool).value();
    std::memset(pool_.memory.data(), static_cast<int>(kStale), pool_.memory.bytes());
    HostOptions o;
    o.namespace_id = "gpu-path-test";
    o.profile = profile_;
    o.pool = {layout_, pool_.view, 0};
    o.engine = engine_;
    o.metrics = &registry_;
    o.device_capacity_bytes = device_bytes;
    o.host_capacity_bytes = 4u << 20;
    if (tweak) tweak(o);
    return Host::Open(std::move(o));
  }

  void TearDown() override {
    worker_gate_->Open();
    gate_.Open();  // a failed test must not leave the stream's work stuck
    for (Gate& g : gates_) g.Open();
    stream_.Synchronize();
    host_.reset();
  }

  // Every byte of `page` of every layer.
  bool PageIs(uint32_t page, std::byte value) const {
    for (uint32_t l = 0; l < layout_.layer_count(); ++l) {
      const std::byte* p = pool_.page(l, 0, page);
      const uint64_t n = layout_.plane(l, 0).bytes_per_page;
      if (!std::all_of(p, p + n, [&](std::byte b) { return b == value; })) return false;
    }
    return true;
  }
  void FillPageLater(uint32_t page, std::byte value) {
    std::vector<std::byte*> planes;
    for (uint32_t l = 0; l < layout_.layer_count(); ++l) planes.push_back(pool_.page(l, 0, page));
    const uint64_t n = layout_.plane(0, 0).bytes_per_page;
    stream_.Enqueue([this, planes, n, value] {
      gate_.Wait();
      for (std::byte* p : planes) std::memset(p, static_cast<int>(value), n);
    });
  }

  // State buffers shaped like the profile's, filled with `value`.
  struct Lane {
    std::vector<std::vector<std::byte>> memory;
    std::vector<StateBuffer> buffers;
  };
  Lane NewLane(std::byte value) const {
    Lane lane;
    for (StateBuffer b : sim::SimStateShapes(profile_, 1)) {
      lane.memory.emplace_back(b.bytes, value);
      b.data = lane.memory.back().data();
      lane.buffers.push_back(b);
    }
    return lane;
  }
  static bool LaneIs(const Lane& lane, std::byte value) {
    for (const auto& m : lane.memory) {
      if (!std::all_of(m.begin(), m.end(), [&](std::byte b) { return b == value; })) return false;
    }
    return true;
  }
  void FillLaneLater(Lane* lane, std::byte value) {
    stream_.Enqueue([this, lane, value] {
      gate_.Wait();
      for (auto& m : lane->memory) std::fill(m.begin(), m.end(), value);
    });
  }

  void PollFor(int ms) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until) {
      host_->WaitForWork(2 * 1000 * 1000);
      PollOnce();
    }
  }
  void PollOnce() {
    std::vector<Event> events;
    host_->Poll(&events);
    for (Event& e : events) events_.push_back(std::move(e));
  }
  void Settle() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    PollOnce();
    while (host_->Busy() && std::chrono::steady_clock::now() < until) {
      host_->WaitForWork(2 * 1000 * 1000);
      PollOnce();
    }
    ASSERT_FALSE(host_->Busy());
  }
  // The stream's work waits behind `gate`. Ordered, the Host's work must wait for it: the Host
  // runs a while, `check_waiting` looks, then the gate opens. Not ordered, the Host finishes
  // first. Then the stream drains.
  void RunWithStreamHeld(Gate& gate, bool ordered, const std::function<void()>& check_waiting) {
    if (ordered) {
      PollFor(30);
      check_waiting();
      gate.Open();
      Settle();
    } else {
      Settle();
      gate.Open();
    }
    stream_.Synchronize();
  }
  bool SawSealed(uint64_t id) const {
    return std::any_of(events_.begin(), events_.end(),
                       [&](const Event& e) { return e.kind == Event::kSealed && e.id == id; });
  }

  // Seals `blocks` (one page, 64 tokens) from `page` and `lane`'s state.
  Sealed SealOne(const std::vector<uint64_t>& blocks, uint32_t page, const Lane& lane) {
    const std::vector<uint32_t> pages{page};
    SealRequest r;
    r.blocks = blocks;
    r.tokens = 64;
    r.pages = pages;
    r.state = lane.buffers;
    r.now_ns = 1;
    return host_->Seal(r);
  }
  tier_key KeyOf(const std::vector<uint64_t>& blocks) const {
    return PrefixKey("gpu-path-test", blocks);
  }

  // Seals one page (64 tokens) of blocks {7}: page 0 and `lane`'s state.
  Sealed SealPage0(const Lane& lane, device::NativeStream order_after) {
    SealRequest r;
    r.blocks = blocks_;
    r.tokens = 64;
    r.pages = page0_;
    r.state = lane.buffers;
    r.now_ns = 1;
    r.order_after = order_after;
    return host_->Seal(r);
  }
  // Admits `blocks` into `lane` with no pages to hand over (a Device hit takes none): the
  // immediate answer.
  Admission AdmitWithoutPages(const std::vector<uint64_t>& blocks, const Lane& lane,
                              device::NativeStream order_after = nullptr) {
    AdmitRequest r;
    r.blocks = blocks;
    r.now_ns = 2;
    r.allocate_pages = [](uint32_t, std::vector<uint32_t>*) { return false; };
    r.state = lane.buffers;
    r.order_after = order_after;
    return host_->Admit(r);
  }
  // Admits blocks {7} into page 5 and `lane`, and runs the Host until it ends.
  Admission AdmitIntoPage5(Lane* lane, device::NativeStream order_after) {
    AdmitRequest r;
    r.blocks = blocks_;
    r.now_ns = 2;
    r.allocate_pages = [](uint32_t n, std::vector<uint32_t>* pages) {
      if (n != 1) return false;
      pages->assign({5});
      return true;
    };
    r.state = lane->buffers;
    r.order_after = order_after;
    Admission a = host_->Admit(r);
    if (a.state == AdmissionState::kPending) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      bool ended = false;
      while (!ended && std::chrono::steady_clock::now() < until) {
        host_->WaitForWork(2 * 1000 * 1000);
        std::vector<Event> events;
        host_->Poll(&events);
        for (Event& e : events) {
          if (e.kind == Event::kAdmissionReady && e.id == a.id) {
            a = e.admission;
            ended = true;
          }
        }
      }
    }
    if (a.state == AdmissionState::kReady) {
      EXPECT_TRUE(a.state_copy.Wait().ok());
    }
    return a;
  }

  ModelProfile profile_ = TinyProfile();
  MetricsRegistry registry_;
  std::shared_ptr<device::TransferEngine> engine_;
  device::PoolLayout layout_;
  device::DevicePool pool_;
  std::unique_ptr<Host> host_;
  std::vector<Event> events_;
  device::CpuStream stream_;  // the server's stream
  Gate gate_;                 // its work waits on it
  std::deque<Gate> gates_;    // more gates (NewGate), opened at TearDown too
  Gate& NewGate() { return gates_.emplace_back(); }
  const std::vector<uint64_t> blocks_{7};
  std::shared_ptr<WorkerGate> worker_gate_ = std::make_shared<WorkerGate>();
  const std::vector<uint32_t> page0_{0};
};

// A Host seal (a gather into Host memory): ordered after the producer, it waits for it and holds
// what the producer wrote; a later restore brings exactly that back.
TEST_F(HostGpuPath, HostSealOrderedAfterTheServersStreamSeesItsBytes) {
  OpenHost(/*device_bytes=*/0);
  Lane sealed_state = NewLane(kStale);
  FillPageLater(0, kProduced);
  FillLaneLater(&sealed_state, kState);
  const Sealed sealed = SealPage0(sealed_state, stream_.handle());
  ASSERT_TRUE(sealed.status.ok()) << sealed.status.ToString();
  EXPECT_FALSE(sealed.on_device);
  PollFor(30);
  EXPECT_FALSE(sealed.copied.IsDone()) << "the gather ran before the producer's work";
  EXPECT_FALSE(SawSealed(sealed.id));
  gate_.Open();
  Settle();
  EXPECT_TRUE(SawSealed(sealed.id));
  Lane lane = NewLane(kStale);
  const Admission a = AdmitIntoPage5(&lane, nullptr);
  ASSERT_EQ(a.state, AdmissionState::kReady);
  EXPECT_EQ(a.outcome, Outcome::kHostRestore);
  EXPECT_TRUE(PageIs(5, kProduced)) << "the seal gathered stale pages";
  EXPECT_TRUE(LaneIs(lane, kState)) << "the seal copied stale state";
}

// The negative control: the same seal without order_after gathers before the producer ran.
TEST_F(HostGpuPath, HostSealNotOrderedReadsStaleBytes) {
  OpenHost(/*device_bytes=*/0);
  Lane sealed_state = NewLane(kStale);
  FillPageLater(0, kProduced);
  FillLaneLater(&sealed_state, kState);
  const Sealed sealed = SealPage0(sealed_state, nullptr);
  ASSERT_TRUE(sealed.status.ok()) << sealed.status.ToString();
  Settle();  // the copies do not wait for the stream
  EXPECT_TRUE(SawSealed(sealed.id));
  gate_.Open();
  stream_.Synchronize();
  Lane lane = NewLane(kPrevOwner);
  const Admission a = AdmitIntoPage5(&lane, nullptr);
  ASSERT_EQ(a.state, AdmissionState::kReady);
  EXPECT_TRUE(PageIs(5, kStale));
  EXPECT_TRUE(LaneIs(lane, kStale));
}

// A Device seal copies the state on the device: ordered, the copy holds the producer's state,
// and a Device hit brings that into a lane; unordered it holds the stale state.
TEST_F(HostGpuPath, DeviceSealStateCopyHonoursOrderAfter) {
  for (const bool ordered : {true, false}) {
    SCOPED_TRACE(ordered ? "ordered" : "not ordered");
    OpenHost(/*device_bytes=*/1u << 20);
    Gate& gate = NewGate();
    Lane sealed_state = NewLane(kStale);
    stream_.Enqueue([&] {
      gate.Wait();
      for (auto& m : sealed_state.memory) std::fill(m.begin(), m.end(), kState);
    });
    const Sealed sealed = SealPage0(sealed_state, ordered ? stream_.handle() : nullptr);
    ASSERT_TRUE(sealed.status.ok()) << sealed.status.ToString();
    EXPECT_TRUE(sealed.on_device);
    RunWithStreamHeld(gate, ordered, [&] {
      EXPECT_FALSE(sealed.copied.IsDone()) << "the state copy ran before the producer's work";
    });
    Lane lane = NewLane(kPrevOwner);
    Admission a = AdmitWithoutPages(blocks_, lane);
    ASSERT_EQ(a.state, AdmissionState::kReady);
    EXPECT_EQ(a.outcome, Outcome::kDeviceHit);
    ASSERT_TRUE(a.state_copy.Wait().ok());
    EXPECT_TRUE(LaneIs(lane, ordered ? kState : kStale));
    host_->Release(a.id);
    Settle();
    host_.reset();
  }
}

// A restore into pages whose previous owner's kernels still run: ordered after that stream, the
// scatter lands last and the pages hold the checkpoint; unordered, the old owner overwrites it.
TEST_F(HostGpuPath, RestoreOrderedAfterThePreviousOwnersWork) {
  for (const bool ordered : {true, false}) {
    SCOPED_TRACE(ordered ? "ordered" : "not ordered");
    OpenHost(/*device_bytes=*/0);
    Lane sealed_state = NewLane(kState);
    std::memset(pool_.page(0, 0, 0), static_cast<int>(kProduced),
                layout_.plane(0, 0).bytes_per_page);
    std::memset(pool_.page(1, 0, 0), static_cast<int>(kProduced),
                layout_.plane(1, 0).bytes_per_page);
    const Sealed sealed = SealPage0(sealed_state, nullptr);
    ASSERT_TRUE(sealed.status.ok());
    Settle();
    Gate& gate = NewGate();
    std::vector<std::byte*> planes{pool_.page(0, 0, 5), pool_.page(1, 0, 5)};
    const uint64_t n = layout_.plane(0, 0).bytes_per_page;
    stream_.Enqueue([&gate, planes, n] {
      gate.Wait();
      for (std::byte* p : planes) std::memset(p, static_cast<int>(kPrevOwner), n);
    });
    Lane lane = NewLane(kStale);
    AdmitRequest r;
    r.blocks = blocks_;
    r.now_ns = 2;
    r.allocate_pages = [](uint32_t, std::vector<uint32_t>* pages) {
      pages->assign({5});
      return true;
    };
    r.state = lane.buffers;
    r.order_after = ordered ? stream_.handle() : nullptr;
    Admission a = host_->Admit(r);
    if (ordered) {
      ASSERT_EQ(a.state, AdmissionState::kPending);
    }
    RunWithStreamHeld(gate, ordered, [&] {
      EXPECT_FALSE(std::any_of(events_.begin(), events_.end(), [&](const Event& e) {
        return e.kind == Event::kAdmissionReady && e.id == a.id;
      })) << "the scatter ran before the previous owner's work";
    });
    EXPECT_TRUE(PageIs(5, ordered ? kProduced : kPrevOwner));
    host_->Release(a.id);
    Settle();
    host_.reset();
  }
}

// A Device hit's state copy into a lane whose buffers the server's kernels still read (the
// lane's previous request): ordered after that stream, the copy lands after the read; not
// ordered (the negative control), the server's read sees the checkpoint's state too early.
TEST_F(HostGpuPath, DeviceHitStateCopyWaitsForTheLanesReaders) {
  for (const bool ordered : {true, false}) {
    SCOPED_TRACE(ordered ? "ordered" : "not ordered");
    OpenHost(/*device_bytes=*/1u << 20);
    Lane sealed_state = NewLane(kState);
    ASSERT_TRUE(SealPage0(sealed_state, nullptr).on_device);
    Settle();
    Lane lane = NewLane(kPrevOwner);
    Gate& gate = NewGate();
    std::vector<std::byte> seen;  // what the previous request's kernel read from the lane
    stream_.Enqueue([&gate, &lane, &seen] {
      gate.Wait();
      seen = lane.memory[0];
    });
    Admission a = AdmitWithoutPages(blocks_, lane, ordered ? stream_.handle() : nullptr);
    ASSERT_EQ(a.outcome, Outcome::kDeviceHit);
    if (ordered) {
      PollFor(30);
      EXPECT_FALSE(a.state_copy.IsDone()) << "the copy ran before the lane's reader";
    } else {
      ASSERT_TRUE(a.state_copy.Wait().ok());
    }
    gate.Open();
    stream_.Synchronize();
    ASSERT_TRUE(a.state_copy.Wait().ok());
    ASSERT_FALSE(seen.empty());
    EXPECT_EQ(seen.front(), ordered ? kPrevOwner : kState);
    EXPECT_TRUE(LaneIs(lane, kState));
    host_->Release(a.id);
    Settle();
    host_.reset();
  }
}

// A handle the CPU engine does not know is refused, and nothing is taken.
TEST_F(HostGpuPath, UnknownStreamHandleIsRefused) {
  OpenHost(/*device_bytes=*/0);
  Lane sealed_state = NewLane(kState);
  int not_a_stream = 0;
  const Sealed sealed = SealPage0(sealed_state, &not_a_stream);
  EXPECT_EQ(sealed.status.code(), TIER_INVALID_ARGUMENT) << sealed.status.ToString();
  EXPECT_FALSE(host_->Describe(blocks_).has_value());
}

// Issue 27, defect 2: the Device tier refuses a pool whose planes the engine cannot address (on
// CUDA: cudaPointerGetAttributes says host memory); the CPU engine's seam stands in for it.
TEST_F(HostGpuPath, OpenRefusesPoolPlanesTheEngineCannotAddress) {
  device::CpuEngineOptions options;
  // pool_ is allocated (on this engine) before Host::Open checks it: refuse layer 1's plane.
  options.check_device_memory = [this](const void* ptr, uint64_t) {
    return layout_.layer_count() > 1 && ptr == pool_.view.plane_base[1][0]
               ? Status::InvalidArgument("pageable host memory, not device memory")
               : Status::Ok();
  };
  auto host = TryOpenHost(0, options);
  ASSERT_FALSE(host.ok());
  EXPECT_EQ(host.status().code(), TIER_INVALID_ARGUMENT);
  EXPECT_NE(host.status().message().find("KV pool layer 1 plane 0 (kv)"), std::string::npos)
      << host.status().ToString();
  EXPECT_NE(host.status().message().find("pageable host memory"), std::string::npos);
}

// Issue 27, defect 4: Device placements take their state memory from the arena made at Open;
// seals, device hits and evictions allocate and free no device memory.
TEST_F(HostGpuPath, SealHitAndEvictAllocateNoDeviceMemory) {
  auto device_memory = std::make_shared<CountingAllocator>();
  OpenHost(/*device_bytes=*/1u << 20, {.device_allocator = device_memory});
  const uint64_t at_open = device_memory->allocations();
  EXPECT_EQ(at_open, 2u) << "the pool and the Device tier's arena";
  for (uint32_t i = 0; i < 4; ++i) {
    const std::vector<uint64_t> blocks{100 + i};
    Lane state = NewLane(kState);
    const Sealed sealed = SealOne(blocks, i, state);
    ASSERT_TRUE(sealed.status.ok()) << sealed.status.ToString();
    ASSERT_TRUE(sealed.on_device);
    Settle();
    Lane lane = NewLane(kStale);
    Admission a = AdmitWithoutPages(blocks, lane);
    ASSERT_EQ(a.outcome, Outcome::kDeviceHit);
    ASSERT_TRUE(a.state_copy.Wait().ok());
    EXPECT_TRUE(LaneIs(lane, kState));
    host_->Release(a.id);
    EXPECT_TRUE(host_->Evict(KeyOf(blocks)));
    Settle();
    EXPECT_FALSE(host_->Describe(blocks).has_value());
  }
  EXPECT_EQ(device_memory->allocations(), at_open) << "a seal or a hit allocated device memory";
  EXPECT_EQ(device_memory->frees(), 0u) << "an eviction freed device memory";
}

// A Device seal that runs out of arena part-way (the StateImage fits, the hidden state does not)
// goes to Host; what it took is not handed back under the copy still queued into it (the slow
// worker runs it late), and no device memory is freed before Close.
TEST_F(HostGpuPath, PartialDeviceSealFreesNothingUnderItsCopy) {
  profile_.state_image = {{"recurrent", 3000}};
  profile_.hidden_state_bytes = 2000;
  auto device_memory = std::make_shared<CountingAllocator>();
  device::CpuEngineOptions options;
  options.device_allocator = device_memory;
  options.before_transfer = [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  OpenHost(/*device_bytes=*/1u << 20, options, [](HostOptions& o) { o.device_state_bytes = 4096; });
  Lane state = NewLane(kState);
  const Sealed sealed = SealOne({9}, 0, state);
  ASSERT_TRUE(sealed.status.ok()) << sealed.status.ToString();
  EXPECT_FALSE(sealed.on_device) << "3000 + 2000 bytes do not fit a 4096-byte arena";
  Settle();
  ASSERT_TRUE(engine_->Synchronize().ok());
  EXPECT_EQ(device_memory->frees(), 0u);
  host_.reset();
  ASSERT_TRUE(engine_->Synchronize().ok());
  EXPECT_EQ(device_memory->BytesWrittenAfterFree(), 0u) << "a copy wrote into freed memory";
}

// An evicted Device placement's memory is reused only after the copies that read it: while a
// device hit's state copy is still queued, the arena (room for one placement) stays taken and the
// next seal goes to Host; once the copy is done, seals go to Device again.
TEST_F(HostGpuPath, EvictedPlacementMemoryWaitsForItsCopies) {
  profile_.state_image = {{"recurrent", 3000}};
  profile_.hidden_state_bytes = 100;
  std::shared_ptr<WorkerGate> gate = worker_gate_;
  device::CpuEngineOptions options;
  options.before_transfer = [gate] { gate->Pass(); };
  OpenHost(/*device_bytes=*/1u << 20, options, [](HostOptions& o) { o.device_state_bytes = 4096; });
  Lane state = NewLane(kState);
  ASSERT_TRUE(SealOne({1}, 0, state).on_device);
  Settle();
  gate->Close();
  Lane lane = NewLane(kStale);
  const std::vector<uint64_t> one{1};
  Admission a = AdmitWithoutPages(one, lane);
  ASSERT_EQ(a.outcome, Outcome::kDeviceHit);
  EXPECT_FALSE(a.state_copy.IsDone());
  host_->Release(a.id);
  EXPECT_TRUE(host_->Evict(KeyOf(one)));
  PollOnce();
  EXPECT_FALSE(host_->Describe(one).has_value());
  EXPECT_FALSE(SealOne({2}, 1, state).on_device) << "the arena was reused under a queued copy";
  gate->Open();
  ASSERT_TRUE(a.state_copy.Wait().ok());
  EXPECT_TRUE(LaneIs(lane, kState));
  Settle();
  EXPECT_TRUE(SealOne({3}, 2, state).on_device);
  Settle();
}

// Issue 27, defect 3: the Host's memory is pinned at Open (its whole bound, one chunk when the
// system gives it), reported, and never again: seals allocate nothing.
TEST_F(HostGpuPath, HostMemoryIsPinnedAtOpenNotAtTheFirstSeal) {
  auto host_memory = std::make_shared<CountingAllocator>();
  OpenHost(/*device_bytes=*/0, {.host_allocator = host_memory},
           [](HostOptions& o) { o.host_memory_bytes = 8u << 20; });
  const uint64_t at_open = host_memory->calls();
  EXPECT_EQ(at_open, 1u) << "one chunk of the whole bound";
  EXPECT_EQ(host_memory->allocated_bytes(), 8u << 20);
  const HostStats stats = host_->Stats();
  EXPECT_EQ(stats.host_pinned_bytes, 8u << 20);
  EXPECT_EQ(stats.host_pin_chunks, 1u);
  for (uint32_t i = 0; i < 4; ++i) {
    Lane state = NewLane(kState);
    const Sealed sealed = SealOne({200 + i}, i, state);
    ASSERT_TRUE(sealed.status.ok()) << sealed.status.ToString();
    EXPECT_FALSE(sealed.on_device);
    Settle();
    EXPECT_TRUE(host_->Describe(std::vector<uint64_t>{200 + i}).has_value());
  }
  EXPECT_EQ(host_memory->calls(), at_open) << "a seal asked the allocator for host memory";
}

// When the system does not give the whole bound at once, Open keeps what it could pin in smaller
// chunks, says so, and seals within it without asking again (a failed pin is never retried).
TEST_F(HostGpuPath, OpenKeepsWhatItCouldPin) {
  // Nothing above 3 MiB, and only two allocations: 8 and 4 MiB are refused, two 2 MiB chunks
  // succeed, the third 2 MiB and every 1 MiB and 512 KiB try are refused.
  auto host_memory = std::make_shared<CountingAllocator>(3u << 20, 2);
  OpenHost(/*device_bytes=*/0, {.host_allocator = host_memory},
           [](HostOptions& o) { o.host_memory_bytes = 8u << 20; });
  const HostStats stats = host_->Stats();
  EXPECT_EQ(stats.host_pinned_bytes, 4u << 20);
  EXPECT_EQ(stats.host_pin_chunks, 2u);
  EXPECT_EQ(host_memory->allocated_bytes(), 4u << 20);
  const uint64_t at_open = host_memory->calls();
  Lane state = NewLane(kState);
  const Sealed sealed = SealOne({300}, 0, state);
  ASSERT_TRUE(sealed.status.ok()) << sealed.status.ToString();
  Settle();
  EXPECT_TRUE(host_->Describe(std::vector<uint64_t>{300}).has_value());
  EXPECT_EQ(host_memory->calls(), at_open);
}

// Nothing pinned at all is an error at Open naming it, not a Host that fails every seal later.
TEST_F(HostGpuPath, OpenFailsWhenNoHostMemoryCanBePinned) {
  auto host_memory = std::make_shared<CountingAllocator>(0, 0);
  auto host = TryOpenHost(0, {.host_allocator = host_memory},
                          [](HostOptions& o) { o.host_memory_bytes = 8u << 20; });
  ASSERT_FALSE(host.ok());
  EXPECT_EQ(host.status().code(), TIER_NO_SPACE);
  EXPECT_NE(host.status().message().find("the system gave none"), std::string::npos)
      << host.status().ToString();
}

// ---- The Host's own paths on an engine: seal, a Device hit, demotion, a Host restore -----------

// What a server would read back after the scenario (device memory read with CopyToHost).
struct ScenarioBytes {
  std::vector<std::byte> sealed_pages, sealed_state;      // what was sealed
  std::vector<std::byte> hit_state;                       // the lane after the Device hit
  std::vector<std::byte> restored_pages, restored_state;  // after the Host restore into page 5
  std::string failure;                                    // "" when every step worked
};

ScenarioBytes Failed(std::string why) {
  ScenarioBytes out;
  out.failure = std::move(why);
  return out;
}

std::vector<std::byte> ReadBack(device::TransferEngine& engine, const std::byte* src,
                                uint64_t bytes) {
  std::vector<std::byte> out(bytes);
  auto t = engine.CopyToHost(out.data(), src, bytes);
  EXPECT_TRUE(t.ok() && t->Wait().ok());
  return out;
}

void WriteDevice(device::TransferEngine& engine, std::byte* dst, const std::vector<std::byte>& v) {
  auto t = engine.CopyToDevice(dst, v.data(), v.size());
  EXPECT_TRUE(t.ok() && t->Wait().ok());
}

// Seal A (Device), hit A, seal B (A is demoted to Host: the Device budget holds one), admit A
// (a Host restore into page 5). Every buffer is the engine's device memory.
ScenarioBytes RunHostScenario(std::shared_ptr<device::TransferEngine> engine) {
  ScenarioBytes out;
  const ModelProfile profile = TinyProfile();
  const device::PoolLayout layout = sim::SimPoolLayout(profile, 1, 16);
  auto pool = engine->AllocatePool(layout);
  if (!pool.ok()) return Failed("pool: " + pool.status().ToString());
  std::mt19937_64 rng(42);
  for (uint32_t l = 0; l < layout.layer_count(); ++l) {
    std::vector<std::byte> plane(layout.plane_pool_bytes(l, 0));
    for (std::byte& b : plane) b = static_cast<std::byte>(rng());
    WriteDevice(*engine, pool->view.plane_base[l][0], plane);
  }
  auto new_state = [&](bool fill) {
    std::vector<device::DeviceBuffer> memory;
    std::vector<StateBuffer> buffers;
    for (StateBuffer b : sim::SimStateShapes(profile, 1)) {
      memory.push_back(std::move(engine->AllocateDevice(b.bytes).value()));
      b.data = memory.back().data();
      std::vector<std::byte> bytes(b.bytes, std::byte{0});
      if (fill) {
        for (std::byte& x : bytes) x = static_cast<std::byte>(rng());
      }
      WriteDevice(*engine, b.data, bytes);
      buffers.push_back(b);
    }
    return std::make_pair(std::move(memory), buffers);
  };
  auto read_state = [&](const std::vector<StateBuffer>& buffers) {
    std::vector<std::byte> all;
    for (const StateBuffer& b : buffers) {
      auto part = ReadBack(*engine, b.data, b.bytes);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  };
  auto read_page = [&](uint32_t page) {
    std::vector<std::byte> all;
    for (uint32_t l = 0; l < layout.layer_count(); ++l) {
      auto part = ReadBack(*engine, pool->page(l, 0, page), layout.plane(l, 0).bytes_per_page);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  };
  MetricsRegistry registry;
  HostOptions o;
  o.namespace_id = "gpu-path-scenario";
  o.profile = profile;
  o.pool = {layout, pool->view, 0};
  o.engine = engine;
  o.metrics = &registry;
  o.device_capacity_bytes = 12000;  // one checkpoint of one page
  o.host_capacity_bytes = 4u << 20;
  auto opened = Host::Open(std::move(o));
  if (!opened.ok()) return Failed("open: " + opened.status().ToString());
  Host& host = *opened.value();
  auto settle = [&] {
    std::vector<Event> events;
    for (int i = 0; i < 5000 && (host.Busy() || i == 0); ++i) {
      host.WaitForWork(1000 * 1000);
      host.Poll(&events);
    }
    return events;
  };
  const std::vector<uint64_t> a{1}, b{2};
  auto [a_memory, a_state] = new_state(true);
  out.sealed_pages = read_page(0);
  out.sealed_state = read_state(a_state);
  const std::vector<uint32_t> page0{0}, page1{1};
  SealRequest seal;
  seal.blocks = a;
  seal.tokens = 64;
  seal.pages = page0;
  seal.state = a_state;
  seal.now_ns = 1;
  const Sealed sealed_a = host.Seal(seal);
  if (!sealed_a.status.ok() || !sealed_a.on_device) return Failed("seal A not on Device");
  settle();
  auto [hit_memory, hit_lane] = new_state(false);
  AdmitRequest hit;
  hit.blocks = a;
  hit.now_ns = 2;
  hit.allocate_pages = [](uint32_t, std::vector<uint32_t>*) { return false; };
  hit.state = hit_lane;
  const Admission h = host.Admit(hit);
  if (h.outcome != Outcome::kDeviceHit) return Failed("no Device hit");
  if (!h.state_copy.Wait().ok()) return Failed("hit copy failed");
  out.hit_state = read_state(hit_lane);
  host.Release(h.id);
  auto [b_memory, b_state] = new_state(true);
  seal.blocks = b;
  seal.pages = page1;
  seal.state = b_state;
  seal.now_ns = 3;
  if (!host.Seal(seal).status.ok()) return Failed("seal B failed");
  settle();
  const auto info = host.Describe(a);
  if (!info || info->on_device || !info->on_host) return Failed("A was not demoted to Host");
  auto [lane_memory, lane] = new_state(false);
  AdmitRequest restore;
  restore.blocks = a;
  restore.now_ns = 4;
  restore.allocate_pages = [](uint32_t n, std::vector<uint32_t>* pages) {
    pages->assign({5});
    return n == 1;
  };
  restore.state = lane;
  Admission r = host.Admit(restore);
  for (int i = 0; i < 5000 && r.state == AdmissionState::kPending; ++i) {
    host.WaitForWork(1000 * 1000);
    std::vector<Event> events;
    host.Poll(&events);
    for (const Event& e : events) {
      if (e.kind == Event::kAdmissionReady && e.id == r.id) r = e.admission;
    }
  }
  if (r.state != AdmissionState::kReady || r.outcome != Outcome::kHostRestore) {
    return Failed("A was not restored from Host");
  }
  out.restored_pages = read_page(5);
  out.restored_state = read_state(lane);
  host.Release(r.id);
  settle();
  return out;
}

void ExpectScenarioExact(const ScenarioBytes& s) {
  ASSERT_EQ(s.failure, "");
  EXPECT_EQ(s.hit_state, s.sealed_state) << "the Device hit's state";
  EXPECT_EQ(s.restored_pages, s.sealed_pages) << "the Host restore's pages";
  EXPECT_EQ(s.restored_state, s.sealed_state) << "the Host restore's state";
}

TEST(HostOnEngine, SealHitDemoteRestoreAreByteExactOnTheCpu) {
  auto cpu = device::MakeCpuTransferEngine({.restores_first = true});
  ASSERT_TRUE(cpu.ok());
  ExpectScenarioExact(RunHostScenario(std::move(cpu).value()));
}

// The same scenario on a GPU (skips without one), byte-exact against the CPU engine's run.
TEST(HostOnEngine, SealHitDemoteRestoreOnCudaMatchTheCpu) {
  auto cuda = device::MakeCudaTransferEngine({});
  if (!cuda.ok() && cuda.status().code() == TIER_UNSUPPORTED) {
    GTEST_SKIP() << "no CUDA device present: " << cuda.status().message();
  }
  ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
  const ScenarioBytes gpu = RunHostScenario(std::move(cuda).value());
  ExpectScenarioExact(gpu);
  auto cpu = device::MakeCpuTransferEngine({});
  ASSERT_TRUE(cpu.ok());
  const ScenarioBytes reference = RunHostScenario(std::move(cpu).value());
  ASSERT_EQ(reference.failure, "");
  EXPECT_EQ(gpu.sealed_pages, reference.sealed_pages) << "the same random inputs on both paths";
  EXPECT_EQ(gpu.restored_pages, reference.restored_pages);
  EXPECT_EQ(gpu.restored_state, reference.restored_state);
  EXPECT_EQ(gpu.hit_state, reference.hit_state);
}

}  // namespace
}  // namespace tier::host::test
