// tier_scheduler_cpu: the scheduler thread's CPU time per Host call (issue 20, "Measure").
//
// A mock engine of the shape that found issue 20's defects: Device tier on, 4 lanes with state
// buffers, sessions whose turns are checkpoints of ~700-1,700 blocks (16-token pages of 256 KiB:
// 180-430 MiB logical, at --bytes-scale physical), a Host tier a few checkpoints deep over a disk
// cold tier, so spills, demotions and cold restores are in flight while it runs. One thread (this
// one) makes every Host call, as a server's scheduler does, and reads CLOCK_THREAD_CPUTIME_ID and
// the steady clock around each Admit, Seal and Poll. It never calls WaitForWork: between
// iterations it sleeps 200 us (a decode step). Prints count, p50, p99, max of CPU time and the
// max wall time per call (wall much above CPU = the call waited, or the machine preempted it).
//
//   build/tests/bench/tier_scheduler_cpu --dir /tmp/sched-cpu [--sessions 40 --turns 5]
//
// Exit status 0 when every request ended (a measurement, not a test: it asserts no timing).
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <tier/device/cpu_transfer_engine.h>
#include <tier/host/host.h>
#include <tier/host/identity.h>

#include "kv_pool.h"

namespace tier::bench {
namespace {

constexpr uint32_t kLanes = 4;
constexpr uint32_t kTokensPerPage = 16;  // one block per page

uint64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t WallNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Voluntary context switches of this thread: one during a call means the call blocked (a lock
// held elsewhere, a sleep, I/O), which preemption by other threads never counts as.
uint64_t VoluntarySwitches() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return static_cast<uint64_t>(u.ru_nvcsw);
}

struct Samples {
  const char* name;
  std::vector<uint64_t> cpu_ns, wall_ns;
  uint64_t waited = 0;  // calls that blocked (a voluntary context switch)
  void Add(uint64_t cpu, uint64_t wall, bool blocked) {
    cpu_ns.push_back(cpu);
    wall_ns.push_back(wall);
    waited += blocked ? 1 : 0;
  }
};

// Times one call on this thread: CPU, wall, and whether it blocked.
template <typename F>
auto Timed(Samples* s, F&& f) {
  const uint64_t switches0 = VoluntarySwitches(), cpu0 = ThreadCpuNs(), wall0 = WallNs();
  auto result = f();
  const uint64_t cpu = ThreadCpuNs() - cpu0, wall = WallNs() - wall0;
  s->Add(cpu, wall, VoluntarySwitches() != switches0);
  return result;
}

double Quantile(std::vector<uint64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return static_cast<double>(v[i]) / 1e3;
}

void Print(const Samples& s) {
  const uint64_t max_cpu =
      s.cpu_ns.empty() ? 0 : *std::max_element(s.cpu_ns.begin(), s.cpu_ns.end());
  const uint64_t max_wall =
      s.wall_ns.empty() ? 0 : *std::max_element(s.wall_ns.begin(), s.wall_ns.end());
  std::printf(
      "%-6s %6zu calls  cpu us: p50 %7.1f p99 %7.1f max %7.1f  wall us: p99 %8.1f max %8.1f"
      "  blocked %llu\n",
      s.name, s.cpu_ns.size(), Quantile(s.cpu_ns, 0.5), Quantile(s.cpu_ns, 0.99),
      static_cast<double>(max_cpu) / 1e3, Quantile(s.wall_ns, 0.99),
      static_cast<double>(max_wall) / 1e3, static_cast<unsigned long long>(s.waited));
  std::vector<size_t> order(s.cpu_ns.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return s.cpu_ns[a] > s.cpu_ns[b]; });
  std::printf("       slowest (call number: cpu us):");
  for (size_t i = 0; i < order.size() && i < 5; ++i) {
    std::printf(" %zu: %.1f", order[i], static_cast<double>(s.cpu_ns[order[i]]) / 1e3);
  }
  std::printf("\n");
}

ModelProfile MockProfile() {
  ModelProfile p;
  p.name = "mock-engine";
  p.model = "mock";
  p.gpu = "none";
  p.kv_dtype = "bf16";
  p.tokens_per_page = kTokensPerPage;
  p.full_attention_layers = 4;
  p.kv_bytes_per_token = 16384;  // a 16-token page of all layers: 256 KiB
  p.mtp_layers = 0;
  p.state_image = {{"recurrent", 48ull << 20}, {"conv", 2ull << 20}};
  p.hidden_state_bytes = 1ull << 20;
  p.prefill_chunk_tokens = 2048;
  p.prefill_chunk_ns = 2e6;
  p.prefill_token_ns = 25000;
  p.attention_pair_ns = 7.1;
  p.decode_token_ns = 2e7;
  p.transfer_batch_ns = 1e4;
  p.transfer_op_ns = 1e3;
  p.d2h_ns_per_byte = 0.04;
  p.h2d_ns_per_byte = 0.04;
  return p;
}

struct Options {
  std::string plugin = TIER_DISK_PLUGIN;
  std::string dir;
  uint32_t sessions = 40, turns = 5;
  uint64_t bytes_scale = 256;
  uint64_t seed = 1;
};

struct Lane {
  enum { kIdle, kPending, kSealing } stage = kIdle;
  uint32_t session = 0;
  uint64_t admission = 0, seal = 0;
  std::vector<uint32_t> restored;  // the server's pages of a ready, not shared admission
  std::unique_ptr<sim::KvPool::StateSet> state;
};

class Bench {
 public:
  explicit Bench(Options o) : o_(std::move(o)), rng_(o_.seed) {}

  int Run() {
    if (!Open()) return 2;
    for (uint32_t s = 0; s < o_.sessions; ++s) {
      for (uint32_t t = 0; t < o_.turns; ++t) queue_.push_back(s);
    }
    std::shuffle(queue_.begin(), queue_.end(), rng_);
    turn_.assign(o_.sessions, 0);
    active_.assign(o_.sessions, false);
    const uint64_t give_up = WallNs() + 600ull * 1000000000ull;
    std::vector<Event> events;
    while ((!queue_.empty() || AnyBusy()) && WallNs() < give_up) {
      for (Lane& lane : lanes_) {
        if (lane.stage == Lane::kIdle) StartNext(&lane);
      }
      events.clear();
      Timed(&poll_, [&] {
        host_->Poll(&events);
        return 0;
      });
      for (const Event& e : events) OnEvent(e);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    const HostStats st = host_->Stats();
    std::printf(
        "mock engine: %u sessions x %u turns, %u lanes, checkpoints %u-%u blocks "
        "(%.0f-%.0f MiB logical), bytes scale %llu\n",
        o_.sessions, o_.turns, kLanes, Blocks(0), Blocks(o_.turns - 1), Blocks(0) * 0.25,
        Blocks(o_.turns - 1) * 0.25, static_cast<unsigned long long>(o_.bytes_scale));
    std::printf(
        "outcomes: device hits %llu, host restores %llu, cold restores %llu, root %llu; "
        "seals refused %llu; spills %llu, evictions %llu\n",
        ull(device_hits_), ull(host_restores_), ull(cold_restores_), ull(roots_),
        ull(seal_refused_), ull(st.spills), ull(st.evictions));
    Print(admit_);
    Print(seal_);
    Print(poll_);
    const bool finished = queue_.empty() && !AnyBusy();
    host_.reset();
    if (!finished) std::fprintf(stderr, "gave up after 600 s with requests left\n");
    return finished ? 0 : 1;
  }

 private:
  static unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }
  static uint32_t Blocks(uint32_t turn) { return 700 + 250 * turn; }

  bool Open() {
    auto engine = device::MakeCpuTransferEngine({});
    if (!engine.ok()) return Fail(engine.status());
    engine_ = std::move(engine).value();
    profile_ = MockProfile();
    auto pool = sim::KvPool::Create(engine_.get(), profile_, o_.bytes_scale, 32768);
    if (!pool.ok()) return Fail(pool.status());
    pool_ = std::move(pool).value();
    for (uint32_t i = 0; i < kLanes; ++i) {
      auto set = pool_->NewStateSet();
      if (!set.ok()) return Fail(set.status());
      lanes_[i].state = std::move(set).value();
    }
    std::filesystem::create_directories(o_.dir);
    HostOptions h;
    h.plugin = o_.plugin;
    h.provider_options = {{"dir", o_.dir}, {"capacity_bytes", std::to_string(8ull << 30)}};
    h.namespace_id = CheckpointNamespace("sched-cpu", profile_, o_.bytes_scale);
    h.profile = profile_;
    h.pool = pool_->view();
    h.engine = engine_;
    h.bytes_scale = o_.bytes_scale;
    h.block_tokens = kTokensPerPage;
    h.device_capacity_bytes = 2ull << 30;  // ~5 checkpoints
    h.host_capacity_bytes = 3ull << 30;
    h.flush_host_at_close = false;
    auto host = Host::Open(std::move(h));
    if (!host.ok()) return Fail(host.status());
    host_ = std::move(host).value();
    return true;
  }
  static bool Fail(const Status& s) {
    std::fprintf(stderr, "tier_scheduler_cpu: %s\n", s.ToString().c_str());
    return false;
  }

  bool AnyBusy() const {
    for (const Lane& l : lanes_) {
      if (l.stage != Lane::kIdle) return true;
    }
    return false;
  }

  std::vector<uint64_t> SessionBlocks(uint32_t session, uint32_t turn) const {
    std::vector<uint64_t> blocks(Blocks(turn));
    for (size_t i = 0; i < blocks.size(); ++i) {
      blocks[i] = (static_cast<uint64_t>(session + 1) << 32) ^ (i * 0x9e3779b97f4a7c15ull + 7);
    }
    return blocks;
  }

  void StartNext(Lane* lane) {
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (active_[*it]) continue;
      lane->session = *it;
      queue_.erase(it);
      active_[lane->session] = true;
      Admit(lane);
      return;
    }
  }

  void Admit(Lane* lane) {
    blocks_ = SessionBlocks(lane->session, turn_[lane->session]);
    AdmitRequest r;
    r.blocks = blocks_;
    r.now_ns = WallNs();
    r.allocate_pages = [this](uint32_t n, std::vector<uint32_t>* out) {
      return pool_->Allocate(n, out);
    };
    r.state = lane->state->buffers;
    const Admission a = Timed(&admit_, [&] { return host_->Admit(r); });
    lane->admission = a.id;
    if (a.state == AdmissionState::kPending) {
      lane->stage = Lane::kPending;
      return;
    }
    Served(lane, a);
  }

  // The admission ended (ready or root): the request "prefills" the rest and seals its turn.
  void Served(Lane* lane, const Admission& a) {
    pool_->Unref(a.unused_pages);
    if (a.state == AdmissionState::kReady) {
      if (a.outcome == Outcome::kDeviceHit) {
        ++device_hits_;
        (void)a.state_copy.Wait();
      } else if (a.outcome == Outcome::kColdRestore) {
        ++cold_restores_;
      } else {
        ++host_restores_;
      }
      if (!a.pages_shared) lane->restored = a.pages;
    } else {
      ++roots_;
    }
    Seal(lane, a.state == AdmissionState::kReady);
  }

  void Seal(Lane* lane, bool release) {
    const std::vector<uint64_t> blocks = SessionBlocks(lane->session, turn_[lane->session]);
    std::vector<uint32_t> pages;
    const bool have_pages = pool_->Allocate(static_cast<uint32_t>(blocks.size()), &pages);
    Sealed sealed;
    if (have_pages) {
      SealRequest r;
      r.blocks = blocks;
      r.tokens = blocks.size() * kTokensPerPage;
      r.pages = pages;
      r.state = lane->state->buffers;
      r.now_ns = WallNs();
      sealed = Timed(&seal_, [&] { return host_->Seal(r); });
    }
    if (sealed.status.ok() && have_pages && !sealed.existed) pool_->HeldByHost(pages);
    pool_->Unref(pages);
    if (!sealed.status.ok() || !have_pages) ++seal_refused_;
    if (release) host_->Release(lane->admission);
    pool_->Unref(lane->restored);
    lane->restored.clear();
    ++turn_[lane->session];
    if (sealed.status.ok() && have_pages && !sealed.existed) {
      lane->seal = sealed.id;
      lane->stage = Lane::kSealing;  // its state buffers are read until kSealed
      return;
    }
    Done(lane);
  }

  void Done(Lane* lane) {
    active_[lane->session] = false;
    lane->stage = Lane::kIdle;
  }

  void OnEvent(const Event& e) {
    if (e.kind == Event::kPagesReleased) {
      pool_->ReleasedByHost(e.pages);
      return;
    }
    for (Lane& lane : lanes_) {
      if (e.kind == Event::kSealed && lane.stage == Lane::kSealing && lane.seal == e.id) {
        Done(&lane);
        return;
      }
      if ((e.kind == Event::kAdmissionReady || e.kind == Event::kAdmissionRoot) &&
          lane.stage == Lane::kPending && lane.admission == e.id) {
        Served(&lane, e.admission);
        return;
      }
    }
  }

  Options o_;
  std::mt19937_64 rng_;
  ModelProfile profile_;
  std::shared_ptr<device::TransferEngine> engine_;
  std::unique_ptr<sim::KvPool> pool_;
  std::unique_ptr<Host> host_;
  Lane lanes_[kLanes];
  std::deque<uint32_t> queue_;
  std::vector<uint32_t> turn_;
  std::vector<bool> active_;
  std::vector<uint64_t> blocks_;
  Samples admit_{"Admit", {}, {}}, seal_{"Seal", {}, {}}, poll_{"Poll", {}, {}};
  uint64_t device_hits_ = 0, host_restores_ = 0, cold_restores_ = 0, roots_ = 0;
  uint64_t seal_refused_ = 0;
};

}  // namespace
}  // namespace tier::bench

int main(int argc, char** argv) {
  tier::bench::Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--dir") {
      o.dir = value;
    } else if (flag == "--plugin") {
      o.plugin = value;
    } else if (flag == "--sessions") {
      o.sessions = static_cast<uint32_t>(std::stoul(value));
    } else if (flag == "--turns") {
      o.turns = static_cast<uint32_t>(std::stoul(value));
    } else if (flag == "--bytes-scale") {
      o.bytes_scale = std::stoull(value);
    } else if (flag == "--seed") {
      o.seed = std::stoull(value);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (o.dir.empty() || o.turns == 0 || o.sessions == 0) {
    std::fprintf(stderr,
                 "usage: tier_scheduler_cpu --dir DIR [--sessions N] [--turns N] "
                 "[--bytes-scale N] [--seed N] [--plugin PATH]\n");
    return 2;
  }
  std::filesystem::remove_all(o.dir);
  return tier::bench::Bench(o).Run();
}
