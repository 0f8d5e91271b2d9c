#include "host_fixture.h"

#include <tier/device/cpu_transfer_engine.h>
#include <tier/host/identity.h>

#include <chrono>
#include <sstream>

namespace tier::host::test {

ModelProfile TinyProfile() {
  ModelProfile p;
  p.name = "tiny";
  p.model = "tiny";
  p.gpu = "none";
  p.kv_dtype = "int8";
  p.tokens_per_page = 64;
  p.full_attention_layers = 2;
  p.kv_bytes_per_token = 128;
  p.mtp_layers = 0;
  p.state_image = {{"recurrent", 1000}};
  p.hidden_state_bytes = 100;
  p.prefill_chunk_tokens = 2048;
  p.prefill_chunk_ns = 1000;
  p.prefill_token_ns = 1000;
  p.attention_pair_ns = 10;
  p.decode_token_ns = 1000000;
  p.transfer_batch_ns = 100;
  p.transfer_op_ns = 10;
  p.d2h_ns_per_byte = 0.01;
  p.h2d_ns_per_byte = 0.01;
  return p;
}

Result<std::unique_ptr<Host>> HostTest::TryOpen(const std::string& plugin,
                                                const ProviderOptions& options,
                                                const std::function<void(HostOptions&)>& tweak) {
  if (engine_ == nullptr) {
    auto engine = device::MakeCpuTransferEngine({});
    if (!engine.ok()) return engine.status();
    engine_ = std::move(engine).value();
    auto pool = sim::KvPool::Create(engine_.get(), profile_, 1, 4096);
    if (!pool.ok()) return pool.status();
    pool_ = std::move(pool).value();
  }
  HostOptions o;
  o.plugin = plugin;
  o.provider_options = options;
  o.namespace_id = namespace_id_;
  o.profile = profile_;
  o.pool = pool_->view();
  o.engine = engine_;
  o.metrics = &registry_;
  o.provider_timeout_ns = 5ull * 1000 * 1000 * 1000;
  o.close_timeout_ns = 2ull * 1000 * 1000 * 1000;
  if (tweak) tweak(o);
  return Host::Open(std::move(o));
}

void HostTest::Open(const std::string& plugin, const ProviderOptions& options,
                    uint64_t device_bytes, uint64_t host_bytes,
                    const std::function<void(HostOptions&)>& tweak) {
  auto host = TryOpen(plugin, options, [&](HostOptions& o) {
    o.device_capacity_bytes = device_bytes;
    o.host_capacity_bytes = host_bytes;
    if (tweak) tweak(o);
  });
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  host_ = std::move(host).value();
}

void HostTest::TearDown() {
  host_.reset();
  lanes_.clear();
  sealing_.clear();
}

std::vector<uint64_t> HostTest::Blocks(uint64_t base, size_t n) {
  std::vector<uint64_t> blocks;
  for (size_t i = 0; i < n; ++i) blocks.push_back(base + i);
  return blocks;
}

void HostTest::Apply(const Event& e) {
  events_.push_back(e);
  switch (e.kind) {
    case Event::kPagesReleased:
      pool_->ReleasedByHost(e.pages);
      break;
    case Event::kSealed:
      sealing_.erase(e.id);
      break;
    case Event::kAdmissionReady:
    case Event::kAdmissionRoot:
    case Event::kAdmissionCancelled:
      ended_[e.id] = e.admission;
      break;
    case Event::kPrefetchDone:
      break;
  }
}

void HostTest::PollOnce() {
  std::vector<Event> events;
  host_->Poll(&events);
  for (const Event& e : events) Apply(e);
}

void HostTest::Settle(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  PollOnce();
  while (host_->Busy() && std::chrono::steady_clock::now() < deadline) {
    host_->WaitForWork(5 * 1000 * 1000);
    PollOnce();
  }
  EXPECT_FALSE(host_->Busy()) << "the Host did not settle within " << timeout_ms << " ms";
}

Sealed HostTest::SealNow(const std::vector<uint64_t>& blocks, uint64_t now_s, bool shared_prefix) {
  const uint64_t tokens = blocks.size() * 512;
  std::vector<uint32_t> pages;
  if (!pool_->Allocate(static_cast<uint32_t>(tokens / 64), &pages)) {
    Sealed refused;
    refused.status = Status::NoSpace("the test pool has no free pages");
    return refused;
  }
  pool_->Fill(PrefixHashes(blocks), 512, 0, pages);
  auto state = pool_->NewStateSet();
  EXPECT_TRUE(state.ok());
  sim::KvPool::FillState(PrefixKey(namespace_id_, TenantBlocks(tenant_, blocks)),
                         state.value().get());
  SealRequest r;
  r.blocks = blocks;
  r.tenant = tenant_;
  r.tokens = tokens;
  r.shared_prefix = shared_prefix;
  r.pages = pages;
  r.state = state.value()->buffers;
  r.now_ns = now_s * 1000000000ull;
  Sealed sealed = host_->Seal(r);
  if (sealed.status.ok() && !sealed.existed) {
    pool_->HeldByHost(pages);
    sealing_[sealed.id] = std::move(state).value();
  }
  pool_->Unref(pages);  // the request that computed it is done
  return sealed;
}

bool HostTest::Seal(const std::vector<uint64_t>& blocks, uint64_t now_s, bool shared_prefix) {
  const Sealed sealed = SealNow(blocks, now_s, shared_prefix);
  Settle();
  return sealed.status.ok();
}

void HostTest::SealAndPushToCold(const std::vector<uint64_t>& blocks) {
  ASSERT_TRUE(Seal(blocks, 1));
  for (uint64_t i = 0; i < 3; ++i) ASSERT_TRUE(Seal(Blocks(100 + 10 * i, 1), 2 + i));
  ASSERT_EQ(PlacementsOf(blocks), kC) << "pushed down by three newer checkpoints";
}

Admission HostTest::Admit(const std::vector<uint64_t>& blocks, uint64_t now_s) {
  auto lane = pool_->NewStateSet();
  EXPECT_TRUE(lane.ok());
  AdmitRequest r;
  r.blocks = blocks;
  r.tenant = tenant_;
  r.now_ns = now_s * 1000000000ull;
  r.allocate_pages = [this](uint32_t n, std::vector<uint32_t>* pages) {
    return pool_->Allocate(n, pages);
  };
  r.state = lane.value()->buffers;
  Admission a = host_->Admit(r);
  lanes_[a.id] = std::move(lane).value();
  if (a.state != AdmissionState::kPending) TakePages(a);
  return a;
}

void HostTest::TakePages(const Admission& a) {
  pool_->Unref(a.unused_pages);
  if (a.state != AdmissionState::kReady) return;
  if (a.pages_shared) pool_->Ref(a.pages);
  held_pages_[a.id] = a.pages;
}

std::optional<Admission> HostTest::WaitFor(uint64_t id, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (ended_.count(id) == 0 && std::chrono::steady_clock::now() < deadline) {
    host_->WaitForWork(5 * 1000 * 1000);
    PollOnce();
  }
  auto it = ended_.find(id);
  if (it == ended_.end()) return std::nullopt;
  TakePages(it->second);
  return it->second;
}

bool HostTest::Check(const std::vector<uint64_t>& blocks, const Admission& a) {
  if (a.pages_shared) {
    EXPECT_TRUE(a.state_copy.Wait().ok());
  }
  const size_t cached_blocks = a.cached_tokens / 512;
  const std::vector<uint64_t> hashes =
      PrefixHashes(std::span(blocks).first(std::min(cached_blocks, blocks.size())));
  const bool exact =
      pool_->Check(hashes, 512, a.pages) && sim::KvPool::CheckState(a.key, *lanes_[a.id]);
  ++verified_;
  if (!exact) ++mismatched_;
  host_->ReportVerification(a.id, exact);
  return exact;
}

Admission HostTest::AdmitAndWait(const std::vector<uint64_t>& blocks, uint64_t now_s) {
  Admission a = Admit(blocks, now_s);
  if (a.state == AdmissionState::kPending) {
    std::optional<Admission> ended = WaitFor(a.id);
    EXPECT_TRUE(ended.has_value()) << "admission " << a.id << " never ended";
    if (!ended) return a;
    a = *ended;
  }
  if (a.state == AdmissionState::kReady) Check(blocks, a);
  return a;
}

void HostTest::Release(const Admission& a) {
  auto it = held_pages_.find(a.id);
  if (it != held_pages_.end()) {
    pool_->Unref(it->second);
    held_pages_.erase(it);
  }
  host_->Release(a.id);
  lanes_.erase(a.id);
  Settle();
}

std::optional<CheckpointInfo> HostTest::Info(const std::vector<uint64_t>& blocks) const {
  return host_->Describe(blocks, tenant_);
}

uint8_t HostTest::PlacementsOf(const std::vector<uint64_t>& blocks) const {
  auto info = Info(blocks);
  if (!info) return 0;
  return (info->on_device ? kD : 0) | (info->on_host ? kH : 0) | (info->on_cold ? kC : 0);
}

double HostTest::Counter(const std::string& series) const {
  std::istringstream text(registry_.ExpositionText());
  std::string line;
  while (std::getline(text, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

}  // namespace tier::host::test
