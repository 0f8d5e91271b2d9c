// tier-device-bench: what the device side of a transfer costs on this machine, on whichever path
// SelectTransferEngine() picks (or --path cpu|cuda).
//
//  1. pinned host <-> device copy bandwidth (CopyToDevice / CopyToHost of --copy-mib);
//  2. gather and scatter of a checkpoint of --tokens tokens in NInfer's layout (default: 100k
//     tokens, 16 layers x 4 KV heads x head_dim 256, 64-token pages, INT8-G64 with FP16 scales,
//     33,792 bytes per token), all layers queued at once, segments in pinned host memory; the
//     checkpoint is gathered from random pages, scattered into other random pages, gathered
//     again, and the two gathers compared byte for byte (--no-verify skips that);
//  3. device byte shuffle throughput (2-byte elements).
// Prints one line per result and, with --json PATH, writes them as JSON. Exit 0 when every step
// worked and the bytes matched.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tier/device/engine_select.h"
#include "tier/device/host_arena.h"
#include "tier/device/pool_layout.h"

namespace {

using namespace tier::device;
using tier::Result;
using tier::Status;

struct Args {
  std::string path = "auto";
  std::uint64_t tokens = 100000;
  std::uint32_t layers = 16;
  std::uint32_t kv_heads = 4;
  std::uint32_t head_dim = 256;
  std::string dtype = "int8";
  std::uint64_t copy_mib = 1024;
  std::uint64_t staging_mib = 32;  // per staging slot (the engine has four)
  int iterations = 3;
  bool verify = true;
  std::string json;
};

[[noreturn]] void Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--path auto|cpu|cuda] [--tokens N] [--layers N] [--kv-heads N]\n"
               "          [--head-dim N] [--dtype int8|bf16] [--copy-mib N] [--staging-mib N]\n"
               "          [--iterations N] [--no-verify] [--json PATH]\n",
               argv0);
  std::exit(2);
}

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Usage(argv[0]);
      return argv[++i];
    };
    if (k == "--path") {
      a.path = next();
    } else if (k == "--tokens") {
      a.tokens = std::strtoull(next().c_str(), nullptr, 10);
    } else if (k == "--layers") {
      a.layers = static_cast<std::uint32_t>(std::strtoul(next().c_str(), nullptr, 10));
    } else if (k == "--kv-heads") {
      a.kv_heads = static_cast<std::uint32_t>(std::strtoul(next().c_str(), nullptr, 10));
    } else if (k == "--head-dim") {
      a.head_dim = static_cast<std::uint32_t>(std::strtoul(next().c_str(), nullptr, 10));
    } else if (k == "--dtype") {
      a.dtype = next();
    } else if (k == "--copy-mib") {
      a.copy_mib = std::strtoull(next().c_str(), nullptr, 10);
    } else if (k == "--staging-mib") {
      a.staging_mib = std::strtoull(next().c_str(), nullptr, 10);
    } else if (k == "--iterations") {
      a.iterations = std::max(1, std::atoi(next().c_str()));
    } else if (k == "--no-verify") {
      a.verify = false;
    } else if (k == "--json") {
      a.json = next();
    } else {
      Usage(argv[0]);
    }
  }
  if (a.tokens == 0 || a.copy_mib == 0 || (a.dtype != "int8" && a.dtype != "bf16")) Usage(argv[0]);
  return a;
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double Gbps(std::uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0;
}

// Fast deterministic fill (splitmix64), so filling GBs does not dominate the run.
void Fill(std::byte* data, std::uint64_t bytes, std::uint64_t seed) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  std::uint64_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    x += 0x9E3779B97F4A7C15ull;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(data + i, &z, 8);
  }
  for (; i < bytes; ++i) data[i] = static_cast<std::byte>(i * 131 + seed);
}

struct Json {
  std::string text = "{";
  void Add(const std::string& key, const std::string& raw) {
    if (text.size() > 1) text += ",";
    text += "\n  \"" + key + "\": " + raw;
  }
  void String(const std::string& key, const std::string& value) {
    std::string escaped;
    for (char c : value) {
      if (c == '"' || c == '\\') escaped += '\\';
      escaped += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
    }
    Add(key, "\"" + escaped + "\"");
  }
  void Number(const std::string& key, double value) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.6g", value);
    Add(key, buf);
  }
  void Integer(const std::string& key, std::uint64_t value) { Add(key, std::to_string(value)); }
  void Boolean(const std::string& key, bool value) { Add(key, value ? "true" : "false"); }
};

int Fail(const std::string& what, const Status& status) {
  std::fprintf(stderr, "tier-device-bench: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  Json json;

  EngineOptions options;
  Result<DevicePreference> prefer = ParseDevicePreference(args.path);
  if (!prefer.ok()) return Fail("--path", prefer.status());
  options.prefer = *prefer;
  options.cuda.staging_bytes = args.staging_mib << 20;
  EngineSelection selection = SelectTransferEngine(options);
  std::printf("path: %s\nreason: %s\n", selection.path.c_str(), selection.reason.c_str());
  json.String("path", selection.path);
  json.String("reason", selection.reason);
  if (selection.engine == nullptr) return Fail("engine", Status::Unsupported(selection.reason));
  TransferEngine& engine = *selection.engine;
  std::printf("engine: %s\n", engine.description().c_str());
  json.String("engine", engine.description());
  json.String("cuda_architectures", CudaArchitectures());

  // ---- the checkpoint's layout -----------------------------------------------------------------
  NinferLayoutSpec spec;
  spec.layers = args.layers;
  spec.kv_heads = args.kv_heads;
  spec.head_dim = args.head_dim;
  spec.dtype = args.dtype == "bf16" ? KvDtype::kBf16 : KvDtype::kInt8G64;
  const std::uint64_t pages = (args.tokens + spec.tokens_per_page - 1) / spec.tokens_per_page;
  spec.page_count = static_cast<std::uint32_t>(pages + pages / 4);  // room for other pages
  Result<PoolLayout> layout = MakeNinferLayout(spec);
  if (!layout.ok()) return Fail("layout", layout.status());
  const std::uint64_t checkpoint_bytes = layout->checkpoint_bytes(pages);
  const std::uint64_t bytes_per_token = layout->page_bytes() / spec.tokens_per_page;

  // ---- host memory: one arena for the copy buffer and the segments -----------------------------
  const std::uint64_t copy_bytes = args.copy_mib << 20;
  std::uint64_t max_segment = 0;
  for (std::uint32_t l = 0; l < layout->layer_count(); ++l) {
    max_segment = std::max(max_segment, layout->segment_bytes(l, pages));
  }
  const std::uint64_t arena_bytes =
      copy_bytes + checkpoint_bytes + max_segment + (layout->layer_count() + 2) * (2ull << 20);
  auto arena = HostArena::Create({.capacity_bytes = arena_bytes}, engine.host_allocator());
  if (!arena.ok()) return Fail("host arena", arena.status());
  std::printf("host memory: %s (%s)\n", (*arena)->allocator_name(),
              (*arena)->pinned() ? "pinned" : "not pinned");
  json.Boolean("host_pinned", (*arena)->pinned());

  // ---- 1. copy bandwidth -----------------------------------------------------------------------
  Result<HostExtent> host = (*arena)->Allocate(copy_bytes);
  if (!host.ok()) return Fail("copy buffer", host.status());
  Result<DeviceBuffer> dev = engine.AllocateDevice(copy_bytes);
  if (!dev.ok()) return Fail("device buffer", dev.status());
  Fill(host->data, copy_bytes, 1);
  double h2d_s = 1e30, d2h_s = 1e30;
  for (int it = 0; it <= args.iterations; ++it) {  // iteration 0 warms up
    auto t0 = std::chrono::steady_clock::now();
    Result<Transfer> up = engine.CopyToDevice(dev->data(), host->data, copy_bytes);
    if (!up.ok()) return Fail("CopyToDevice", up.status());
    if (Status s = up->Wait(); !s.ok()) return Fail("CopyToDevice", s);
    if (it > 0) h2d_s = std::min(h2d_s, SecondsSince(t0));
    t0 = std::chrono::steady_clock::now();
    Result<Transfer> down = engine.CopyToHost(host->data, dev->data(), copy_bytes);
    if (!down.ok()) return Fail("CopyToHost", down.status());
    if (Status s = down->Wait(); !s.ok()) return Fail("CopyToHost", s);
    if (it > 0) d2h_s = std::min(d2h_s, SecondsSince(t0));
  }
  std::printf("h2d: %.2f GB/s (%llu MiB, best of %d)\n", Gbps(copy_bytes, h2d_s),
              static_cast<unsigned long long>(args.copy_mib), args.iterations);
  std::printf("d2h: %.2f GB/s (%llu MiB, best of %d)\n", Gbps(copy_bytes, d2h_s),
              static_cast<unsigned long long>(args.copy_mib), args.iterations);
  json.Integer("copy_bytes", copy_bytes);
  json.Number("h2d_gbps", Gbps(copy_bytes, h2d_s));
  json.Number("d2h_gbps", Gbps(copy_bytes, d2h_s));

  // ---- 3. device byte shuffle (on the copy buffer, before it is freed) --------------------------
  {
    Result<DeviceBuffer> out = engine.AllocateDevice(copy_bytes);
    if (!out.ok()) return Fail("shuffle buffer", out.status());
    double shuffle_s = 1e30;
    for (int it = 0; it <= args.iterations; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      Result<Transfer> t = engine.ByteShuffle(out->data(), dev->data(), copy_bytes, 2, false);
      if (!t.ok()) return Fail("ByteShuffle", t.status());
      if (Status s = t->Wait(); !s.ok()) return Fail("ByteShuffle", s);
      if (it > 0) shuffle_s = std::min(shuffle_s, SecondsSince(t0));
    }
    std::printf("shuffle: %.2f GB/s (2-byte elements, device memory)\n",
                Gbps(copy_bytes, shuffle_s));
    json.Number("shuffle_gbps", Gbps(copy_bytes, shuffle_s));
  }
  dev->Reset();
  if (Status s = (*arena)->Release(*host); !s.ok()) return Fail("release", s);

  // ---- 2. gather / scatter ---------------------------------------------------------------------
  std::printf("checkpoint: %llu tokens, %llu pages, %u layers, %s, %llu bytes/token, %.3f GB\n",
              static_cast<unsigned long long>(args.tokens), static_cast<unsigned long long>(pages),
              layout->layer_count(), args.dtype.c_str(),
              static_cast<unsigned long long>(bytes_per_token),
              static_cast<double>(checkpoint_bytes) / 1e9);
  json.Integer("tokens", args.tokens);
  json.Integer("pages", pages);
  json.Integer("layers", layout->layer_count());
  json.String("dtype", args.dtype);
  json.Integer("bytes_per_token", bytes_per_token);
  json.Integer("checkpoint_bytes", checkpoint_bytes);

  Result<DevicePool> pool = engine.AllocatePool(*layout);
  if (!pool.ok()) return Fail("pool", pool.status());
  {  // fill the pool with known bytes through one pinned bounce buffer
    const std::uint64_t bounce_bytes = 64ull << 20;
    Result<HostExtent> bounce = (*arena)->Allocate(bounce_bytes);
    if (!bounce.ok()) return Fail("bounce buffer", bounce.status());
    std::uint64_t seed = 7;
    for (std::uint32_t l = 0; l < layout->layer_count(); ++l) {
      for (std::uint32_t q = 0; q < layout->plane_count(l); ++q) {
        const std::uint64_t plane = layout->plane_pool_bytes(l, q);
        for (std::uint64_t off = 0; off < plane; off += bounce_bytes) {
          const std::uint64_t n = std::min(bounce_bytes, plane - off);
          Fill(bounce->data, n, seed++);
          Result<Transfer> t =
              engine.CopyToDevice(pool->view.plane_base[l][q] + off, bounce->data, n);
          if (!t.ok()) return Fail("pool fill", t.status());
          if (Status s = t->Wait(); !s.ok()) return Fail("pool fill", s);
        }
      }
    }
    if (Status s = (*arena)->Release(*bounce); !s.ok()) return Fail("release", s);
  }

  std::mt19937_64 rng(2024);
  std::vector<std::uint32_t> ids(layout->page_count());
  std::iota(ids.begin(), ids.end(), 0u);
  std::shuffle(ids.begin(), ids.end(), rng);
  const std::vector<std::uint32_t> table(ids.begin(), ids.begin() + pages);
  std::shuffle(ids.begin(), ids.end(), rng);
  const std::vector<std::uint32_t> targets(ids.begin(), ids.begin() + pages);

  std::vector<HostExtent> segments;
  for (std::uint32_t l = 0; l < layout->layer_count(); ++l) {
    Result<HostExtent> seg = (*arena)->Allocate(layout->segment_bytes(l, pages));
    if (!seg.ok()) return Fail("segment", seg.status());
    segments.push_back(*seg);
  }
  auto RunAll = [&](bool gather_op, const std::vector<std::uint32_t>& t) -> Status {
    std::vector<Transfer> transfers;
    for (std::uint32_t l = 0; l < layout->layer_count(); ++l) {
      std::span<std::byte> seg(segments[l].data, segments[l].bytes);
      Result<Transfer> r = gather_op ? engine.Gather(*layout, pool->view, l, t, seg)
                                     : engine.Scatter(*layout, pool->view, l, seg, t);
      if (!r.ok()) return r.status();
      transfers.push_back(*r);
    }
    for (const Transfer& tr : transfers) TIER_RETURN_IF_ERROR(tr.Wait());
    return Status::Ok();
  };
  double gather_s = 1e30, scatter_s = 1e30;
  for (int it = 0; it <= args.iterations; ++it) {
    auto t0 = std::chrono::steady_clock::now();
    if (Status s = RunAll(true, table); !s.ok()) return Fail("gather", s);
    if (it > 0) gather_s = std::min(gather_s, SecondsSince(t0));
    t0 = std::chrono::steady_clock::now();
    if (Status s = RunAll(false, targets); !s.ok()) return Fail("scatter", s);
    if (it > 0) scatter_s = std::min(scatter_s, SecondsSince(t0));
  }
  std::printf("gather: %.2f GB/s, %.1f ms for the checkpoint (best of %d)\n",
              Gbps(checkpoint_bytes, gather_s), gather_s * 1e3, args.iterations);
  std::printf("scatter: %.2f GB/s, %.1f ms for the checkpoint (best of %d)\n",
              Gbps(checkpoint_bytes, scatter_s), scatter_s * 1e3, args.iterations);
  json.Number("gather_gbps", Gbps(checkpoint_bytes, gather_s));
  json.Number("gather_ms", gather_s * 1e3);
  json.Number("scatter_gbps", Gbps(checkpoint_bytes, scatter_s));
  json.Number("scatter_ms", scatter_s * 1e3);

  bool verified = true;
  if (args.verify) {
    // 1. Gather `table` into segments pre-filled with 0x5A, and check sampled pages of every layer
    //    and plane against plain copies of the pool pages (an independent path).
    for (const HostExtent& seg : segments) std::memset(seg.data, 0x5A, seg.bytes);
    if (Status s = RunAll(true, table); !s.ok()) return Fail("verify gather", s);
    std::vector<std::byte> page;
    for (std::uint32_t l = 0; l < layout->layer_count() && verified; ++l) {
      for (std::uint32_t q = 0; q < layout->plane_count(l) && verified; ++q) {
        const std::uint64_t bpp = layout->plane(l, q).bytes_per_page;
        page.resize(bpp);
        for (std::uint64_t i : {std::uint64_t{0}, pages / 2, pages - 1}) {
          Result<Transfer> r = engine.CopyToHost(page.data(), pool->page(l, q, table[i]), bpp);
          if (!r.ok()) return Fail("verify copy", r.status());
          if (Status s = r->Wait(); !s.ok()) return Fail("verify copy", s);
          const std::byte* got =
              segments[l].data + layout->segment_plane_offset(l, q, pages) + i * bpp;
          if (std::memcmp(got, page.data(), bpp) != 0) {
            std::printf(
                "verify: layer %u plane %u page %llu of the segment differs from the pool\n", l, q,
                static_cast<unsigned long long>(i));
            verified = false;
            break;
          }
        }
      }
    }
    // 2. Scatter them into `targets`, gather `targets` into a buffer pre-filled with 0xA5: the
    //    bytes must come back exactly.
    if (Status s = RunAll(false, targets); !s.ok()) return Fail("verify scatter", s);
    Result<HostExtent> again = (*arena)->Allocate(max_segment);
    if (!again.ok()) return Fail("verify buffer", again.status());
    for (std::uint32_t l = 0; l < layout->layer_count() && verified; ++l) {
      std::memset(again->data, 0xA5, segments[l].bytes);
      std::span<std::byte> seg(again->data, segments[l].bytes);
      Result<Transfer> r = engine.Gather(*layout, pool->view, l, targets, seg);
      if (!r.ok()) return Fail("verify gather", r.status());
      if (Status s = r->Wait(); !s.ok()) return Fail("verify gather", s);
      verified = std::memcmp(again->data, segments[l].data, segments[l].bytes) == 0;
      if (!verified) std::printf("verify: layer %u differs after gather -> scatter -> gather\n", l);
    }
    std::printf("verify: %s\n", verified ? "ok (sampled pages match the pool; gather -> scatter -> "
                                           "gather is byte-exact)"
                                         : "FAILED");
    json.Boolean("verified", verified);
  }

  if (!args.json.empty()) {
    std::FILE* f = std::fopen(args.json.c_str(), "w");
    if (f == nullptr) {
      std::perror(args.json.c_str());
      return 1;
    }
    std::fprintf(f, "%s\n}\n", json.text.c_str());
    std::fclose(f);
    std::printf("results: %s\n", args.json.c_str());
  }
  return verified ? 0 : 1;
}
