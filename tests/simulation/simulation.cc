#include "simulation.h"

#include <tier/device/cpu_transfer_engine.h>
#include <tier/host/host.h>
#include <tier/host/identity.h>
#include <tier/host/log.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "engine_model.h"
#include "sim_provider.h"

namespace tier::simulation {

namespace {

std::string g_bridge_path;
const char kNamespace[] = "simulation";
constexpr int kLanes = 4;
constexpr uint64_t kLongTimeoutNs = 3600ull * 1000 * 1000 * 1000;
constexpr uint64_t kShortTimeoutNs = 20ull * 1000 * 1000;

std::string KeyOf(std::span<const uint64_t> blocks) {
  const tier_key k = PrefixKey(kNamespace, blocks);
  return std::string(reinterpret_cast<const char*>(k.bytes), TIER_KEY_BYTES);
}

// The CPU engine's worker waits here before each copy while the gate is shut: copies then finish
// only when the run opens it (a slow engine whose pace the seed decides). Bounded: a copy waits
// at most 2 s (counted), so a Host that waited for a copy on the scheduler thread cannot hang.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = true;
  uint64_t forced = 0;
  void Pass() {
    std::unique_lock<std::mutex> lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(2), [&] { return open; })) ++forced;
  }
  void Set(bool value) {
    {
      std::lock_guard<std::mutex> lock(mu);
      open = value;
    }
    cv.notify_all();
  }
};

// The Host's log, kept for a failure's report instead of flooding stderr (failures are scripted).
struct LogTail {
  std::mutex mu;
  std::deque<std::string> lines;
  void Add(std::string_view line) {
    std::lock_guard<std::mutex> lock(mu);
    lines.emplace_back(line);
    if (lines.size() > 30) lines.pop_front();
  }
  std::string Take() {
    std::lock_guard<std::mutex> lock(mu);
    std::string out;
    for (const std::string& l : lines) out += "    " + l + "\n";
    lines.clear();
    return out;
  }
};
LogTail g_log;

struct Version {
  std::vector<uint64_t> pages;  // content id of every page
  uint64_t state = 0;
  std::vector<std::byte> manifest;
  bool revoked = false;  // ReportVerification(false) was said of it
};
struct KeyRecord {
  std::vector<uint64_t> blocks;
  std::vector<Version> versions;
};

enum class Alloc { kNormal, kFail, kShort };

struct AdmissionRec {
  uint64_t id = 0;
  bool prefetch = false;
  std::vector<uint64_t> blocks;
  std::vector<uint32_t> allocated;  // handed over through allocate_pages
  int lane = -1;
  Alloc alloc = Alloc::kNormal;
  uint32_t short_limit = 0;
  bool cancelled = false;  // Cancel() returned true
  // Once ready:
  std::vector<uint32_t> pages;
  bool shared = false;
  std::string key;
  uint64_t tokens = 0;
  device::Transfer state_copy;
};

struct SealRec {
  std::unique_ptr<StateSet> state;
};

class Run {
 public:
  Run(uint64_t seed, Choices* choices, bool faults) : seed_(seed), c_(choices), faults_(faults) {
    g_log.Take();  // lines of an earlier run are not this one's
  }
  ~Run();
  SimOutcome Go(uint64_t steps);

 private:
  // ---- set-up ----
  void Configure();
  bool OpenHost();
  void CloseHost();
  // ---- steps ----
  void Step();
  void OpSeal(bool from_lane);
  void OpAdmit();
  void OpPoll();
  void OpSettle();
  void OpRelease();
  void OpCancel();
  void OpPrefetch();
  void OpEvict();
  void OpVerify();
  void OpDeliver();
  void OpRunCopies();
  void RunAllCopies();
  void OpRestart();
  void OpTimeout();
  void Drain();
  // ---- the server's side ----
  std::vector<uint64_t> PickBlocks(bool for_seal);
  bool TakeFreePages(uint32_t n, std::vector<uint32_t>* pages);
  void ServerUse(uint32_t p);
  void ServerDone(uint32_t p);
  void MaybeFree(uint32_t p);
  int FreeLane() const;
  void FreeLane(int lane);
  bool Allocate(AdmissionRec* rec, uint32_t n, std::vector<uint32_t>* pages);
  void Apply(const std::vector<Event>& events);
  void OnAdmissionEnd(const Event& e);
  void OnReady(AdmissionRec* rec, const Admission& a);
  void EndedWithout(AdmissionRec* rec, const Admission& a, const char* how, bool at_once);
  void OnPagesReleased(const std::vector<uint32_t>& pages);
  void ReleaseAdmission(uint64_t id);
  // ---- checks ----
  void Check();
  void Quiesce();
  bool Fail(const std::string& what);
  bool Note(Known kind, const std::string& what);
  std::string Recent() const;
  uint64_t NewContent() { return Mix64(seed_ * 0x100000001b3ull + ++content_counter_) | 1; }

  uint64_t seed_;
  Choices* c_;
  bool faults_;
  bool trace_ = std::getenv("TIER_SIM_TRACE") != nullptr;  // print every step
  uint64_t step_ = 0;
  std::string op_ = "open";
  std::deque<std::string> recent_;
  bool failed_ = false;
  bool stalled_ = false;
  std::string failure_;
  SimCounts counts_;
  uint64_t content_counter_ = 0, next_block_ = 1;

  // configuration (per seed)
  bool gated_ = false;
  HostOptions options_;
  ProviderScript script_;

  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  std::shared_ptr<device::TransferEngine> engine_;
  std::unique_ptr<Pool> pool_;
  PageLedger ledger_;
  ColdStore store_;
  std::unique_ptr<SimProvider> provider_;
  std::unique_ptr<Host> host_;

  std::map<std::string, KeyRecord> known_;  // key bytes -> what was sealed under it
  std::string notes_[kKnownCount];
  std::vector<std::string> known_order_;
  std::array<std::unique_ptr<StateSet>, kLanes> lanes_;
  std::array<uint64_t, kLanes> lane_user_{};                   // admission using the lane, 0 = idle
  std::map<uint64_t, std::unique_ptr<AdmissionRec>> pending_;  // admissions and prefetches
  std::map<uint64_t, std::unique_ptr<AdmissionRec>> ready_;
  std::map<uint64_t, SealRec> seals_;  // seals whose kSealed has not come
  std::set<uint64_t> ended_ids_;       // every id that ended (a second event is a bug)
};

Run::~Run() {
  if (host_ != nullptr) {
    provider_->Arm(false);
    gate_->Set(true);
    provider_->DeliverAll();
    host_.reset();
  }
}

// A known finding: failed under TIER_SIM_STRICT=1, otherwise noted once and the run goes on.
// The fixed ones fail always.
bool Run::Note(Known kind, const std::string& what) {
  static const bool strict = std::getenv("TIER_SIM_STRICT") != nullptr;
  const bool fixed =
      kind == Known::kWaitsWithNothingInFlight || kind == Known::kHostOverBudgetAtRest;
  if (strict || fixed) return Fail(std::string(KnownName(kind)) + ": " + what);
  std::string& first = notes_[static_cast<int>(kind)];
  if (first.empty()) {
    first = "seed " + std::to_string(seed_) + " step " + std::to_string(step_) + " (" + op_ +
            "): " + what;
  }
  return true;
}

bool Run::Fail(const std::string& what) {
  if (failed_) return false;
  failed_ = true;
  std::ostringstream out;
  out << "seed " << seed_ << " step " << step_ << " (" << op_ << "): " << what
      << "\n  last steps:\n"
      << Recent() << "  last Host log lines:\n"
      << g_log.Take() << "  replay: TIER_SIM_SEED=" << seed_ << " TIER_SIM_OPS=" << step_ + 1;
  failure_ = out.str();
  return false;
}

std::string Run::Recent() const {
  std::string out;
  for (const std::string& r : recent_) out += "    " + r + "\n";
  return out;
}

// ---- set-up ---------------------------------------------------------------------------------

void Run::Configure() {
  gated_ = c_->Chance(50);
  const uint64_t checkpoint = 20 * 2 * kLayers * kPlaneBytes;  // a typical 20-page checkpoint
  static const uint64_t kDeviceMultiples[] = {1, 2, 3, 6, 16};
  static const uint64_t kHostMultiples[] = {1, 2, 4, 10};
  options_ = HostOptions();
  options_.plugin = g_bridge_path;
  options_.namespace_id = kNamespace;
  options_.profile = SimProfile();
  options_.device_capacity_bytes = checkpoint * kDeviceMultiples[c_->Below(5)];
  options_.host_capacity_bytes = checkpoint * kHostMultiples[c_->Below(4)];
  // Host copies take whole 4 KiB extents per segment: a small bound is often the one that binds.
  // (The Host frees copies on a thread of its own: whether a full arena has room yet depends on
  // it, so a run with a small bound may not replay exactly.)
  options_.host_memory_bytes =
      c_->Chance(70) ? 0 : options_.host_capacity_bytes * 2 + (64 << 10) * (1 + c_->Below(8));
  if (!faults_) options_.host_memory_bytes = 0;
  options_.provider_threads = 1;
  // The restore cost from a model, not from the wall time held completions took: a run's
  // decisions must not depend on how fast the machine ran it.
  options_.model_cold_read_bytes_per_second = 2e9;
  options_.max_inflight_restores = 1 + static_cast<uint32_t>(c_->Below(4));
  options_.close_timeout_ns = 10ull * 1000 * 1000 * 1000;
  static const Policy kPolicies[] = {Policy::kValue, Policy::kLru, Policy::kGdsf};
  options_.policy = kPolicies[c_->Below(3)];
  script_.seed = Mix64(seed_ ^ 0xc01dull);
  // A failed spill makes the Host back off spilling for 1 s of wall time, longer than most runs:
  // a seed with spill faults mostly tests failure paths, one without them the tiers' traffic.
  const bool faulty = c_->Chance(60);
  script_.refuse_percent = faulty ? static_cast<uint32_t>(c_->Below(5)) : 0;
  script_.inline_percent = static_cast<uint32_t>(c_->Below(90));
  script_.fail_percent = faulty ? static_cast<uint32_t>(c_->Below(15)) : 0;
  script_.never_percent = c_->Chance(10) ? 1 + static_cast<uint32_t>(c_->Below(10)) : 0;
  options_.provider_timeout_ns = script_.never_percent > 0 ? kShortTimeoutNs : kLongTimeoutNs;
  script_.capacity_bytes = c_->Chance(30) ? checkpoint * (1 + c_->Below(6)) : 1ull << 30;
  if (!faults_) {
    script_.refuse_percent = script_.fail_percent = script_.never_percent = 0;
    script_.capacity_bytes = 1ull << 30;
  }

  device::CpuEngineOptions e;
  e.worker_thread = gated_;
  if (gated_) {
    std::shared_ptr<Gate> gate = gate_;
    e.before_transfer = [gate] { gate->Pass(); };
    gate_->Set(false);
  }
  auto engine = device::MakeCpuTransferEngine(e);
  TIER_CHECK(engine.ok());
  engine_ = std::move(engine).value();
  pool_ = std::make_unique<Pool>(engine_.get());
  for (uint32_t p = Pool::kPages; p > 0; --p) ledger_.free.push_back(p - 1);
  for (int l = 0; l < kLanes; ++l) lanes_[l] = NewStateSet();
  provider_ = std::make_unique<SimProvider>(&store_, script_);
  options_.provider_options = {provider_->Option()};
  options_.pool = pool_->view();
  options_.engine = engine_;
  std::ostringstream d;
  d << "config: engine " << (gated_ ? "gated worker" : "inline") << ", device "
    << options_.device_capacity_bytes << " B, host " << options_.host_capacity_bytes
    << " B, host memory " << options_.host_memory_bytes << ", restores "
    << options_.max_inflight_restores << ", policy " << PolicyName(options_.policy) << ", refuse "
    << script_.refuse_percent << "%, inline " << script_.inline_percent << "%, fail "
    << script_.fail_percent << "%, never " << script_.never_percent << "%, cold capacity "
    << script_.capacity_bytes;
  recent_.push_back(d.str());
  if (trace_) {
    std::printf("%s\n", d.str().c_str());
    SetLogLevel(TIER_LOG_DEBUG);
    SetLogSink([](tier_log_level, std::string_view line) {
      std::printf("  %.*s\n", static_cast<int>(line.size()), line.data());
    });
  }
}

bool Run::OpenHost() {
  auto host = Host::Open(options_);
  // The short deadline of seeds with never-completing operations also bounds the provider's
  // open: on a loaded machine it may not make it, and the deadline doubles (for the whole run).
  while (!host.ok() && options_.provider_timeout_ns < kLongTimeoutNs / 64) {
    options_.provider_timeout_ns *= 2;
    host = Host::Open(options_);
  }
  if (!host.ok()) return Fail("Host::Open: " + host.status().ToString());
  host_ = std::move(host).value();
  provider_->Arm(true);
  return true;
}

// Close: the provider finishes what it holds (on its own thread), the Host closes, and every page
// and buffer it had is the server's again (Close ends everything; no event follows it).
void Run::CloseHost() {
  provider_->Arm(false);
  gate_->Set(true);
  provider_->DeliverAll();
  host_.reset();
  if (gated_) gate_->Set(false);
  for (auto& [id, rec] : pending_) {
    for (uint32_t p : rec->allocated) ledger_.pending_for[p] = 0;
    for (uint32_t p : rec->allocated) MaybeFree(p);
    if (rec->lane >= 0) FreeLane(rec->lane);
  }
  pending_.clear();
  for (auto& [id, rec] : ready_) {
    for (uint32_t p : rec->pages) ServerDone(p);
    if (rec->lane >= 0) FreeLane(rec->lane);
  }
  ready_.clear();
  seals_.clear();
  ended_ids_.clear();  // a new Host numbers its operations afresh
  for (uint32_t p = 0; p < Pool::kPages; ++p) {
    ledger_.host_refs[p] = 0;
    MaybeFree(p);
  }
}

// ---- the server's side ----------------------------------------------------------------------

bool Run::TakeFreePages(uint32_t n, std::vector<uint32_t>* pages) {
  if (ledger_.free.size() < n) return false;
  for (uint32_t i = 0; i < n; ++i) {
    const size_t at = ledger_.free.size() - 1 - c_->Below(std::min<size_t>(4, ledger_.free.size()));
    const uint32_t p = ledger_.free[at];
    ledger_.free.erase(ledger_.free.begin() + static_cast<std::ptrdiff_t>(at));
    TIER_CHECK(ledger_.IsFree(p));
    pages->push_back(p);
  }
  return true;
}

void Run::ServerUse(uint32_t p) {
  ++ledger_.server_uses[p];
}

void Run::ServerDone(uint32_t p) {
  TIER_CHECK(ledger_.server_uses[p] > 0);
  --ledger_.server_uses[p];
  MaybeFree(p);
}

// A page nobody uses any more goes back to the free list, poisoned.
void Run::MaybeFree(uint32_t p) {
  if (!ledger_.IsFree(p)) return;
  if (std::find(ledger_.free.begin(), ledger_.free.end(), p) != ledger_.free.end()) return;
  ledger_.content[p] = kPoison;
  pool_->Write(p, kPoison);
  ledger_.free.push_back(p);
}

int Run::FreeLane() const {
  for (int l = 0; l < kLanes; ++l) {
    if (lane_user_[l] == 0) return l;
  }
  return -1;
}

void Run::FreeLane(int lane) {
  lane_user_[lane] = 0;
  FillState(lanes_[lane].get(), kPoison);
}

std::vector<uint64_t> Run::PickBlocks(bool for_seal) {
  std::vector<uint64_t> blocks;
  const uint64_t how = c_->Below(100);
  if (!known_order_.empty() && how < 75) {
    const KeyRecord& k = known_[known_order_[c_->Below(known_order_.size())]];
    blocks = k.blocks;
    const uint64_t shape = c_->Below(10);
    if (shape < 2 && blocks.size() > 1) {
      blocks.resize(1 + c_->Below(blocks.size()));  // a shorter prefix
    } else if (shape < 6 || for_seal) {
      const uint64_t more = (for_seal ? 1 : 0) + c_->Below(4);
      for (uint64_t i = 0; i < more; ++i) blocks.push_back(next_block_++);
    }
  } else {
    const uint64_t n = 1 + c_->Below(c_->Chance(15) ? 30 : 8);
    for (uint64_t i = 0; i < n; ++i) blocks.push_back(next_block_++);
  }
  return blocks;
}

bool Run::Allocate(AdmissionRec* rec, uint32_t n, std::vector<uint32_t>* pages) {
  if (rec->alloc == Alloc::kFail) return false;
  if (rec->alloc == Alloc::kShort && n > rec->short_limit) return false;
  std::vector<uint32_t> got;
  if (!TakeFreePages(n, &got)) return false;
  for (uint32_t p : got) {
    ledger_.pending_for[p] = rec->id != 0 ? rec->id : ~0ull;
    rec->allocated.push_back(p);
  }
  *pages = std::move(got);
  return true;
}

// ---- steps ----------------------------------------------------------------------------------

void Run::Step() {
  Quiesce();  // what the provider holds, and what the next Poll applies, is the run's alone
  const uint64_t r = c_->Below(1000);
  if (r < 170) {
    OpSeal(false);
  } else if (r < 230) {
    OpSeal(true);
  } else if (r < 430) {
    OpAdmit();
  } else if (r < 600) {
    OpPoll();
  } else if (r < 640) {
    OpSettle();
  } else if (r < 730) {
    OpRelease();
  } else if (r < 760) {
    OpCancel();
  } else if (r < 800) {
    OpPrefetch();
  } else if (r < 815) {
    OpEvict();
  } else if (r < 850) {
    OpVerify();
  } else if (r < 950) {
    OpDeliver();
  } else if (r < 990) {
    OpRunCopies();
  } else if (r < 996) {
    OpTimeout();
  } else {
    OpRestart();
  }
}

// A finished request parks its checkpoint: fresh pages it computed, or (from_lane) the pages of
// the checkpoint its lane reused plus the ones it added; then the request is done.
void Run::OpSeal(bool from_lane) {
  AdmissionRec* base = nullptr;
  std::vector<uint64_t> blocks;
  std::vector<uint32_t> pages, fresh;
  std::vector<uint64_t> contents;
  if (from_lane) {
    if (ready_.empty()) return;
    auto it = ready_.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(c_->Below(ready_.size())));
    base = it->second.get();
    blocks = base->blocks;
    blocks.resize(base->tokens / kBlockTokens);
    pages = base->pages;
    for (uint32_t p : pages) contents.push_back(ledger_.content[p]);
    const uint64_t more = 1 + c_->Below(4);
    for (uint64_t i = 0; i < more; ++i) blocks.push_back(next_block_++);
  } else {
    blocks = PickBlocks(true);
  }
  const uint32_t need = static_cast<uint32_t>(blocks.size() * kPagesPerBlock - pages.size());
  if (!TakeFreePages(need, &fresh)) return;
  for (uint32_t p : fresh) {
    ServerUse(p);
    const uint64_t content = NewContent();
    ledger_.content[p] = content;
    pool_->Write(p, content);
    pages.push_back(p);
    contents.push_back(content);
  }
  auto state = NewStateSet();
  FillState(state.get(), NewContent());
  std::vector<std::byte> manifest(c_->Below(48));
  for (size_t i = 0; i < manifest.size(); ++i) {
    manifest[i] = static_cast<std::byte>(Mix64(state->content + i));
  }
  SealRequest r;
  r.blocks = blocks;
  r.tokens = blocks.size() * kBlockTokens;
  r.shared_prefix = c_->Chance(10);
  r.pages = pages;
  r.state = state->buffers;
  r.server_manifest = manifest;
  r.now_ns = step_ * 1000000;
  op_ = std::string(from_lane ? "seal from lane" : "seal") + " of " +
        std::to_string(blocks.size()) + " blocks, " + std::to_string(pages.size()) + " pages";
  const Sealed sealed = host_->Seal(r);
  op_ += sealed.status.ok() ? (sealed.existed     ? ": existed"
                               : sealed.on_device ? ": on device"
                                                  : ": on host")
                            : ": " + sealed.status.ToString();
  ++counts_.seals;
  if (sealed.status.ok() && !sealed.existed) {
    if (seals_.count(sealed.id) != 0 || ended_ids_.count(sealed.id) != 0) {
      Fail("seal id " + std::to_string(sealed.id) + " was used before");
      return;
    }
    for (uint32_t p : pages) ++ledger_.host_refs[p];
    const std::string key = KeyOf(blocks);
    KeyRecord& k = known_[key];
    if (k.blocks.empty()) known_order_.push_back(key);
    k.blocks = blocks;
    k.versions.push_back({contents, state->content, manifest, false});
    seals_[sealed.id].state = std::move(state);
  }
  for (uint32_t p : fresh) ServerDone(p);
  if (base != nullptr) ReleaseAdmission(base->id);
}

void Run::OpAdmit() {
  const int lane = FreeLane();
  if (lane < 0) return;
  auto rec = std::make_unique<AdmissionRec>();
  rec->blocks = PickBlocks(false);
  rec->lane = lane;
  const uint64_t a = c_->Below(100);
  rec->alloc = a < 8 ? Alloc::kFail : a < 16 ? Alloc::kShort : Alloc::kNormal;
  rec->short_limit = static_cast<uint32_t>(c_->Below(24));
  AdmissionRec* raw = rec.get();
  AdmitRequest r;
  r.blocks = rec->blocks;
  r.now_ns = step_ * 1000000;
  r.allocate_pages = [this, raw](uint32_t n, std::vector<uint32_t>* pages) {
    return Allocate(raw, n, pages);
  };
  r.state = lanes_[lane]->buffers;
  op_ = "admit " + std::to_string(rec->blocks.size()) + " blocks on lane " + std::to_string(lane) +
        (rec->alloc == Alloc::kFail ? " (allocator fails)"
         : rec->alloc == Alloc::kShort
             ? " (allocator has " + std::to_string(rec->short_limit) + " pages)"
             : "");
  ++counts_.admits;
  Admission adm = host_->Admit(r);
  rec->id = adm.id;
  for (uint32_t p : rec->allocated) ledger_.pending_for[p] = adm.id;
  if (pending_.count(adm.id) || ready_.count(adm.id) || ended_ids_.count(adm.id) ||
      seals_.count(adm.id)) {
    Fail("admission id " + std::to_string(adm.id) + " was used before");
    return;
  }
  lane_user_[lane] = adm.id == 0 ? ~0ull : adm.id;
  op_ += ": id " + std::to_string(adm.id) + " " +
         (adm.state == AdmissionState::kReady     ? "ready"
          : adm.state == AdmissionState::kPending ? "pending"
          : adm.state == AdmissionState::kRoot    ? "root "
                                                  : "cancelled?") +
         (adm.state == AdmissionState::kRoot ? RootReasonName(adm.root_reason) : "");
  switch (adm.state) {
    case AdmissionState::kPending:
      pending_[adm.id] = std::move(rec);
      break;
    case AdmissionState::kReady:
      ready_[adm.id] = std::move(rec);
      OnReady(ready_[adm.id].get(), adm);
      break;
    case AdmissionState::kRoot:
      EndedWithout(rec.get(), adm, "root at once", true);
      break;
    case AdmissionState::kCancelled:
      Fail("Admit answered kCancelled");
      break;
  }
}

void Run::OpPoll() {
  op_ = "poll";
  Quiesce();
  std::vector<Event> events;
  host_->Poll(&events);
  Apply(events);
}

// Polls (and lets copies run) until a round changes nothing.
void Run::OpSettle() {
  op_ = "settle";
  for (int round = 0; round < 64 && !failed_; ++round) {
    RunAllCopies();
    Quiesce();
    std::vector<Event> events;
    host_->Poll(&events);
    Apply(events);
    if (events.empty() && !host_->WaitForWork(0)) break;
  }
}

void Run::OpRelease() {
  if (ready_.empty()) return;
  auto it = ready_.begin();
  std::advance(it, static_cast<std::ptrdiff_t>(c_->Below(ready_.size())));
  op_ = "release " + std::to_string(it->first);
  ReleaseAdmission(it->first);
}

void Run::ReleaseAdmission(uint64_t id) {
  auto it = ready_.find(id);
  TIER_CHECK(it != ready_.end());
  std::unique_ptr<AdmissionRec> rec = std::move(it->second);
  ready_.erase(it);
  host_->Release(id);
  for (uint32_t p : rec->pages) ServerDone(p);
  FreeLane(rec->lane);
}

void Run::OpCancel() {
  std::vector<uint64_t> admissions;
  for (const auto& [id, rec] : pending_) {
    if (!rec->prefetch && !rec->cancelled) admissions.push_back(id);
  }
  if (admissions.empty()) return;
  const uint64_t id = admissions[c_->Below(admissions.size())];
  op_ = "cancel " + std::to_string(id);
  ++counts_.cancels;
  if (host_->Cancel(id)) {
    pending_[id]->cancelled = true;
    op_ += ": cancelled";
  }
}

void Run::OpPrefetch() {
  const std::vector<uint64_t> blocks = PickBlocks(false);
  op_ = "prefetch " + std::to_string(blocks.size()) + " blocks";
  const uint64_t id = host_->Prefetch(blocks, step_ * 1000000);
  ++counts_.prefetches;
  if (id == 0) return;
  if (pending_.count(id) || ready_.count(id) || ended_ids_.count(id) || seals_.count(id)) {
    Fail("prefetch id " + std::to_string(id) + " was used before");
    return;
  }
  auto rec = std::make_unique<AdmissionRec>();
  rec->id = id;
  rec->prefetch = true;
  rec->blocks = blocks;
  pending_[id] = std::move(rec);
  op_ += ": id " + std::to_string(id);
}

void Run::OpEvict() {
  if (known_order_.empty()) return;
  const KeyRecord& k = known_[known_order_[c_->Below(known_order_.size())]];
  op_ = "evict " + std::to_string(k.blocks.size()) + " blocks";
  ++counts_.evicts;
  const bool gone = host_->Evict(PrefixKey(kNamespace, k.blocks));
  op_ += gone ? ": evicted" : ": absent";
}

// The server says what it found when it checked a ready admission's bytes. The run checked them
// exactly; now and then it says they were wrong, and the checkpoint must never be served again.
void Run::OpVerify() {
  if (ready_.empty()) return;
  auto it = ready_.begin();
  std::advance(it, static_cast<std::ptrdiff_t>(c_->Below(ready_.size())));
  AdmissionRec* rec = it->second.get();
  const bool exact = !c_->Chance(30);
  op_ = "report " + std::string(exact ? "exact " : "wrong ") + std::to_string(rec->id) + " (" +
        KeyHex(PrefixKey(kNamespace, known_[rec->key].blocks)) + ")";
  host_->ReportVerification(rec->id, exact);
  if (exact) return;
  KeyRecord& k = known_[rec->key];
  for (Version& v : k.versions) v.revoked = true;
  std::vector<uint64_t> blocks = k.blocks;
  if (host_->Describe(blocks).has_value()) {
    Fail("a checkpoint reported wrong is still in the catalog");
  }
}

void Run::OpDeliver() {
  const size_t held = provider_->held();
  if (held == 0) return;
  const size_t index = c_->Below(held);
  const bool foreign = c_->Chance(50);
  op_ = "deliver held completion " + std::to_string(index) + " of " + std::to_string(held) +
        (foreign ? " on a foreign thread" : "");
  ++counts_.deliveries;
  Quiesce();
  provider_->Deliver(index, foreign);
}

void Run::OpRunCopies() {
  if (!gated_) return;
  op_ = "run copies";
  RunAllCopies();
}

// Every copy queued on the engine runs to its end; later ones wait at the gate again.
void Run::RunAllCopies() {
  gate_->Set(true);
  (void)engine_->Synchronize();
  if (gated_) gate_->Set(false);
}

// Lets every provider call outstanding now pass its deadline (seeds with never-completing
// operations use a short one).
void Run::OpTimeout() {
  if (script_.never_percent == 0 || provider_->accepted() == provider_->held()) return;
  op_ = "wait past the provider deadline";
  std::this_thread::sleep_for(std::chrono::nanoseconds(options_.provider_timeout_ns * 3 / 2));
  OpPoll();
}

// Close and reopen over the same (persistent) tier: what was in Cold must be re-adopted.
void Run::OpRestart() {
  op_ = "close and reopen";
  ++counts_.restarts;
  CloseHost();
  // What the tier holds after the close (Cold before it, what close wrote, minus what a restore
  // found damaged on the way) is what the reopened Host must adopt.
  std::vector<std::string> stored;
  for (const auto& [key, entry] : store_.entries) {
    stored.emplace_back(reinterpret_cast<const char*>(key.bytes), TIER_KEY_BYTES);
  }
  if (!OpenHost()) return;
  for (const std::string& key : stored) {
    auto known = known_.find(key);
    if (known == known_.end()) {
      Fail("the tier holds a key the run never sealed");
      return;
    }
    auto info = host_->Describe(known->second.blocks);
    ++counts_.readopted_checked;
    if (!info.has_value() || !info->on_cold) {
      Fail("a checkpoint of " + std::to_string(known->second.blocks.size()) + " blocks (" +
           KeyHex(PrefixKey(kNamespace, known->second.blocks)) +
           ") is in the tier after close and not re-adopted after reopen" +
           (info.has_value() ? " (the catalog has it, not in Cold)" : ""));
      return;
    }
  }
}

// ---- events ---------------------------------------------------------------------------------

void Run::Apply(const std::vector<Event>& events) {
  for (const Event& e : events) {
    if (failed_) return;
    switch (e.kind) {
      case Event::kPagesReleased:
        OnPagesReleased(e.pages);
        break;
      case Event::kSealed: {
        auto it = seals_.find(e.id);
        if (it == seals_.end()) {
          Fail("kSealed for seal " + std::to_string(e.id) + " that is not pending");
          return;
        }
        if (StateDiffers(*it->second.state, it->second.state->content) >= 0) {
          Fail("a seal's state buffer changed before its kSealed");
        }
        seals_.erase(it);
        ended_ids_.insert(e.id);
        break;
      }
      case Event::kPrefetchDone:
      case Event::kAdmissionReady:
      case Event::kAdmissionRoot:
      case Event::kAdmissionCancelled:
        OnAdmissionEnd(e);
        break;
    }
  }
}

void Run::OnPagesReleased(const std::vector<uint32_t>& pages) {
  counts_.pages_released += pages.size();
  for (uint32_t p : pages) {
    if (p >= Pool::kPages) {
      Fail("kPagesReleased names page " + std::to_string(p) + ", outside the pool");
      return;
    }
    for (const auto& [id, rec] : ready_) {
      if (rec->shared && std::count(rec->pages.begin(), rec->pages.end(), p) != 0) {
        Fail("kPagesReleased names page " + std::to_string(p) + " of " +
             std::to_string(pages.size()) + ", a page of live Device hit " + std::to_string(id) +
             " (not released)");
        return;
      }
    }
    if (ledger_.host_refs[p] == 0) {
      Fail("kPagesReleased names page " + std::to_string(p) +
           (ledger_.server_uses[p] > 0 ? ", a page the server holds"
                                       : ", a page the Host "
                                         "did not hold (twice?)"));
      return;
    }
    ledger_.host_refs[p] = 0;
    MaybeFree(p);
  }
}

void Run::OnAdmissionEnd(const Event& e) {
  auto it = pending_.find(e.id);
  if (it == pending_.end()) {
    Fail("an event of kind " + std::to_string(e.kind) + " for " + std::to_string(e.id) +
         (ended_ids_.count(e.id) ? ", which ended before" : ", which is not pending"));
    return;
  }
  std::unique_ptr<AdmissionRec> rec = std::move(it->second);
  pending_.erase(it);
  ended_ids_.insert(e.id);
  if (rec->prefetch) {
    if (e.kind != Event::kPrefetchDone) Fail("a prefetch ended with an admission event");
    return;
  }
  if (e.kind == Event::kPrefetchDone) {
    Fail("an admission ended with kPrefetchDone");
    return;
  }
  if (rec->cancelled && e.kind != Event::kAdmissionCancelled) {
    Fail("Cancel() returned true, then the admission ended with kind " + std::to_string(e.kind));
    return;
  }
  if (e.kind == Event::kAdmissionReady) {
    if (e.admission.state != AdmissionState::kReady) Fail("kAdmissionReady not kReady");
    AdmissionRec* raw = rec.get();
    ready_[e.id] = std::move(rec);
    OnReady(raw, e.admission);
  } else {
    EndedWithout(rec.get(), e.admission, e.kind == Event::kAdmissionRoot ? "root" : "cancelled",
                 false);
  }
}

// An admission that ended without a checkpoint: every page it was handed is the server's again.
void Run::EndedWithout(AdmissionRec* rec, const Admission& a, const char* how, bool at_once) {
  std::multiset<uint32_t> given(rec->allocated.begin(), rec->allocated.end());
  std::multiset<uint32_t> back(a.unused_pages.begin(), a.unused_pages.end());
  if (given != back) {
    Fail(std::string("an admission ended ") + how + " returning " + std::to_string(back.size()) +
         " unused pages of the " + std::to_string(given.size()) + " it was handed");
    return;
  }
  ++counts_.roots;
  for (uint32_t p : rec->allocated) {
    ledger_.pending_for[p] = 0;
    MaybeFree(p);
  }
  if (at_once && StateDiffers(*lanes_[rec->lane], kPoison) >= 0) {
    Fail("an admission that answered kRoot at once wrote the lane's state");
  }
  if (rec->lane >= 0) FreeLane(rec->lane);
}

// A ready admission: its pages and state are byte for byte a version sealed under its key.
void Run::OnReady(AdmissionRec* rec, const Admission& a) {
  rec->pages = a.pages;
  rec->shared = a.pages_shared;
  rec->tokens = a.cached_tokens;
  rec->state_copy = a.state_copy;
  const size_t blocks = a.cached_tokens / kBlockTokens;
  if (a.cached_tokens % kBlockTokens != 0 || blocks == 0 || blocks > rec->blocks.size()) {
    Fail("a ready admission of " + std::to_string(a.cached_tokens) + " tokens for a request of " +
         std::to_string(rec->blocks.size()) + " blocks");
    return;
  }
  rec->key = KeyOf(std::span(rec->blocks).first(blocks));
  if (!SameKey(a.key, PrefixKey(kNamespace, std::span(rec->blocks).first(blocks)))) {
    Fail("a ready admission's key is not the key of the prefix it covers (a non-prefix answer)");
    return;
  }
  auto known = known_.find(rec->key);
  if (known == known_.end()) {
    Fail("a ready admission of a key never sealed");
    return;
  }
  if (a.pages.size() != blocks * kPagesPerBlock) {
    Fail("a ready admission of " + std::to_string(blocks) + " blocks has " +
         std::to_string(a.pages.size()) + " pages");
    return;
  }
  // Pages the allocator handed over: those of a restore, plus unused ones.
  std::multiset<uint32_t> given(rec->allocated.begin(), rec->allocated.end());
  std::multiset<uint32_t> back(a.unused_pages.begin(), a.unused_pages.end());
  if (!a.pages_shared) back.insert(a.pages.begin(), a.pages.end());
  if (given != back) {
    Fail("a ready admission's pages and unused pages are not the " + std::to_string(given.size()) +
         " pages it was handed");
    return;
  }
  for (uint32_t p : rec->allocated) ledger_.pending_for[p] = 0;
  for (uint32_t p : a.unused_pages) MaybeFree(p);
  if (a.pages_shared) {
    ++counts_.device_hits;
    RunAllCopies();  // the state copy and everything queued before it, nothing after
    const Status copied = rec->state_copy.Wait();
    if (!copied.ok()) {
      Fail("a Device hit's state copy failed: " + copied.ToString());
      return;
    }
    for (uint32_t p : a.pages) {
      if (ledger_.host_refs[p] == 0) {
        Fail("a Device hit names page " + std::to_string(p) + ", which the Host does not hold");
        return;
      }
    }
  } else {
    ++(a.outcome == Outcome::kColdRestore ? counts_.cold_restores : counts_.host_restores);
  }
  const Version* match = nullptr;
  for (const Version& v : known->second.versions) {
    bool same = v.manifest.size() == a.server_manifest.size() &&
                std::equal(v.manifest.begin(), v.manifest.end(), a.server_manifest.begin()) &&
                StateDiffers(*lanes_[rec->lane], v.state) < 0;
    for (size_t i = 0; same && i < a.pages.size(); ++i) same = pool_->Holds(a.pages[i], v.pages[i]);
    if (same) match = &v;
  }
  if (match == nullptr) {
    Fail(std::string("a ready admission (") + OutcomeName(a.outcome) + ", " +
         std::to_string(blocks) + " blocks) is not byte for byte any version sealed under its key");
    return;
  }
  if (match->revoked) {
    Note(Known::kServedAfterReportedWrong,
         "admission " + std::to_string(a.id) + " (" + OutcomeName(a.outcome) + ", " +
             KeyHex(a.key) + ") served a checkpoint reported wrong (ReportVerification false)");
  }
  lanes_[rec->lane]->content = match->state;
  for (size_t i = 0; i < a.pages.size(); ++i) {
    const uint32_t p = a.pages[i];
    ServerUse(p);
    if (!a.pages_shared) {
      ledger_.content[p] = match->pages[i];
      pool_->Expect(p, match->pages[i]);
    }
  }
  if (a.id == 0) Fail("a ready admission without an id");
}

// ---- checks ---------------------------------------------------------------------------------

// Waits until the Host's provider threads are done: every provider call the Host has open is
// either held by the provider or answered in the Host's event queue. Then what the next Poll
// applies is a function of the run alone.
void Run::Quiesce() {
  if (host_ == nullptr) return;
  using Lane = SimProvider::Lane;
  const auto start = std::chrono::steady_clock::now();
  auto waited = [&] { return std::chrono::steady_clock::now() - start; };
  for (int spin = 0; waited() < std::chrono::seconds(10); ++spin) {
    if (provider_->executing() == 0) {
      // The serial lane (spill, restore, remove) goes first whenever it has a call waiting.
      if (provider_->ReleaseOne(Lane::kSerial)) continue;
      uint64_t queued = 0;
      const int fd = host_->event_fd();
      if (fd >= 0 && ::read(fd, &queued, sizeof(queued)) == sizeof(queued)) {
        [[maybe_unused]] const ssize_t n = ::write(fd, &queued, sizeof(queued));
      }
      const size_t parallel = provider_->blocked(Lane::kParallel);
      const bool settled =
          host_->Stats().inflight_provider_ops <= provider_->accepted() + queued + parallel;
      // A parallel call goes in once nothing else can arrive first (or, when more wait behind
      // it in its lane, after a grace far longer than a thread takes to reach the provider).
      if (parallel > 0 && (settled || waited() > std::chrono::microseconds(500))) {
        provider_->ReleaseOne(Lane::kParallel);
        continue;
      }
      if (settled) return;
    }
    if (waited() > std::chrono::seconds(9)) {
      stalled_ = true;  // reported by the test: the Host's threads did not come to rest
    }
    if (spin < 100) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

void Run::Check() {
  if (failed_) return;
  const int changed = pool_->FirstChanged([&](uint32_t p) { return ledger_.pending_for[p] == 0; });
  if (changed >= 0) {
    const uint32_t p = static_cast<uint32_t>(changed);
    Fail("page " + std::to_string(p) + " changed: " +
         (ledger_.host_refs[p] > 0     ? "held by the Host (it must only read it)"
          : ledger_.server_uses[p] > 0 ? "the server's (a ready admission's or its own)"
                                       : "a free page (poisoned)"));
    return;
  }
  for (int l = 0; l < kLanes; ++l) {
    if (lane_user_[l] == 0 && StateDiffers(*lanes_[l], kPoison) >= 0) {
      Fail("idle lane " + std::to_string(l) + "'s state was written");
      return;
    }
    if (lane_user_[l] != 0 && ready_.count(lane_user_[l]) != 0 &&
        StateDiffers(*lanes_[l], lanes_[l]->content) >= 0) {
      Fail("lane " + std::to_string(l) + " of a ready admission changed");
      return;
    }
  }
}

// The end of a run: everything completes, every request ends, every checkpoint is evicted; then
// nothing may wait, budgets hold, and every page the Host held has come back.
void Run::Drain() {
  op_ = "drain";
  provider_->DeliverAll();
  OpSettle();
  // Whatever still waits for a provider call gets it (a completion may start another call);
  // what waits with no call open waits for nothing that will come.
  int quiet_rounds = 0;  // settles in a row that ended nothing with no provider call open
  for (int i = 0; i < 200 && !failed_ && (!pending_.empty() || !seals_.empty()); ++i) {
    if (provider_->accepted() == 0 && host_->Stats().inflight_provider_ops == 0 && i >= 3) {
      // The last Poll may have queued copies into the pool that a gated engine runs only when
      // the run lets it (the next settle), or handed a call to a call thread that has not
      // started it yet: only settles that end nothing, a few in a row, end the wait.
      const size_t before = pending_.size() + seals_.size();
      OpSettle();
      if (failed_) break;
      if (pending_.size() + seals_.size() != before) {
        quiet_rounds = 0;
        continue;
      }
      if (!ready_.empty()) {
        // A restore may wait for pinned Host memory that a ready admission holds (host.h: it
        // frees at Release): the server finishes its running requests, as a server does.
        while (!ready_.empty()) ReleaseAdmission(ready_.begin()->first);
        quiet_rounds = 0;
        continue;
      }
      if (++quiet_rounds >= 3) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    quiet_rounds = 0;
    provider_->DeliverAll();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    OpSettle();
  }
  op_ = "drain";
  if (failed_) return;
  if (!pending_.empty() || !seals_.empty()) {
    const HostStats s = host_->Stats();
    const std::string what =
        std::to_string(pending_.size()) + " admissions/prefetches and " +
        std::to_string(seals_.size()) + " seals did not end with every completion delivered " +
        "(first id " +
        std::to_string(pending_.empty() ? seals_.begin()->first : pending_.begin()->first) +
        "); the Host has " + std::to_string(s.pending_admissions) + " pending, " +
        std::to_string(s.inflight_provider_ops) + " provider calls in flight";
    if (!seals_.empty() || s.inflight_provider_ops != 0) {
      Fail(what);
      return;
    }
    // They wait for something that no longer comes (their deadline is the provider timeout).
    Note(Known::kWaitsWithNothingInFlight, what);
    std::vector<uint64_t> ids;
    for (const auto& [id, rec] : pending_) ids.push_back(id);
    for (uint64_t id : ids) {
      if (host_->Cancel(id)) pending_[id]->cancelled = true;
    }
    OpSettle();
    op_ = "drain";
    if (failed_) return;
    // What Cancel could not end (a prefetch) may still end later: its event is then expected.
  }
  while (!ready_.empty()) ReleaseAdmission(ready_.begin()->first);
  OpSettle();
  // Pressure may still be moving copies out (spills it started, held by the provider): the Host
  // is at rest once they completed, failed or passed their deadline.
  for (int i = 0; i < 200 && !failed_ && host_->Stats().inflight_provider_ops != 0 &&
                  host_->Stats().host_bytes > options_.host_capacity_bytes;
       ++i) {
    provider_->DeliverAll();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    OpSettle();
  }
  op_ = "drain: budgets";
  if (failed_) return;
  const HostStats s = host_->Stats();
  if (trace_) {
    std::printf(
        "host: %llu entries (%llu device, %llu host, %llu cold), %llu spills, %llu failed, "
        "%llu evictions, %llu timeouts, admission superseded %llu not worth %llu\n",
        (unsigned long long)s.entries, (unsigned long long)s.device_entries,
        (unsigned long long)s.host_entries, (unsigned long long)s.cold_entries,
        (unsigned long long)s.spills, (unsigned long long)s.spill_failures,
        (unsigned long long)s.evictions, (unsigned long long)s.timeouts,
        (unsigned long long)s.cold_admission_superseded,
        (unsigned long long)s.cold_admission_not_worth);
  }
  if (s.device_bytes > options_.device_capacity_bytes ||
      s.host_bytes > options_.host_capacity_bytes) {
    std::string where;
    for (const std::string& key : known_order_) {
      auto info = host_->Describe(known_[key].blocks);
      if (!info.has_value() || !(info->on_host || info->on_device)) continue;
      where += std::string(" [") + (info->on_device ? "D" : "") + (info->on_host ? "H" : "") +
               (info->on_cold ? "C" : "") + " " + std::to_string(info->logical_bytes) + " B, " +
               std::to_string(info->pins) + " pins]";
    }
    Note(Known::kHostOverBudgetAtRest,
         "at quiescence the Device holds " + std::to_string(s.device_bytes) + " of " +
             std::to_string(options_.device_capacity_bytes) + " B, the Host " +
             std::to_string(s.host_bytes) + " of " + std::to_string(options_.host_capacity_bytes) +
             " B:" + where);
  }
  op_ = "drain: evict all";
  for (const std::string& key : known_order_)
    host_->Evict(PrefixKey(kNamespace, known_[key].blocks));
  OpSettle();
  op_ = "drain: pages back";
  Check();
  for (uint32_t p = 0; p < Pool::kPages && !failed_; ++p) {
    if (ledger_.host_refs[p] != 0) {
      Fail("page " + std::to_string(p) + " never came back after every checkpoint was evicted (" +
           std::to_string(host_->Stats().entries) + " entries left)");
    }
  }
}

SimOutcome Run::Go(uint64_t steps) {
  Configure();
  if (OpenHost()) {
    for (step_ = 0; step_ < steps && !failed_ && !c_->exhausted(); ++step_) {
      op_ = "-";
      Step();
      if (!failed_) Check();
      if (op_ != "-") {
        for (char ch : op_) counts_.trace = Mix64(counts_.trace ^ static_cast<uint8_t>(ch));
        recent_.push_back(std::to_string(step_) + ": " + op_);
        if (trace_) std::printf("%s\n", recent_.back().c_str());
        if (recent_.size() > 24) recent_.pop_front();
      }
    }
    if (!failed_) Drain();
  }
  counts_.steps = step_;
  counts_.forced_copies = gate_->forced;
  counts_.stalls = stalled_ ? 1 : 0;
  SimOutcome out;
  out.ok = !failed_;
  out.failure = failure_;
  out.counts = counts_;
  for (int k = 0; k < kKnownCount; ++k) out.known[k] = notes_[k];
  if (out.ok) g_log.Take();
  return out;
}

}  // namespace

const char* KnownName(Known k) {
  switch (k) {
    case Known::kServedAfterReportedWrong:
      return "served after ReportVerification(false)";
    case Known::kHostOverBudgetAtRest:
      return "Host tier over budget at rest";
    case Known::kWaitsWithNothingInFlight:
      return "admissions wait with nothing in flight";
  }
  return "?";
}

void SimCounts::Add(const SimCounts& o) {
  steps += o.steps;
  seals += o.seals;
  admits += o.admits;
  device_hits += o.device_hits;
  host_restores += o.host_restores;
  cold_restores += o.cold_restores;
  roots += o.roots;
  cancels += o.cancels;
  prefetches += o.prefetches;
  evicts += o.evicts;
  restarts += o.restarts;
  readopted_checked += o.readopted_checked;
  deliveries += o.deliveries;
  pages_released += o.pages_released;
  forced_copies += o.forced_copies;
  stalls += o.stalls;
}

std::string SimCounts::ToString() const {
  std::ostringstream out;
  out << steps << " steps: " << seals << " seals, " << admits << " admits (" << device_hits
      << " device hits, " << host_restores << " host restores, " << cold_restores
      << " cold restores, " << roots << " roots/cancelled), " << cancels << " cancels, "
      << prefetches << " prefetches, " << evicts << " evicts, " << restarts << " restarts ("
      << readopted_checked << " re-adoptions checked), " << deliveries
      << " held completions delivered, " << pages_released << " pages released";
  if (forced_copies > 0) out << ", " << forced_copies << " copies forced past the gate";
  if (stalls > 0)
    out << ", " << stalls << " runs whose provider calls did not come to rest in 10 s";
  return out.str();
}

void SetBridgePath(const std::string& path) {
  g_bridge_path = path;
  char table[32];
  std::snprintf(table, sizeof(table), "%llx",
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(SimProvider::Table())));
  setenv("TIER_SIM_PROVIDER_TABLE", table, 1);
  SetLogSink([](tier_log_level, std::string_view line) { g_log.Add(line); });
}

SimOutcome RunSimulation(uint64_t seed, uint64_t steps, Choices* choices, bool faults) {
  Run run(seed, choices, faults);
  return run.Go(steps);
}

}  // namespace tier::simulation
