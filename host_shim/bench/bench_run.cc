#include "bench_run.h"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <thread>

#include <tier/host/model_profile.h>
#include "checkpoint_bytes.h"
#include "fio_runner.h"
#include "naive_peer.h"
#include "provider_runner.h"
#include "rados_bench_runner.h"
#include "segment_buffers.h"

namespace tier::bench {
namespace {

using Clock = std::chrono::steady_clock;

uint64_t NsSince(Clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

std::string FilesystemName(const std::string& dir) {
  struct statfs fs {};
  if (::statfs(dir.c_str(), &fs) != 0) return "unknown";
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0xEF53:
      return "ext4";
    case 0x58465342:
      return "xfs";
    case 0x9123683E:
      return "btrfs";
    case 0x01021994:
      return "tmpfs";
    case 0x794c7630:
      return "overlayfs";
    case 0x2FC12FC1:
      return "zfs";
    case 0xF2F52010:
      return "f2fs";
    default: {
      char hex[32];
      std::snprintf(hex, sizeof(hex), "0x%lx", static_cast<unsigned long>(fs.f_type));
      return hex;
    }
  }
}

char Letter(const std::string& id) {
  return id == kFio          ? 'f'
         : id == kRadosBench ? 'b'
         : id == kNaive      ? 'n'
         : id == kOurs       ? 'o'
         : id == kOursZstd   ? 'z'
                             : 'r';
}

class Run {
 public:
  Run(const BenchConfig& config, std::string self_exe, std::ostream& progress)
      : config_(config), self_exe_(std::move(self_exe)), progress_(progress) {}
  ~Run() { Cleanup(); }

  Result<BenchResult> Go() {
    const auto t0 = start_;
    if (Status s = Prepare(); !s.ok()) return s;
    for (DataKind kind : config_.kinds) {
      if (Status s = MeasureKind(kind); !s.ok()) return s;
    }
    ours_.reset();
    ours_raw_.reset();
    ours_zstd_.reset();
    source_ = SegmentBuffers();
    restored_ = SegmentBuffers();
    MeasureMemory();
    result_.elapsed_ns = NsSince(t0);
    return result_;
  }

 private:
  Status Prepare();
  Status OpenProviders();
  Status MeasureKind(DataKind kind);
  Status SpillOne(ContestantRun& c, const KindRun& kind, uint32_t round);
  Status RestoreOne(ContestantRun& c, const KindRun& kind, uint32_t round);
  void Forget(ContestantRun& c, const KindRun& kind, uint32_t round, bool keep);
  void MeasureMemory();
  void Cleanup();
  ProviderRunner* RunnerFor(const std::string& id) {
    return id == kOurs       ? ours_.get()
           : id == kOursRaw  ? ours_raw_.get()
           : id == kOursZstd ? ours_zstd_.get()
                             : nullptr;
  }
  std::string KeyText(DataKind kind, const std::string& id, uint32_t round) const {
    return "tier-bench/" + std::string(DataKindName(kind)) + "/" + id + "/" + std::to_string(round);
  }
  ProviderOptions OptionsFor(const std::string& id) const;
  RadosBenchJob RadosJob(bool write) const;

  const BenchConfig& config_;
  const Clock::time_point start_ = Clock::now();
  const std::string self_exe_;
  std::ostream& progress_;
  BenchResult result_;
  std::string profile_path_;
  std::string work_;
  std::string namespace_id_;
  std::unique_ptr<ProviderRunner> ours_, ours_raw_, ours_zstd_;
  SegmentBuffers source_, restored_;
  std::string kept_key_;  // the provider checkpoint left for the memory probe
  DataKind kept_kind_ = DataKind::kRandom;
  uint64_t kept_seed_ = 0;
};

Status Run::Prepare() {
  struct stat st {};
  if (::stat(config_.dir.c_str(), &st) != 0) {
    return Status(TIER_INVALID_ARGUMENT, "--dir '" + config_.dir + "': " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status(TIER_INVALID_ARGUMENT, "--dir '" + config_.dir + "' is not a directory");
  }
  for (const auto& [key, value] : config_.provider_options) {
    if (key == "dir" || key == "capacity_bytes" || key == "capacity_gib") {
      return Status(TIER_INVALID_ARGUMENT, "--tier-opt " + key +
                                               " is set by tier-bench (a fresh directory under "
                                               "--dir, room for its checkpoints)");
    }
  }
  profile_path_ = ResolveProfilePath(config_.profile);
  Result<ModelProfile> profile = LoadModelProfile(profile_path_);
  if (!profile.ok()) return profile.status();
  result_.shape = ShapeForTokens(profile.value(), config_.tokens);
  if (config_.size_mib > 0) {
    auto sized = ShapeForBytes(profile.value(), config_.tokens, config_.size_mib << 20);
    if (!sized.ok()) return sized.status();
    result_.shape = sized.take();
  }
  const uint64_t bytes = result_.shape.logical_bytes();
  namespace_id_ = "tier-bench/" + profile.value().LayoutFingerprint();

  // Room for one checkpoint per contestant at once, plus the one kept for the memory probe (an
  // object store keeps them in its pool: only the memory probe's request goes to --dir).
  struct statvfs vfs {};
  if (!config_.object_store() && ::statvfs(config_.dir.c_str(), &vfs) == 0) {
    const uint64_t avail = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    const uint64_t need = 4 * bytes + (512ull << 20);
    if (avail < need) {
      return Status(TIER_NO_SPACE, "--dir '" + config_.dir + "' has " +
                                       std::to_string(avail >> 20) + " MiB free; this run needs " +
                                       std::to_string(need >> 20) + " MiB");
    }
  }
  work_ = config_.dir + "/tier-bench-" + std::to_string(::getpid());
  std::error_code ec;
  for (const char* sub : {"", "/naive"}) {
    std::filesystem::create_directories(work_ + sub, ec);
    if (ec) return Status(TIER_IO_ERROR, "create '" + work_ + sub + "': " + ec.message());
  }

  result_.command_line = config_.command_line;
  result_.plugin = config_.plugin;
  result_.dir = config_.dir;
  result_.filesystem = FilesystemName(config_.dir);
  result_.queue_depth = config_.queue_depth();
  result_.repeats = config_.repeats;
  result_.misalign = config_.misalign;
  result_.cpus = std::thread::hardware_concurrency();
  result_.object_store = config_.object_store();
  if (result_.object_store) {
    // The local disk is not what an object store moves its bytes over: rados bench is its limit.
    result_.fio_note = "fio not run (object store: rados bench is the limit)";
    Result<std::string> version = RadosVersion(config_.rados);
    if (!config_.run_rados_bench) {
      result_.rados_note = "rados bench skipped (--no-rados-bench)";
    } else if (version.ok()) {
      result_.rados_version = version.value();
    } else {
      result_.rados_note = "rados not installed";
    }
  } else if (config_.run_fio) {
    Result<std::string> version = FioVersion(config_.fio);
    if (version.ok()) {
      result_.fio_version = version.value();
    } else {
      result_.fio_note = "fio not installed";
    }
  } else {
    result_.fio_note = "fio skipped (--no-fio)";
  }
  if (Status s = OpenProviders(); !s.ok()) return s;

  auto source = SegmentBuffers::Allocate(result_.shape, config_.misalign);
  if (!source.ok()) return source.status();
  source_ = source.take();
  auto restored = SegmentBuffers::Allocate(result_.shape, config_.misalign);
  if (!restored.ok()) return restored.status();
  restored_ = restored.take();
  progress_ << "tier-bench: " << result_.shape.profile << ", " << bytes << " bytes ("
            << result_.shape.Describe() << "), " << config_.repeats << " rounds, dir "
            << config_.dir << " (" << result_.filesystem << "), provider " << result_.provider_name
            << " io_path=" << result_.io_path << std::endl;
  return Status::Ok();
}

ProviderOptions Run::OptionsFor(const std::string& id) const {
  const uint64_t bytes = result_.shape.logical_bytes();
  const std::string sub = id == kOurs ? "ours" : id == kOursRaw ? "ours-raw" : "ours-zstd";
  ProviderOptions options = {{"capacity_bytes", std::to_string(3 * bytes + (1ull << 30))}};
  // An object store: every contestant in a namespace of its own on the pool, not a directory.
  if (config_.object_store()) {
    options.emplace_back("namespace_prefix",
                         "tier-bench-" + std::to_string(::getpid()) + "/" + sub);
  } else {
    options.emplace_back("dir", work_ + "/" + sub);
  }
  for (const auto& [k, v] : config_.provider_options) {
    if (id != kOurs && k == "compression") continue;
    options.emplace_back(k, v);
  }
  if (id == kOursRaw) options.emplace_back("compression", "off");
  if (id == kOursZstd) options.emplace_back("compression", "zstd");
  return options;
}

Status Run::OpenProviders() {
  auto ours = ProviderRunner::Open(config_.plugin, namespace_id_, OptionsFor(kOurs),
                                   config_.encryption_key_file);
  if (!ours.ok()) return ours.status();
  ours_ = ours.take();
  result_.provider_name = ours_->provider_name();
  result_.io_path = ours_->io_path();
  for (const auto& [k, v] : OptionsFor(kOurs)) result_.provider_options.push_back(k + "=" + v);
  bool compressible = false;
  for (DataKind kind : config_.kinds) compressible = compressible || kind != DataKind::kRandom;
  if (compressible) {
    auto raw = ProviderRunner::Open(config_.plugin, namespace_id_, OptionsFor(kOursRaw),
                                    config_.encryption_key_file);
    if (!raw.ok()) return raw.status();
    ours_raw_ = raw.take();
  }
  if (compressible && config_.with_zstd) {
    auto zstd = ProviderRunner::Open(config_.plugin, namespace_id_, OptionsFor(kOursZstd),
                                     config_.encryption_key_file);
    if (!zstd.ok()) return zstd.status();
    ours_zstd_ = zstd.take();
  }
  return Status::Ok();
}

Status Run::MeasureKind(DataKind kind) {
  KindRun run;
  run.kind = kind;
  run.seed = 1 + static_cast<uint64_t>(kind);
  // The provider's default when not given: disk compresses (auto), rados does not (off).
  const std::string compression =
      config_.option("compression", config_.object_store() ? "off" : "auto");
  auto add = [&](const char* id, std::string label, bool available, std::string note) {
    ContestantRun c;
    c.id = id;
    c.label = std::move(label);
    c.available = available;
    c.note = std::move(note);
    c.logical_bytes = result_.shape.logical_bytes();
    run.contestants.push_back(std::move(c));
  };
  if (kind == DataKind::kRandom && result_.object_store) {
    // The store's own limit does not look at the bytes either: measured once, on random data.
    if (config_.run_rados_bench) {
      add(kRadosBench, "rados bench (limit)", !result_.rados_version.empty(),
          result_.rados_version.empty() ? result_.rados_note : result_.rados_version);
    }
  } else if (kind == DataKind::kRandom) {
    // The limit and the peer do not look at the bytes: measured once, on random data.
    if (config_.run_fio) {
      add(kFio, "fio (limit)", !result_.fio_version.empty(),
          result_.fio_version.empty() ? result_.fio_note : result_.fio_version);
    }
    if (config_.run_naive) add(kNaive, "naive peer", true, "FILE* per segment, one thread");
  } else {
    add(kOursRaw, "ours (compression=off)", true, "");
    if (config_.with_zstd) add(kOursZstd, "ours (compression=zstd)", true, "");
  }
  add(kOurs, "ours (compression=" + compression + ")", true, "");

  const auto t_fill = Clock::now();
  source_.Fill(kind, run.seed, std::max(1u, std::thread::hardware_concurrency()));
  progress_ << DataKindName(kind) << ": " << DataKindDescription(kind) << " (filled in "
            << NsSince(t_fill) / 1000000 << " ms)" << std::endl;

  const size_t n = run.contestants.size();
  for (uint32_t round = 0; round < config_.repeats; ++round) {
    std::string order;
    for (size_t i = 0; i < n; ++i) {
      ContestantRun& c = run.contestants[(i + round) % n];
      if (!c.available) continue;
      order += Letter(c.id);
      if (Status s = SpillOne(c, run, round); !s.ok()) return s;
    }
    if (!result_.object_store) {
      Result<CacheState> cache = EvictDirectory(work_);
      if (!cache.ok()) return cache.status();
      if (cache.value().resident_pages >= result_.worst_cache.resident_pages) {
        result_.worst_cache = cache.value();
      }
    }
    order += '|';
    for (size_t i = 0; i < n; ++i) {
      ContestantRun& c = run.contestants[(i + n - round % n) % n];
      if (!c.available) continue;
      order += Letter(c.id);
      if (Status s = RestoreOne(c, run, round); !s.ok()) return s;
    }
    progress_ << "  round " << round + 1 << "/" << config_.repeats << " (order " << order << "):";
    for (const ContestantRun& c : run.contestants) {
      if (!c.available) continue;
      char line[128];
      std::snprintf(line, sizeof(line), " %s %.2f/%.2f", c.id.c_str(),
                    double(c.logical_bytes) / double(c.spill_ns.back()),
                    double(c.logical_bytes) / double(c.restore_ns.back()));
      progress_ << line;
    }
    progress_ << " GB/s spill/restore [" << NsSince(start_) / 1000000 << " ms]" << std::endl;
    const bool last_random = kind == DataKind::kRandom && round + 1 == config_.repeats;
    for (ContestantRun& c : run.contestants) {
      if (c.available) Forget(c, run, round, last_random && c.id == kOurs);
    }
  }
  result_.kinds.push_back(std::move(run));
  return Status::Ok();
}

RadosBenchJob Run::RadosJob(bool write) const {
  RadosBenchJob job;
  job.rados = config_.rados;
  job.conf = config_.option("conf", "");
  job.client = config_.option("client", "admin");
  if (job.client.rfind("client.", 0) == 0) job.client = job.client.substr(7);
  job.keyring = config_.option("keyring", "");
  job.pool = config_.option("pool", "");
  job.rados_namespace = "tier-bench-" + std::to_string(::getpid()) + "/rados-bench";
  job.run_name = "tier-bench-" + std::to_string(::getpid());
  job.object_bytes = config_.object_bytes();
  job.concurrency = result_.queue_depth;
  job.bytes = result_.shape.logical_bytes();
  // The same client throttle as the provider gives itself (plugins/rados/cluster.cc): at least
  // the default 100 MiB, else two windows of queue_depth objects.
  job.inflight_op_bytes =
      std::max<uint64_t>(100ull << 20, 2ull * job.concurrency * (job.object_bytes + (64u << 10)));
  job.write = write;
  return job;
}

Status Run::SpillOne(ContestantRun& c, const KindRun& kind, uint32_t round) {
  const uint64_t bytes = result_.shape.logical_bytes();
  if (c.id == kRadosBench) {
    Result<RadosBenchResult> bench = RunRadosBench(RadosJob(true));
    if (!bench.ok()) return bench.status();
    result_.rados_write_command = bench.value().command;
    c.logical_bytes = bench.value().bytes;
    c.spill_ns.push_back(
        static_cast<uint64_t>(1e9 * double(bench.value().bytes) / bench.value().bytes_per_second));
    return Status::Ok();
  }
  if (c.id == kFio) {
    FioJob job{config_.fio, work_ + "/fio.dat", bytes, result_.queue_depth, true};
    Result<FioResult> fio = RunFio(job);
    if (!fio.ok()) return fio.status();
    result_.fio_write_command = fio.value().command;
    c.logical_bytes = fio.value().bytes;
    c.spill_ns.push_back(
        static_cast<uint64_t>(1e9 * double(fio.value().bytes) / fio.value().bytes_per_second));
    return Status::Ok();
  }
  if (c.id == kNaive) {
    Result<NaiveSpillTimes> t = NaiveSpill(work_ + "/naive", result_.shape, source_);
    if (!t.ok()) return t.status();
    c.spill_ns.push_back(t.value().synced_ns);
    c.spill_buffered_ns.push_back(t.value().buffered_ns);
    return Status::Ok();
  }
  ProviderRunner* runner = RunnerFor(c.id);
  Result<OpTiming> t =
      runner->Spill(KeyFromText(KeyText(kind.kind, c.id, round)), result_.shape, source_);
  if (!t.ok()) return Status(t.status().code(), c.label + ": " + t.status().message());
  c.spill_ns.push_back(t.value().wall_ns);
  c.stored_bytes = t.value().stored_bytes;
  c.stored_per_round.push_back(t.value().stored_bytes);
  return Status::Ok();
}

Status Run::RestoreOne(ContestantRun& c, const KindRun& kind, uint32_t round) {
  if (c.id == kRadosBench) {
    Result<RadosBenchResult> bench = RunRadosBench(RadosJob(false));
    if (!bench.ok()) return bench.status();
    result_.rados_read_command = bench.value().command;
    c.restore_ns.push_back(
        static_cast<uint64_t>(1e9 * double(bench.value().bytes) / bench.value().bytes_per_second));
    return Status::Ok();
  }
  if (c.id == kFio) {
    FioJob job{config_.fio, work_ + "/fio.dat", c.logical_bytes, result_.queue_depth, false};
    Result<FioResult> fio = RunFio(job);
    if (!fio.ok()) return fio.status();
    result_.fio_read_command = fio.value().command;
    c.restore_ns.push_back(
        static_cast<uint64_t>(1e9 * double(fio.value().bytes) / fio.value().bytes_per_second));
    return Status::Ok();
  }
  restored_.Poison();
  if (c.id == kNaive) {
    Result<uint64_t> t = NaiveRestore(work_ + "/naive", result_.shape, restored_);
    if (!t.ok()) return t.status();
    c.restore_ns.push_back(t.value());
  } else {
    Result<OpTiming> t = RunnerFor(c.id)->Restore(KeyFromText(KeyText(kind.kind, c.id, round)),
                                                  result_.shape, restored_);
    if (!t.ok()) return Status(t.status().code(), c.label + ": " + t.status().message());
    c.restore_ns.push_back(t.value().wall_ns);
  }
  ++c.restores_checked;
  const int64_t bad = restored_.FirstDifference(source_);
  if (bad >= 0) {
    return Status(TIER_DATA_LOSS, c.label + ": restore of " + DataKindName(kind.kind) + " round " +
                                      std::to_string(round + 1) + " is not byte-exact (segment " +
                                      result_.shape.segments[bad].name + " differs)");
  }
  ++c.restores_exact;
  return Status::Ok();
}

void Run::Forget(ContestantRun& c, const KindRun& kind, uint32_t round, bool keep) {
  if (c.id == kRadosBench) {
    const Status cleaned = CleanupRadosBench(RadosJob(false));
    if (!cleaned.ok()) {
      std::fprintf(stderr, "tier-bench: after round %u: %s\n", round, cleaned.ToString().c_str());
    }
  } else if (c.id == kFio) {
    ::unlink((work_ + "/fio.dat").c_str());
  } else if (c.id == kNaive) {
    NaiveRemove(work_ + "/naive", result_.shape);
  } else if (keep) {
    kept_key_ = KeyText(kind.kind, c.id, round);
    kept_kind_ = kind.kind;
    kept_seed_ = kind.seed;
  } else {
    // A checkpoint left behind only costs disk space in the scratch directory; say so.
    Status removed = RunnerFor(c.id)->Remove(KeyFromText(KeyText(kind.kind, c.id, round)));
    if (!removed.ok()) {
      std::fprintf(stderr, "tier-bench: remove after round %u: %s\n", round,
                   removed.ToString().c_str());
    }
  }
}

void Run::MeasureMemory() {
  MemoryRun& memory = result_.memory;
  memory.staging_bytes = config_.staging_bytes();
  memory.bound_bytes = memory.staging_bytes + (64ull << 20);
  if (!config_.run_memory) {
    memory.note = "skipped (--no-memory)";
    return;
  }
  if (kept_key_.empty()) {
    memory.note = "skipped (needs the random kind)";
    return;
  }
  MemoryProbeRequest request;
  request.plugin = config_.plugin;
  request.namespace_id = namespace_id_;
  request.options = OptionsFor(kOurs);
  request.profile_path = profile_path_;
  request.tokens = config_.tokens;
  request.size_bytes = config_.size_mib << 20;
  request.kind = kept_kind_;
  request.seed = kept_seed_;
  request.key_text = kept_key_;
  // Buffers off 4 KiB alignment (by --misalign, else 512 bytes): every chunk then goes through
  // the staging pool, the most memory the provider uses for a restore.
  request.misalign = config_.misalign != 0 ? config_.misalign : 512;
  Result<MemoryProbeResult> probe = RunMemoryProbe(self_exe_, request);
  if (!probe.ok()) {
    memory.note = probe.status().ToString();
    return;
  }
  memory.probes.push_back(probe.value());
  progress_ << "memory: restore of " << probe.value().checkpoint_bytes
            << " bytes into misaligned buffers: provider peak "
            << (probe.value().provider_peak_bytes >> 20) << " MiB"
            << (probe.value().byte_exact ? ", byte-exact" : ", NOT byte-exact") << std::endl;
  memory.ran = true;
  memory.note =
      "child process: destination buffers (misaligned: every chunk through staging) faulted in, "
      "clear_refs=5, VmRSS baseline; then dlopen + open + restore; provider peak = VmHWM - "
      "baseline";
}

void Run::Cleanup() {
  ours_.reset();
  ours_raw_.reset();
  ours_zstd_.reset();
  if (result_.object_store && !kept_key_.empty() && !config_.keep_files) {
    // The checkpoint kept for the memory probe lives in the pool, not under --dir.
    auto runner = ProviderRunner::Open(config_.plugin, namespace_id_, OptionsFor(kOurs),
                                       config_.encryption_key_file);
    if (runner.ok()) runner.value()->Remove(KeyFromText(kept_key_)).IgnoreError();
    kept_key_.clear();
  }
  if (!work_.empty() && !config_.keep_files) {
    std::error_code ec;
    std::filesystem::remove_all(work_, ec);
  }
}

}  // namespace

Result<BenchResult> RunBench(const BenchConfig& config, const std::string& self_exe,
                             std::ostream& progress) {
  Run run(config, self_exe, progress);
  return run.Go();
}

}  // namespace tier::bench
