// tier_disk_bench: a quick spill/restore throughput measurement of the disk provider (not a
// ctest; tier-bench will replace it). Spills one checkpoint of N MiB of data from 4 KiB-aligned
// buffers, then restores it, and prints GB/s, the CPU time of each (user + system of the whole
// process, getrusage), the stored fraction and the process's peak RSS.
//   tier_disk_bench DIR [MiB=1024] [key=value provider options...] [misalign=N]
//                   [data=random|bf16|fp32]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "disk_test_util.h"

using namespace tier::disk;
using namespace tier::disk::test;

namespace {

double CpuSeconds() {  // user + system time of the whole process
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: tier_disk_bench DIR [MiB] [key=value ...]\n");
    return 2;
  }
  const uint64_t mib = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024;
  Options o;
  o.Set("dir", argv[1]).Set("capacity_gib", "64").Set("compression", "off");
  uint64_t misalign = 0;  // bench-only: offset buffers from 4 KiB to force the staging path
  std::string data = "random";
  for (int i = 3; i < argc; ++i) {
    const char* eq = std::strchr(argv[i], '=');
    if (!eq) continue;
    const std::string key(argv[i], static_cast<size_t>(eq - argv[i]));
    if (key == "misalign")
      misalign = std::strtoull(eq + 1, nullptr, 10);
    else if (key == "data")
      data = eq + 1;
    else
      o.Set(key, eq + 1);
  }
  FakeHost host;
  auto opened = OpenDisk(host, "bench", o);
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().message().c_str());
    return 1;
  }
  DiskProvider& p = *opened.value();
  // 16 segments of mib/16 MiB, aligned, of the data kind asked.
  const uint64_t segs = 16, seg_bytes = (mib << 20) / segs;
  std::vector<uint8_t*> bufs, back;
  std::vector<tier_segment> spill, restore;
  std::mt19937_64 rng(1);
  for (uint64_t s = 0; s < segs; ++s) {
    auto* b = static_cast<uint8_t*>(std::aligned_alloc(4096, seg_bytes + 4096)) + misalign;
    auto* r = static_cast<uint8_t*>(std::aligned_alloc(4096, seg_bytes + 4096)) + misalign;
    if (data == "random") {
      for (uint64_t i = 0; i < seg_bytes; i += 8) {
        const uint64_t v = rng();
        std::memcpy(b + i, &v, 8);
      }
    } else {
      const std::vector<uint8_t> v =
          data == "bf16" ? Bf16Like(seg_bytes, s + 1) : Fp32StateLike(seg_bytes, s + 1);
      std::memcpy(b, v.data(), seg_bytes);
    }
    std::memset(r, 0, seg_bytes);
    bufs.push_back(b);
    back.push_back(r);
    spill.push_back({TIER_SEGMENT_MAIN_KV, static_cast<uint32_t>(s), seg_bytes, b});
    restore.push_back({TIER_SEGMENT_MAIN_KV, static_cast<uint32_t>(s), seg_bytes, r});
  }
  const tier_key key = MakeKey(1);
  Waiter ws;
  const double cpu0 = CpuSeconds();
  auto t0 = std::chrono::steady_clock::now();
  if (!p.Spill(&key, spill.data(), segs, Waiter::Callback, &ws).ok()) return 1;
  Done d = ws.Wait();
  const double spill_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double spill_cpu = CpuSeconds() - cpu0;
  if (d.status != TIER_OK) {
    std::fprintf(stderr, "spill: %s\n", d.message.c_str());
    return 1;
  }
  Waiter wr;
  const double cpu1 = CpuSeconds();
  t0 = std::chrono::steady_clock::now();
  if (!p.Restore(&key, restore.data(), segs, Waiter::Callback, &wr).ok()) return 1;
  Done r = wr.Wait();
  const double restore_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double restore_cpu = CpuSeconds() - cpu1;
  bool exact = r.status == TIER_OK;
  for (uint64_t s = 0; s < segs && exact; ++s)
    exact = std::memcmp(bufs[s], back[s], seg_bytes) == 0;
  tier_stat_result st{};
  st.struct_size = sizeof(st);
  const bool stat_ok = p.Stat(&key, &st, nullptr, 0).ok();
  const tier_key* kp = &key;
  const bool removed = p.Remove(kp).ok();
  if (!stat_ok || !removed)
    std::fprintf(stderr, "stat or remove of the benchmark checkpoint failed\n");
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double gb = static_cast<double>(mib << 20) / 1e9;
  std::printf(
      "io_path=%s data=%s size=%llu MiB stored %.3f spill %.2f GB/s (%.3f s, %.3f CPU s) "
      "restore %.2f GB/s (%.3f s, %.3f CPU s) %s; estimate was %.3f s; peak RSS %ld MiB (of which "
      "%llu MiB are the test's own buffers)\n",
      p.io_path().label, data.c_str(), static_cast<unsigned long long>(mib),
      static_cast<double>(d.stored_bytes) / static_cast<double>(mib << 20), gb / spill_s, spill_s,
      spill_cpu, gb / restore_s, restore_s, restore_cpu, exact ? "byte-exact" : "MISMATCH",
      st.estimated_restore_ns / 1e9, ru.ru_maxrss / 1024, static_cast<unsigned long long>(2 * mib));
  return exact ? 0 : 1;
}
