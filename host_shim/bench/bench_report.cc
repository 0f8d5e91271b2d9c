#include "bench_report.h"

#include <algorithm>
#include <cstdio>

#include <tier/host/format.h>
#include "sample_stats.h"

namespace tier::bench {
namespace {

using nlohmann::json;

std::vector<double> Rates(const ContestantRun& c, const std::vector<uint64_t>& ns) {
  return GigabytesPerSecond(c.logical_bytes, ns);
}

std::optional<double> RateRatio(const KindRun& kind, const char* ours, const char* peer,
                                bool restore) {
  const ContestantRun* a = kind.Find(ours);
  const ContestantRun* b = kind.Find(peer);
  if (a == nullptr || b == nullptr) return std::nullopt;
  return restore ? MedianRatio(Rates(*a, a->restore_ns), Rates(*b, b->restore_ns))
                 : MedianRatio(Rates(*a, a->spill_ns), Rates(*b, b->spill_ns));
}

std::vector<double> AsDouble(const std::vector<uint64_t>& v) {
  return std::vector<double>(v.begin(), v.end());
}

json Optional(const std::optional<double>& v) {
  return v ? json(*v) : json(nullptr);
}

std::string Fixed(const std::optional<double>& v, const char* format = "%.2f") {
  if (!v) return "n/a";
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), format, *v);
  return buffer;
}

std::string Verdict(const std::optional<double>& v, bool met) {
  return !v ? "not measured" : met ? "met" : "MISSED";
}

json ContestantJson(const ContestantRun& c) {
  json j = {{"label", c.label}, {"available", c.available}, {"note", c.note}};
  if (!c.available) return j;
  const std::vector<double> spill = Rates(c, c.spill_ns), restore = Rates(c, c.restore_ns);
  j["logical_bytes"] = c.logical_bytes;
  j["spill_ns"] = c.spill_ns;
  j["restore_ns"] = c.restore_ns;
  j["spill_gbps"] = Median(spill);
  j["restore_gbps"] = Median(restore);
  j["spill_ms_p50"] = Percentile(Milliseconds(c.spill_ns), 50);
  j["spill_ms_p99"] = Percentile(Milliseconds(c.spill_ns), 99);
  j["restore_ms_p50"] = Percentile(Milliseconds(c.restore_ns), 50);
  j["restore_ms_p99"] = Percentile(Milliseconds(c.restore_ns), 99);
  if (!c.spill_buffered_ns.empty()) {
    j["spill_buffered_ns"] = c.spill_buffered_ns;
    j["spill_buffered_gbps"] = Median(Rates(c, c.spill_buffered_ns));
  }
  if (c.id != kFio && c.id != kRadosBench) {
    j["restores_checked"] = c.restores_checked;
    j["restores_byte_exact"] = c.restores_exact;
  }
  if (c.stored_bytes > 0) {
    j["stored_bytes"] = c.stored_bytes;
    j["stored_bytes_per_round"] = c.stored_per_round;
    j["stored_over_logical"] = double(c.stored_bytes) / double(c.logical_bytes);
  }
  return j;
}

}  // namespace

Summary Summarize(const BenchResult& result) {
  Summary s;
  for (const KindRun& kind : result.kinds) {
    for (const ContestantRun& c : kind.contestants) {
      s.restores_checked += c.restores_checked;
      s.restores_exact += c.restores_exact;
    }
    if (kind.kind == DataKind::kRandom) {
      s.restore_vs_fio = RateRatio(kind, kOurs, kFio, true);
      s.spill_vs_fio = RateRatio(kind, kOurs, kFio, false);
      s.restore_vs_naive = RateRatio(kind, kOurs, kNaive, true);
      s.spill_vs_naive = RateRatio(kind, kOurs, kNaive, false);
      s.restore_vs_rados_bench = RateRatio(kind, kOurs, kRadosBench, true);
      s.spill_vs_rados_bench = RateRatio(kind, kOurs, kRadosBench, false);
      continue;
    }
    const ContestantRun* a = kind.Find(kOurs);
    const ContestantRun* r = kind.Find(kOursRaw);
    if (a == nullptr || r == nullptr) continue;
    CompressionSummary c;
    c.kind = kind.kind;
    c.restore_time_auto_vs_raw = MedianRatio(AsDouble(a->restore_ns), AsDouble(r->restore_ns));
    c.spill_time_auto_vs_raw = MedianRatio(AsDouble(a->spill_ns), AsDouble(r->spill_ns));
    c.stored_auto = a->stored_bytes;
    c.stored_raw = r->stored_bytes;
    c.capacity_gain = c.stored_auto > 0 ? double(c.stored_raw) / double(c.stored_auto) : 0;
    for (size_t i = 0; i < a->stored_per_round.size(); ++i) {
      c.auto_stored_ratio.push_back(double(a->stored_per_round[i]) / double(a->logical_bytes));
      if (i >= a->restore_ns.size() || i >= r->restore_ns.size() || r->restore_ns[i] == 0) continue;
      const double ratio = double(a->restore_ns[i]) / double(r->restore_ns[i]);
      c.auto_restore_ratio.push_back(ratio);
      if (i < r->stored_per_round.size() && a->stored_per_round[i] < r->stored_per_round[i]) {
        c.worst_compressed_round = std::max(c.worst_compressed_round.value_or(0.0), ratio);
      }
    }
    if (const ContestantRun* z = kind.Find(kOursZstd); z != nullptr) {
      c.restore_time_zstd_vs_raw = MedianRatio(AsDouble(z->restore_ns), AsDouble(r->restore_ns));
      c.spill_time_zstd_vs_raw = MedianRatio(AsDouble(z->spill_ns), AsDouble(r->spill_ns));
      c.zstd_capacity_gain = z->stored_bytes > 0 ? double(r->stored_bytes) / z->stored_bytes : 0;
    }
    s.compression.push_back(c);
  }
  for (const MemoryProbeResult& p : result.memory.probes) {
    s.provider_peak_bytes = std::max(s.provider_peak_bytes, p.provider_peak_bytes);
  }
  return s;
}

void PrintReport(const BenchResult& result, const Summary& s, std::ostream& out) {
  char line[1024];
  out << "\ntier-bench: " << result.shape.profile << " at " << result.shape.tokens << " tokens";
  if (result.shape.scale != 1.0) {
    std::snprintf(line, sizeof(line), " resized x%.3f", result.shape.scale);
    out << line;
  }
  std::snprintf(line, sizeof(line), ", %.3f GB per checkpoint (%s)\n",
                double(result.shape.logical_bytes()) / 1e9, result.shape.Describe().c_str());
  out << line;
  out << "dir " << result.dir << " (" << result.filesystem << "), " << result.cpus
      << " CPUs; provider '" << result.provider_name << "' io_path=" << result.io_path
      << ", queue depth " << result.queue_depth << "; "
      << (result.object_store
              ? (result.rados_version.empty() ? result.rados_note : result.rados_version)
              : (result.fio_version.empty() ? result.fio_note : result.fio_version))
      << "; " << result.repeats << " rounds, contestants interleaved, order rotated per round\n";
  if (result.object_store) {
    out << "object store: rados bench writes and reads back (seq) objects of the provider's size "
           "with its queue depth as concurrency, in the same rounds\n\n";
  } else {
    out << "page cache: " << DescribeEviction(result.worst_cache) << "\n\n";
  }

  std::snprintf(line, sizeof(line), "%-7s %-26s %10s %12s %19s %19s %8s %6s\n", "data",
                "contestant", "spill GB/s", "restore GB/s", "spill ms p50/p99",
                "restore ms p50/p99", "stored", "exact");
  out << line;
  for (const KindRun& kind : result.kinds) {
    for (const ContestantRun& c : kind.contestants) {
      if (!c.available) {
        std::snprintf(line, sizeof(line), "%-7s %-26s %s\n", DataKindName(kind.kind),
                      c.label.c_str(), c.note.c_str());
        out << line;
        continue;
      }
      const auto spill_ms = Milliseconds(c.spill_ns), restore_ms = Milliseconds(c.restore_ns);
      char spill[32], restore[32], stored[16] = "-", exact[16] = "-";
      std::snprintf(spill, sizeof(spill), "%.0f/%.0f", Percentile(spill_ms, 50),
                    Percentile(spill_ms, 99));
      std::snprintf(restore, sizeof(restore), "%.0f/%.0f", Percentile(restore_ms, 50),
                    Percentile(restore_ms, 99));
      if (c.stored_bytes > 0) {
        std::snprintf(stored, sizeof(stored), "%.3f", double(c.stored_bytes) / c.logical_bytes);
      }
      if (c.id != kFio && c.id != kRadosBench) {
        std::snprintf(exact, sizeof(exact), "%llu/%llu", (unsigned long long)c.restores_exact,
                      (unsigned long long)c.restores_checked);
      }
      std::snprintf(line, sizeof(line), "%-7s %-26s %10.2f %12.2f %19s %19s %8s %6s\n",
                    DataKindName(kind.kind), c.label.c_str(), Median(Rates(c, c.spill_ns)),
                    Median(Rates(c, c.restore_ns)), spill, restore, stored, exact);
      out << line;
    }
  }
  out << "\nratios, ours / peer on random data (median of per-round ratios of GB/s):\n";
  if (result.object_store) {
    out << "  restore_vs_rados_bench " << Fixed(s.restore_vs_rados_bench)
        << "   target >= 0.90 (rados bench seq): "
        << Verdict(s.restore_vs_rados_bench,
                   s.restore_vs_rados_bench && *s.restore_vs_rados_bench >= kMinRestoreVsRadosBench)
        << "\n";
    out << "  spill_vs_rados_bench   " << Fixed(s.spill_vs_rados_bench)
        << "   target >= 0.90 (rados bench write): "
        << Verdict(s.spill_vs_rados_bench,
                   s.spill_vs_rados_bench && *s.spill_vs_rados_bench >= kMinSpillVsRadosBench)
        << "\n";
  }
  if (!result.object_store) {
    out << "  restore_vs_fio   " << Fixed(s.restore_vs_fio) << "   target >= 0.90: "
        << Verdict(s.restore_vs_fio, s.restore_vs_fio && *s.restore_vs_fio >= kMinRestoreVsFio)
        << "\n";
    out << "  spill_vs_fio     " << Fixed(s.spill_vs_fio) << "   target >= 0.90: "
        << Verdict(s.spill_vs_fio, s.spill_vs_fio && *s.spill_vs_fio >= kMinSpillVsFio) << "\n";
    out << "  restore_vs_naive " << Fixed(s.restore_vs_naive) << "\n";
    out << "  spill_vs_naive   " << Fixed(s.spill_vs_naive)
        << "   (naive spill timed to its fsync; fwrite+fclose alone is in the JSON)\n";
  }
  for (const CompressionSummary& c : s.compression) {
    std::string rounds;
    for (size_t i = 0; i < c.auto_stored_ratio.size(); ++i) {
      char one[48];
      std::snprintf(one, sizeof(one), "%s%.3f", rounds.empty() ? "" : ", ", c.auto_stored_ratio[i]);
      rounds += one;
      if (i < c.auto_restore_ratio.size()) {
        std::snprintf(one, sizeof(one), " x%.2f", c.auto_restore_ratio[i]);
        rounds += one;
      }
    }
    const std::string verdict =
        !c.worst_compressed_round
            ? "auto stored raw in every round (the path of off: nothing to compare)"
        : *c.worst_compressed_round <= kMaxAutoRestoreSlowdown ? "met"
                                                               : "MISSED";
    std::snprintf(line, sizeof(line),
                  "auto vs off on %s: per round (stored/logical, restore time / raw's): %s; "
                  "median x%s; compressed rounds' worst x%s, target <= %.2f: %s; spill time "
                  "x%s\n",
                  DataKindName(c.kind), rounds.c_str(),
                  Fixed(c.restore_time_auto_vs_raw, "%.3f").c_str(),
                  Fixed(c.worst_compressed_round, "%.2f").c_str(), kMaxAutoRestoreSlowdown,
                  verdict.c_str(), Fixed(c.spill_time_auto_vs_raw, "%.3f").c_str());
    out << line;
    if (c.zstd_capacity_gain > 0) {
      std::snprintf(line, sizeof(line),
                    "zstd vs off on %s: capacity gain x%.3f, restore time x%s, spill time x%s\n",
                    DataKindName(c.kind), c.zstd_capacity_gain,
                    Fixed(c.restore_time_zstd_vs_raw, "%.3f").c_str(),
                    Fixed(c.spill_time_zstd_vs_raw, "%.3f").c_str());
      out << line;
    }
  }
  const MemoryRun& m = result.memory;
  if (m.ran) {
    out << "memory (provider peak RSS during a restore, isolated in a child process):";
    for (const MemoryProbeResult& p : m.probes) {
      out << " " << FormatBytes(p.provider_peak_bytes) << " ("
          << (p.misalign == 0       ? "aligned buffers"
              : result.object_store ? "misaligned buffers"
                                    : "misaligned buffers, through staging")
          << (p.byte_exact ? ")" : ", NOT byte-exact)");
    }
    out << (result.object_store ? "; bound queue_depth x object size " : "; bound staging ")
        << FormatBytes(m.staging_bytes) << " + 64 MiB = " << FormatBytes(m.bound_bytes) << ": "
        << (s.provider_peak_bytes <= m.bound_bytes ? "met" : "MISSED") << "\n";
  } else {
    out << "memory: " << m.note << "\n";
  }
  out << "restores byte-exact: " << s.restores_exact << "/" << s.restores_checked << "; elapsed "
      << FormatDurationNs(result.elapsed_ns) << "\n";
}

json ReportJson(const BenchResult& result, const Summary& s) {
  json j;
  j["tool"] = "tier-bench";
  j["command"] = result.command_line;
  j["restore_vs_fio"] = Optional(s.restore_vs_fio);
  j["spill_vs_fio"] = Optional(s.spill_vs_fio);
  j["restore_vs_naive"] = Optional(s.restore_vs_naive);
  j["spill_vs_naive"] = Optional(s.spill_vs_naive);
  j["restore_vs_rados_bench"] = Optional(s.restore_vs_rados_bench);
  j["spill_vs_rados_bench"] = Optional(s.spill_vs_rados_bench);
  j["byte_exact"] = s.restores_checked > 0 && s.restores_exact == s.restores_checked;
  j["restores_checked"] = s.restores_checked;
  j["restores_byte_exact"] = s.restores_exact;
  j["plugin"] = result.plugin;
  j["provider"] = result.provider_name;
  j["io_path"] = result.io_path;
  j["provider_options"] = result.provider_options;
  j["dir"] = result.dir;
  j["filesystem"] = result.filesystem;
  j["cpus"] = result.cpus;
  j["profile"] = result.shape.profile;
  j["tokens"] = result.shape.tokens;
  j["scale"] = result.shape.scale;
  j["logical_bytes"] = result.shape.logical_bytes();
  j["segments"] = json::array();
  for (const SegmentShape& seg : result.shape.segments) {
    j["segments"].push_back(
        {{"name", seg.name}, {"kind", seg.kind}, {"index", seg.index}, {"bytes", seg.bytes}});
  }
  j["queue_depth"] = result.queue_depth;
  j["repeats"] = result.repeats;
  j["misalign"] = result.misalign;
  j["page_cache"] = {{"method", DescribeEviction(result.worst_cache)},
                     {"worst_round_pages", result.worst_cache.pages},
                     {"worst_round_resident_pages", result.worst_cache.resident_pages}};
  j["fio"] = {{"installed", !result.fio_version.empty()},
              {"version", result.fio_version.empty() ? json(nullptr) : json(result.fio_version)},
              {"note", result.fio_note},
              {"write_command", result.fio_write_command},
              {"read_command", result.fio_read_command}};
  j["object_store"] = result.object_store;
  j["rados_bench"] = {
      {"installed", !result.rados_version.empty()},
      {"version", result.rados_version.empty() ? json(nullptr) : json(result.rados_version)},
      {"note", result.rados_note},
      {"write_command", result.rados_write_command},
      {"read_command", result.rados_read_command}};
  json kinds = json::object();
  for (const KindRun& kind : result.kinds) {
    json contestants = json::object();
    for (const ContestantRun& c : kind.contestants) contestants[c.id] = ContestantJson(c);
    kinds[DataKindName(kind.kind)] = {{"description", DataKindDescription(kind.kind)},
                                      {"seed", kind.seed},
                                      {"contestants", contestants}};
  }
  j["kinds"] = kinds;
  json compression = json::object();
  for (const CompressionSummary& c : s.compression) {
    compression[DataKindName(c.kind)] = {
        {"restore_time_auto_vs_raw", Optional(c.restore_time_auto_vs_raw)},
        {"spill_time_auto_vs_raw", Optional(c.spill_time_auto_vs_raw)},
        {"stored_bytes_auto", c.stored_auto},
        {"stored_bytes_raw", c.stored_raw},
        {"capacity_gain", c.capacity_gain},
        {"auto_stored_over_logical_per_round", c.auto_stored_ratio},
        {"restore_time_auto_vs_raw_per_round", c.auto_restore_ratio},
        {"restore_time_auto_vs_raw_worst_compressed_round", Optional(c.worst_compressed_round)},
        {"restore_time_zstd_vs_raw", Optional(c.restore_time_zstd_vs_raw)},
        {"spill_time_zstd_vs_raw", Optional(c.spill_time_zstd_vs_raw)},
        {"zstd_capacity_gain",
         c.zstd_capacity_gain > 0 ? json(c.zstd_capacity_gain) : json(nullptr)}};
  }
  j["compression"] = compression;
  const MemoryRun& m = result.memory;
  json probes = json::array();
  for (const MemoryProbeResult& p : m.probes) {
    probes.push_back({{"checkpoint_bytes", p.checkpoint_bytes},
                      {"misalign", p.misalign},
                      {"baseline_rss_bytes", p.baseline_rss_bytes},
                      {"peak_rss_bytes", p.peak_rss_bytes},
                      {"provider_peak_bytes", p.provider_peak_bytes},
                      {"restore_ns", p.restore_ns},
                      {"byte_exact", p.byte_exact},
                      {"hwm_reset", p.hwm_reset}});
  }
  j["memory"] = {
      {"measured", m.ran},
      {"note", m.note},
      {"staging_bytes", m.staging_bytes},
      {"bound_bytes", m.bound_bytes},
      {"provider_peak_bytes", m.ran ? json(s.provider_peak_bytes) : json(nullptr)},
      {"within_bound", m.ran ? json(s.provider_peak_bytes <= m.bound_bytes) : json(nullptr)},
      {"probes", probes}};
  j["elapsed_s"] = double(result.elapsed_ns) / 1e9;
  return j;
}

}  // namespace tier::bench
