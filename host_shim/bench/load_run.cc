#include "load_run.h"

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <tier/host/identity.h>
#include <tier/host/model_profile.h>
#include "checkpoint_shape.h"
#include "fio_runner.h"
#include "provider_runner.h"
#include "sample_stats.h"
#include "segment_buffers.h"
#include "subprocess.h"

namespace tier::bench {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t NsBetween(Clock::time_point a, Clock::time_point b) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

// User + system CPU of this process (every thread, the provider's included), in ns.
uint64_t ProcessCpuNs() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto ns = [](const timeval& t) {
    return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_usec) * 1000ull;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

double Gbps(uint64_t bytes, uint64_t ns) {
  return ns == 0 ? 0 : double(bytes) / double(ns);
}
double CoreSecondsPerGb(uint64_t cpu_ns, uint64_t bytes) {
  return bytes == 0 ? 0 : (double(cpu_ns) / 1e9) / (double(bytes) / 1e9);
}

struct FioMix {
  double read_bytes_per_second = 0;
  double write_bytes_per_second = 0;
  std::string command;
};

// fio with `readers` sequential read jobs and `writers` write jobs running at once, each over its
// own file of `bytes`, O_DIRECT io_uring 1 MiB at `depth`, reported as one group. `dir` may list
// several directories separated by ':' (fio assigns each kind's job clones to them in turn).
Result<FioMix> RunFioMix(const BenchConfig& config, const std::string& dir, uint64_t bytes,
                         uint32_t readers, uint32_t writers, uint32_t depth) {
  const uint64_t mib = (bytes + (1u << 20) - 1) >> 20;
  std::vector<std::string> argv = {config.fio,
                                   "--directory=" + dir,
                                   "--bs=1M",
                                   "--size=" + std::to_string(mib) + "M",
                                   "--direct=1",
                                   "--ioengine=io_uring",
                                   "--iodepth=" + std::to_string(depth),
                                   "--group_reporting",
                                   "--output-format=json"};
  if (readers > 0) {
    for (const char* a : {"--name=restore", "--rw=read"}) argv.push_back(a);
    argv.push_back("--numjobs=" + std::to_string(readers));
  }
  if (writers > 0) {
    for (const char* a : {"--name=spill", "--rw=write", "--end_fsync=1"}) argv.push_back(a);
    argv.push_back("--numjobs=" + std::to_string(writers));
  }
  FioMix mix;
  mix.command = JoinCommand(argv);
  Result<Captured> run = RunCaptured(argv);
  if (!run.ok()) return run.status();
  if (run.value().exit_code != 0) {
    return Status(TIER_IO_ERROR, "fio exited with " + std::to_string(run.value().exit_code) + ": " +
                                     run.value().err.substr(0, 400));
  }
  try {
    const std::string& o = run.value().out;
    const size_t start = o.find('{');
    const nlohmann::json doc =
        nlohmann::json::parse(o.substr(start == std::string::npos ? 0 : start));
    for (const nlohmann::json& job : doc.at("jobs")) {
      mix.read_bytes_per_second += job.at("read").at("bw_bytes").get<double>();
      mix.write_bytes_per_second += job.at("write").at("bw_bytes").get<double>();
    }
  } catch (const std::exception& e) {
    return Status(TIER_IO_ERROR, std::string("cannot read fio's JSON output: ") + e.what());
  }
  return mix;
}

class LoadRun {
 public:
  LoadRun(const BenchConfig& config, const LoadConfig& load, std::ostream& progress)
      : config_(config), load_(load), progress_(progress) {}
  ~LoadRun() {
    runner_.reset();
    if (!work_.empty() && !config_.keep_files) {
      std::error_code ec;
      std::filesystem::remove_all(work_, ec);
    }
  }

  Status Run(std::ostream& out, nlohmann::json* json);

 private:
  Status Prepare();
  Status Round(uint32_t round);
  // Restores keys 0..n-1 (n threads) while `spillers` threads spill until the restores are done.
  Status Mix(uint32_t restorers, uint32_t spillers, bool record);
  // "<work>/<stem>0<sep><work>/<stem>1..." for --dirs directories (one: "<work>/<stem>").
  std::string DirList(const std::string& stem, const char* sep) const;
  tier_key RestoreKey(uint32_t i) const {
    return KeyFromText("tier-bench-load/r/" + std::to_string(i));
  }
  tier_key SpillKey(uint32_t i, uint64_t n) const {
    return KeyFromText("tier-bench-load/s/" + std::to_string(i) + "/" + std::to_string(n));
  }

  const BenchConfig& config_;
  const LoadConfig load_;
  std::ostream& progress_;
  CheckpointShape shape_;
  DataKind kind_ = DataKind::kRandom;
  std::string work_;
  std::unique_ptr<ProviderRunner> runner_;
  std::vector<SegmentBuffers> restore_into_;  // one per restorer
  SegmentBuffers source_;                     // what every spill writes (read-only)
  std::atomic<uint64_t> spill_seq_{0};

  // Figures, accumulated over rounds.
  std::vector<double> solo_ms_, loaded_ms_, no_spill_ms_;
  std::vector<double> mix_read_gbps_, mix_write_gbps_, fio_mix_read_gbps_, fio_mix_write_gbps_;
  std::vector<double> alone_read_gbps_, fio_read_gbps_;
  uint64_t restore_cpu_ns_ = 0, restore_bytes_ = 0, spill_cpu_ns_ = 0, spill_bytes_ = 0;
  uint64_t spill_stored_bytes_ = 0;
  std::string fio_mix_command_, fio_read_command_;
  std::string fio_note_;
  // Set by Mix.
  uint64_t mix_restore_bytes_ = 0, mix_restore_ns_ = 0, mix_spill_bytes_ = 0, mix_spill_ns_ = 0;
};

Status LoadRun::Prepare() {
  std::error_code ec;
  if (!std::filesystem::is_directory(config_.dir, ec)) {
    return Status(TIER_INVALID_ARGUMENT, "--dir '" + config_.dir + "' is not a directory");
  }
  Result<ModelProfile> profile = LoadModelProfile(ResolveProfilePath(config_.profile));
  if (!profile.ok()) return profile.status();
  shape_ = ShapeForTokens(profile.value(), config_.tokens);
  if (config_.size_mib > 0) {
    auto sized = ShapeForBytes(profile.value(), config_.tokens, config_.size_mib << 20);
    if (!sized.ok()) return sized.status();
    shape_ = sized.take();
  }
  if (!config_.kinds.empty()) kind_ = config_.kinds.front();
  work_ = config_.dir + "/tier-bench-load-" + std::to_string(::getpid());
  for (const char* stem : {"fio", "ours"}) {
    for (uint32_t d = 0; d < load_.dirs; ++d) {
      const std::string path = work_ + "/" + stem + (load_.dirs > 1 ? std::to_string(d) : "");
      std::filesystem::create_directories(path, ec);
      if (ec) return Status(TIER_IO_ERROR, "create '" + path + "': " + ec.message());
    }
  }
  const uint64_t bytes = shape_.logical_bytes();
  ProviderOptions options = {
      {load_.dirs > 1 ? "dirs" : "dir", DirList("ours", ",")},
      {"capacity_bytes",
       std::to_string((load_.restores + 2 * load_.spills + 1) * bytes + (1ull << 30))}};
  for (const auto& kv : config_.provider_options) options.push_back(kv);
  auto runner =
      ProviderRunner::Open(config_.plugin, "tier-bench-load", options, config_.encryption_key_file);
  if (!runner.ok()) return runner.status();
  runner_ = runner.take();
  auto source = SegmentBuffers::Allocate(shape_, config_.misalign);
  if (!source.ok()) return source.status();
  source_ = source.take();
  source_.Fill(kind_, 1, std::thread::hardware_concurrency());
  for (uint32_t i = 0; i < std::max(1u, load_.restores); ++i) {
    auto buffers = SegmentBuffers::Allocate(shape_, config_.misalign);
    if (!buffers.ok()) return buffers.status();
    restore_into_.push_back(buffers.take());
    Result<OpTiming> t = runner_->Spill(RestoreKey(i), shape_, source_);
    if (!t.ok()) return t.status();
  }
  progress_ << "tier-bench load: " << shape_.profile << ", " << bytes << " bytes ("
            << shape_.Describe() << "), " << load_.restores << " restores + " << load_.spills
            << " spills in flight, " << config_.repeats << " rounds, io_path=" << runner_->io_path()
            << ", kind " << DataKindName(kind_) << ", " << load_.dirs << " director"
            << (load_.dirs == 1 ? "y" : "ies") << std::endl;
  return Status::Ok();
}

std::string LoadRun::DirList(const std::string& stem, const char* sep) const {
  if (load_.dirs <= 1) return work_ + "/" + stem;
  std::string list;
  for (uint32_t d = 0; d < load_.dirs; ++d) {
    list += (d == 0 ? "" : sep) + work_ + "/" + stem + std::to_string(d);
  }
  return list;
}

Status LoadRun::Mix(uint32_t restorers, uint32_t spillers, bool record) {
  const uint64_t bytes = shape_.logical_bytes();
  std::mutex mu;
  Status first = Status::Ok();
  auto fail = [&](const Status& s) {
    std::lock_guard lock(mu);
    if (first.ok()) first = s;
  };
  std::atomic<uint32_t> restores_left{restorers};
  std::atomic<uint64_t> spilled{0}, stored{0};
  std::vector<uint64_t> restore_ns(restorers, 0);
  const Clock::time_point t0 = Clock::now();
  std::vector<Clock::time_point> spill_end(spillers, t0);
  std::vector<std::thread> threads;
  for (uint32_t s = 0; s < spillers; ++s) {
    threads.emplace_back([&, s] {
      // Spills keep coming while restores are pending (at least one each): pressure never lets up.
      do {
        const tier_key key = SpillKey(s, spill_seq_++);
        Result<OpTiming> t = runner_->Spill(key, shape_, source_);
        if (!t.ok()) return fail(t.status());
        spilled += bytes;
        stored += t.value().stored_bytes;
        spill_end[s] = Clock::now();
        (void)runner_->Remove(key);
      } while (restores_left.load() > 0);
    });
  }
  for (uint32_t r = 0; r < restorers; ++r) {
    threads.emplace_back([&, r] {
      Result<OpTiming> t = runner_->Restore(RestoreKey(r), shape_, restore_into_[r]);
      if (!t.ok())
        fail(t.status());
      else
        restore_ns[r] = t.value().wall_ns;
      --restores_left;
    });
  }
  for (std::thread& t : threads) t.join();
  if (!first.ok()) return first;
  uint64_t restore_span_ns = 0;
  for (uint64_t ns : restore_ns) restore_span_ns = std::max(restore_span_ns, ns);
  uint64_t spill_span_ns = 0;
  for (const Clock::time_point& end : spill_end)
    spill_span_ns = std::max(spill_span_ns, NsBetween(t0, end));
  mix_restore_bytes_ = uint64_t{restorers} * bytes;
  mix_restore_ns_ = restore_span_ns;
  mix_spill_bytes_ = spilled.load();
  mix_spill_ns_ = spill_span_ns;
  for (uint64_t ns : restore_ns)
    (spillers > 0 ? loaded_ms_ : no_spill_ms_).push_back(double(ns) / 1e6);
  if (record) spill_stored_bytes_ += stored.load();
  return Status::Ok();
}

Status LoadRun::Round(uint32_t round) {
  const uint64_t bytes = shape_.logical_bytes();
  // The baseline: the same restore alone.
  Result<OpTiming> solo = runner_->Restore(RestoreKey(0), shape_, restore_into_[0]);
  if (!solo.ok()) return solo.status();
  solo_ms_.push_back(double(solo.value().wall_ns) / 1e6);
  if (round == 0) {
    uint64_t offset = 0;
    if (restore_into_[0].FirstMismatch(kind_, 1, std::thread::hardware_concurrency(), &offset) >= 0)
      return Status(TIER_DATA_LOSS, "load: a restore was not byte-exact");
  }
  // The mix (spills alone below when there are no restores to mix them with).
  if (load_.spills > 0 && load_.restores > 0) {
    if (Status s = Mix(load_.restores, load_.spills, true); !s.ok()) return s;
    mix_read_gbps_.push_back(Gbps(mix_restore_bytes_, mix_restore_ns_));
    mix_write_gbps_.push_back(Gbps(mix_spill_bytes_, mix_spill_ns_));
  }
  // Restores alone, then spills alone, each with its CPU.
  if (load_.restores > 0) {
    const uint64_t cpu0 = ProcessCpuNs();
    if (Status s = Mix(load_.restores, 0, false); !s.ok()) return s;
    restore_cpu_ns_ += ProcessCpuNs() - cpu0;
    restore_bytes_ += mix_restore_bytes_;
    alone_read_gbps_.push_back(Gbps(mix_restore_bytes_, mix_restore_ns_));
  }
  if (load_.spills > 0) {
    std::vector<std::thread> threads;
    std::mutex mu;
    Status first = Status::Ok();
    std::vector<tier_key> keys;
    for (uint32_t s = 0; s < load_.spills; ++s) keys.push_back(SpillKey(s, spill_seq_++));
    const uint64_t cpu0 = ProcessCpuNs();
    for (uint32_t s = 0; s < load_.spills; ++s) {
      threads.emplace_back([&, s] {
        Result<OpTiming> t = runner_->Spill(keys[s], shape_, source_);
        std::lock_guard lock(mu);
        if (!t.ok() && first.ok()) first = t.status();
      });
    }
    for (std::thread& t : threads) t.join();
    spill_cpu_ns_ += ProcessCpuNs() - cpu0;
    spill_bytes_ += uint64_t{load_.spills} * bytes;
    if (!first.ok()) return first;
    for (const tier_key& key : keys) (void)runner_->Remove(key);
  }
  // fio: the same mix, then the readers alone.
  if (config_.run_fio && fio_note_.empty() && load_.spills > 0 && load_.restores > 0) {
    const uint32_t depth = config_.queue_depth();
    Result<FioMix> mix =
        RunFioMix(config_, DirList("fio", ":"), bytes, load_.restores, load_.spills, depth);
    if (!mix.ok()) return mix.status();
    fio_mix_command_ = mix.value().command;
    fio_mix_read_gbps_.push_back(mix.value().read_bytes_per_second / 1e9);
    fio_mix_write_gbps_.push_back(mix.value().write_bytes_per_second / 1e9);
  }
  if (config_.run_fio && fio_note_.empty()) {
    const uint32_t depth = config_.queue_depth();
    if (load_.restores > 0) {
      Result<FioMix> read =
          RunFioMix(config_, DirList("fio", ":"), bytes, load_.restores, 0, depth);
      if (!read.ok()) return read.status();
      fio_read_command_ = read.value().command;
      fio_read_gbps_.push_back(read.value().read_bytes_per_second / 1e9);
    }
  }
  progress_ << "  round " << round + 1 << ": solo restore " << solo_ms_.back() << " ms";
  if (load_.spills > 0 && load_.restores > 0) {
    const std::vector<double> last(loaded_ms_.end() - load_.restores, loaded_ms_.end());
    progress_ << ", under spills p50 " << Median(last) << " ms";
  }
  progress_ << std::endl;
  return Status::Ok();
}

std::string Fmt(double v, int digits = 3) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

nlohmann::json OrNull(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

std::optional<double> RatioOfMedians(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.empty() || b.empty() || Median(b) <= 0) return std::nullopt;
  return Median(a) / Median(b);
}

Status LoadRun::Run(std::ostream& out, nlohmann::json* json) {
  if (Status s = Prepare(); !s.ok()) return s;
  if (config_.run_fio && !FioVersion(config_.fio).ok()) fio_note_ = "fio not installed";
  if (!config_.run_fio) fio_note_ = "fio skipped (--no-fio)";
  for (uint32_t r = 0; r < config_.repeats; ++r) {
    if (Status s = Round(r); !s.ok()) return s;
  }
  const double solo_p50 = Median(solo_ms_);
  const double loaded_p50 = Percentile(loaded_ms_, 50), loaded_p99 = Percentile(loaded_ms_, 99);
  const double no_spill_p50 = Percentile(no_spill_ms_, 50);
  auto x = [](double a, double b) { return b > 0 ? a / b : 0; };
  const auto read_vs_fio_mix = RatioOfMedians(mix_read_gbps_, fio_mix_read_gbps_);
  const auto write_vs_fio_mix = RatioOfMedians(mix_write_gbps_, fio_mix_write_gbps_);
  const auto alone_vs_fio = RatioOfMedians(alone_read_gbps_, fio_read_gbps_);
  const double restore_cpu = CoreSecondsPerGb(restore_cpu_ns_, restore_bytes_);
  const double spill_cpu = CoreSecondsPerGb(spill_cpu_ns_, spill_bytes_);
  const std::string na = "n/a";
  auto ratio = [&](const std::optional<double>& v) { return v ? Fmt(*v, 2) + "x" : na; };
  out << "tier-bench load: " << load_.restores << " restores + " << load_.spills
      << " spills in flight, " << shape_.logical_bytes() << " bytes each, " << config_.repeats
      << " rounds, io_path=" << runner_->io_path() << ", kind " << DataKindName(kind_) << ", "
      << load_.dirs << " director" << (load_.dirs == 1 ? "y" : "ies") << "\n"
      << "  restore latency: solo p50 " << Fmt(solo_p50, 1) << " ms; under load p50 "
      << Fmt(loaded_p50, 1) << " ms (x" << Fmt(solo_p50 > 0 ? loaded_p50 / solo_p50 : 0, 2)
      << "), p99 " << Fmt(loaded_p99, 1) << " ms (x"
      << Fmt(solo_p50 > 0 ? loaded_p99 / solo_p50 : 0, 2) << ")\n"
      << "  the same " << load_.restores << " restores without spills: p50 " << Fmt(no_spill_p50, 1)
      << " ms; with spills p50 x" << Fmt(x(loaded_p50, no_spill_p50), 2) << ", p99 x"
      << Fmt(x(loaded_p99, no_spill_p50), 2) << " (the reads-first figure)\n"
      << "  mix: restores " << Fmt(Median(mix_read_gbps_)) << " GB/s aggregate (fio mix "
      << Fmt(Median(fio_mix_read_gbps_)) << ", " << ratio(read_vs_fio_mix) << "), spills "
      << Fmt(Median(mix_write_gbps_)) << " GB/s (fio mix " << Fmt(Median(fio_mix_write_gbps_))
      << ", " << ratio(write_vs_fio_mix) << ")\n"
      << "  restores alone: " << Fmt(Median(alone_read_gbps_)) << " GB/s aggregate (fio "
      << load_.restores << " readers " << Fmt(Median(fio_read_gbps_)) << ", " << ratio(alone_vs_fio)
      << ")\n"
      << "  CPU: restore " << Fmt(restore_cpu, 4) << " core-s/GB, spill " << Fmt(spill_cpu, 4)
      << " core-s/GB (getrusage of the whole process, provider threads included)\n";
  if (!fio_note_.empty()) out << "  " << fio_note_ << "\n";
  if (!fio_mix_command_.empty()) out << "  fio mix: " << fio_mix_command_ << "\n";
  nlohmann::json j;
  j["command_line"] = config_.command_line;
  j["restores_in_flight"] = load_.restores;
  j["spills_in_flight"] = load_.spills;
  j["dirs"] = load_.dirs;
  j["checkpoint_bytes"] = shape_.logical_bytes();
  j["rounds"] = config_.repeats;
  j["io_path"] = runner_->io_path();
  j["data_kind"] = DataKindName(kind_);
  j["queue_depth"] = config_.queue_depth();
  j["provider_options"] = nlohmann::json::array();
  for (const auto& [k, v] : config_.provider_options) j["provider_options"].push_back(k + "=" + v);
  j["restore_solo_ms"] = solo_ms_;
  j["restore_loaded_ms"] = loaded_ms_;
  j["restore_solo_p50_ms"] = solo_p50;
  j["restore_loaded_p50_ms"] = loaded_p50;
  j["restore_loaded_p99_ms"] = loaded_p99;
  j["restore_loaded_p50_vs_solo"] = solo_p50 > 0 ? loaded_p50 / solo_p50 : 0;
  j["restore_loaded_p99_vs_solo"] = solo_p50 > 0 ? loaded_p99 / solo_p50 : 0;
  j["restore_no_spill_ms"] = no_spill_ms_;
  j["restore_no_spill_p50_ms"] = no_spill_p50;
  j["restore_loaded_p50_vs_no_spill"] = x(loaded_p50, no_spill_p50);
  j["restore_loaded_p99_vs_no_spill"] = x(loaded_p99, no_spill_p50);
  j["mix_read_gbps"] = mix_read_gbps_;
  j["mix_write_gbps"] = mix_write_gbps_;
  j["fio_mix_read_gbps"] = fio_mix_read_gbps_;
  j["fio_mix_write_gbps"] = fio_mix_write_gbps_;
  j["mix_read_vs_fio"] = OrNull(read_vs_fio_mix);
  j["mix_write_vs_fio"] = OrNull(write_vs_fio_mix);
  j["restores_alone_gbps"] = alone_read_gbps_;
  j["fio_readers_gbps"] = fio_read_gbps_;
  j["restores_alone_vs_fio"] = OrNull(alone_vs_fio);
  j["restore_core_seconds_per_gb"] = restore_cpu;
  j["spill_core_seconds_per_gb"] = spill_cpu;
  j["spill_stored_bytes"] = spill_stored_bytes_;
  j["fio_mix_command"] = fio_mix_command_;
  j["fio_read_command"] = fio_read_command_;
  j["fio_note"] = fio_note_;
  *json = nlohmann::json{{"load", j}};
  return Status::Ok();
}

}  // namespace

Status RunLoad(const BenchConfig& config, const LoadConfig& load, std::ostream& progress,
               std::ostream& out, nlohmann::json* json) {
  if (load.restores == 0 && load.spills == 0)
    return Status(TIER_INVALID_ARGUMENT, "load mode needs restores or spills in flight");
  LoadRun run(config, load, progress);
  return run.Run(out, json);
}

}  // namespace tier::bench
