// tier-shuffle-ratio: does the byte-plane shuffle improve zstd's ratio on KV-like and
// recurrent-state-like data? Generates plausible data with a fixed seed, compresses it in blocks
// (as the disk tier does) at several zstd levels, with and without the shuffle, and prints one
// line per (data, level): ratio plain and shuffled, the gain, and MB/s (1e6 bytes per second) of
// zstd compress (c_), decompress (d_), shuffle and unshuffle. Single-threaded, CPU only.
//
//   tier-shuffle-ratio [--mib N] [--block-kib N] [--levels 1,3]
#include <zstd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tier/shuffle/byte_shuffle.h"

namespace {

using tier::shuffle::ByteShuffle;
using tier::shuffle::ByteUnshuffle;

std::uint16_t ToBf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<std::uint16_t>(u >> 16);
}

std::uint16_t ToFp16(float f) {
  _Float16 h = static_cast<_Float16>(f);
  std::uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

struct Data {
  std::string name;
  std::uint32_t element_bytes;
  std::vector<std::byte> bytes;
};

// BF16 K/V-like: per-channel scale (log-normal, some outlier channels) times a unit normal.
Data MakeBf16Kv(std::uint64_t bytes, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> unit(0.0f, 1.0f);
  std::lognormal_distribution<float> chan(-1.0f, 0.7f);
  const std::size_t head_dim = 256;
  std::vector<float> scale(head_dim);
  for (float& s : scale) s = chan(rng);
  Data d{"bf16 kv, channel-scaled normal", 2, std::vector<std::byte>(bytes)};
  auto* out = reinterpret_cast<std::uint16_t*>(d.bytes.data());
  for (std::size_t i = 0; i < bytes / 2; ++i) out[i] = ToBf16(unit(rng) * scale[i % head_dim]);
  return d;
}

// BF16 narrow normal N(0, 0.02): exponents repeat.
Data MakeBf16Narrow(std::uint64_t bytes, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  Data d{"bf16 narrow normal N(0,0.02)", 2, std::vector<std::byte>(bytes)};
  auto* out = reinterpret_cast<std::uint16_t*>(d.bytes.data());
  for (std::size_t i = 0; i < bytes / 2; ++i) out[i] = ToBf16(dist(rng));
  return d;
}

// FP32 recurrent state (GDN): N(0, 0.05), full-entropy mantissa.
Data MakeFp32State(std::uint64_t bytes, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  Data d{"fp32 state N(0,0.05)", 4, std::vector<std::byte>(bytes)};
  auto* out = reinterpret_cast<float*>(d.bytes.data());
  for (std::size_t i = 0; i < bytes / 4; ++i) out[i] = dist(rng);
  return d;
}

// FP16 INT8-G64 scales: max|x|/127 of 64 unit-normal values times a channel scale.
Data MakeFp16Scales(std::uint64_t bytes, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> unit(0.0f, 1.0f);
  std::lognormal_distribution<float> chan(-1.0f, 0.7f);
  Data d{"fp16 int8-g64 scales", 2, std::vector<std::byte>(bytes)};
  auto* out = reinterpret_cast<std::uint16_t*>(d.bytes.data());
  for (std::size_t i = 0; i < bytes / 2; ++i) {
    float amax = 0.0f;
    for (int k = 0; k < 64; ++k) amax = std::fmax(amax, std::fabs(unit(rng)));
    out[i] = ToFp16(amax * chan(rng) / 127.0f);
  }
  return d;
}

struct Outcome {
  std::uint64_t compressed_bytes = 0;
  double compress_s = 0;
  double decompress_s = 0;
};

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Compresses `in` block by block, then decompresses every block and checks the bytes.
Outcome CompressBlocks(const std::vector<std::byte>& in, std::size_t block_bytes, int level) {
  Outcome o;
  const std::size_t blocks = (in.size() + block_bytes - 1) / block_bytes;
  std::vector<std::vector<char>> packed(blocks, std::vector<char>(ZSTD_compressBound(block_bytes)));
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  auto t0 = std::chrono::steady_clock::now();
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t off = b * block_bytes;
    const std::size_t n = std::min(block_bytes, in.size() - off);
    const std::size_t r =
        ZSTD_compressCCtx(cctx, packed[b].data(), packed[b].size(), in.data() + off, n, level);
    if (ZSTD_isError(r)) {
      std::fprintf(stderr, "zstd: %s\n", ZSTD_getErrorName(r));
      std::exit(1);
    }
    packed[b].resize(r);
    o.compressed_bytes += r;
  }
  o.compress_s = SecondsSince(t0);
  ZSTD_freeCCtx(cctx);
  std::vector<std::byte> out(in.size());
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  t0 = std::chrono::steady_clock::now();
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t off = b * block_bytes;
    const std::size_t n = std::min(block_bytes, in.size() - off);
    const std::size_t r =
        ZSTD_decompressDCtx(dctx, out.data() + off, n, packed[b].data(), packed[b].size());
    if (ZSTD_isError(r) || r != n) {
      std::fprintf(stderr, "zstd decompress failed\n");
      std::exit(1);
    }
  }
  o.decompress_s = SecondsSince(t0);
  ZSTD_freeDCtx(dctx);
  if (out != in) {
    std::fprintf(stderr, "zstd round trip differs\n");
    std::exit(1);
  }
  return o;
}

std::vector<int> ParseLevels(const char* s) {
  std::vector<int> levels;
  for (const char* p = s; *p;) {
    char* end = nullptr;
    levels.push_back(static_cast<int>(std::strtol(p, &end, 10)));
    p = (*end == ',') ? end + 1 : end;
    if (end == p && *p) break;
  }
  return levels;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t mib = 32;
  std::size_t block_kib = 1024;
  std::vector<int> levels = {1, 3};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--mib") {
      mib = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (a == "--block-kib") {
      block_kib = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (a == "--levels") {
      levels = ParseLevels(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--mib N] [--block-kib N] [--levels 1,3]\n", argv[0]);
      return 2;
    }
  }
  const std::uint64_t bytes = mib << 20;
  const std::size_t block_bytes = block_kib << 10;
  std::printf("data: %llu MiB per kind, zstd blocks of %zu KiB, seed fixed, shuffle per block\n",
              static_cast<unsigned long long>(mib), block_kib);
  std::printf("%-31s %5s %7s %8s %7s %8s %8s %8s %8s %8s %8s\n", "data", "level", "ratio",
              "shuffled", "gain", "c_MBps", "c_sh", "d_MBps", "d_sh", "shuf", "unshuf");
  std::vector<Data> all;
  all.push_back(MakeBf16Kv(bytes, 1));
  all.push_back(MakeBf16Narrow(bytes, 2));
  all.push_back(MakeFp32State(bytes, 3));
  all.push_back(MakeFp16Scales(bytes / 8, 4));
  for (const Data& d : all) {
    // Shuffle each block on its own, as a block-compressing writer would.
    std::vector<std::byte> shuffled(d.bytes.size());
    std::vector<std::byte> back(d.bytes.size());
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t off = 0; off < d.bytes.size(); off += block_bytes) {
      const std::size_t n = std::min(block_bytes, d.bytes.size() - off);
      if (!ByteShuffle({d.bytes.data() + off, n}, {shuffled.data() + off, n}, d.element_bytes)
               .ok()) {
        return 1;
      }
    }
    const double shuffle_s = SecondsSince(t0);
    const auto t1 = std::chrono::steady_clock::now();
    for (std::size_t off = 0; off < d.bytes.size(); off += block_bytes) {
      const std::size_t n = std::min(block_bytes, d.bytes.size() - off);
      if (!ByteUnshuffle({shuffled.data() + off, n}, {back.data() + off, n}, d.element_bytes)
               .ok()) {
        return 1;
      }
    }
    const double unshuffle_s = SecondsSince(t1);
    if (back != d.bytes) {
      std::fprintf(stderr, "round trip failed for %s\n", d.name.c_str());
      return 1;
    }
    for (int level : levels) {
      const Outcome plain = CompressBlocks(d.bytes, block_bytes, level);
      const Outcome sh = CompressBlocks(shuffled, block_bytes, level);
      const double mb = static_cast<double>(d.bytes.size()) / 1e6;
      const double r_plain = static_cast<double>(d.bytes.size()) / plain.compressed_bytes;
      const double r_sh = static_cast<double>(d.bytes.size()) / sh.compressed_bytes;
      std::printf("%-31s %5d %7.3f %8.3f %6.1f%% %8.0f %8.0f %8.0f %8.0f %8.0f %8.0f\n",
                  d.name.c_str(), level, r_plain, r_sh, (r_sh / r_plain - 1.0) * 100.0,
                  mb / plain.compress_s, mb / sh.compress_s, mb / plain.decompress_s,
                  mb / sh.decompress_s, mb / shuffle_s, mb / unshuffle_s);
    }
  }
  return 0;
}
