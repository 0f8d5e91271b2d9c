// tier_rados_worker: one provider instance in its own process, for the multi-process tests (a
// second server on the same pool, a client killed mid-spill, a cluster that is down).
//
//   tier_rados_worker --ns NAMESPACE [--opt KEY=VALUE ...] ACTION [ARGS]
//     open                          open and close; prints "ok" (exit 0) or the error (exit 1)
//     spill KEY KV_BYTES [--go FILE] one spill of MakeCheckpoint(KEY); with --go, waits (up to
//                                   30 s) for FILE to exist first; prints "<status> <message>"
//     spill-loop PREFIX COUNT KV_BYTES  spills PREFIX/0 .. PREFIX/COUNT-1; prints "spilling I"
//     before
//                                   and "spilled I <status>" after each
//     churn KEY KV_BYTES SECONDS     for SECONDS: spills KEY with the bytes of KEY#GEN, removes it,
//                                   GEN += 1; prints "gen GEN <status>" per spill
// Output is line-buffered on stdout. Exit 2 on a usage error.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint_bytes.h"
#include "rados_test_env.h"

namespace tier::rados::test {
namespace {

int Usage(const char* why) {
  std::fprintf(stderr, "tier_rados_worker: %s\n", why);
  return 2;
}

int Main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string ns;
  ProviderOptions options;
  std::vector<std::string> rest;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--ns" && i + 1 < argc) {
      ns = argv[++i];
    } else if (arg == "--opt" && i + 1 < argc) {
      const std::string kv = argv[++i];
      const size_t eq = kv.find('=');
      if (eq == std::string::npos) return Usage("--opt needs KEY=VALUE");
      options.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else {
      rest.push_back(arg);
    }
  }
  if (ns.empty() || rest.empty()) return Usage("usage: --ns NS [--opt K=V ...] ACTION [ARGS]");
  auto provider = Provider::Open(ns, options);
  if (!provider.ok()) {
    std::printf("open failed: %s\n", provider.status().ToString().c_str());
    return 1;
  }
  Provider& p = *provider.value();
  const std::string& action = rest[0];
  if (action == "open") {
    std::printf("ok\n");
    return 0;
  }
  if (action == "spill" && rest.size() >= 3) {
    if (rest.size() >= 5 && rest[3] == "--go") {
      for (int i = 0; i < 3000 && ::access(rest[4].c_str(), F_OK) != 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    Checkpoint c = MakeCheckpoint(rest[1], std::stoull(rest[2]));
    const Done d = p.Spill(c.key, c.Segments());
    std::printf("%s %s\n", tier_status_name(d.status), d.message.c_str());
    return 0;
  }
  if (action == "spill-loop" && rest.size() == 4) {
    const uint64_t count = std::stoull(rest[2]), bytes = std::stoull(rest[3]);
    for (uint64_t i = 0; i < count; ++i) {
      Checkpoint c = MakeCheckpoint(rest[1] + "/" + std::to_string(i), bytes);
      std::printf("spilling %llu\n", static_cast<unsigned long long>(i));
      const Done d = p.Spill(c.key, c.Segments());
      std::printf("spilled %llu %s\n", static_cast<unsigned long long>(i),
                  tier_status_name(d.status));
    }
    return 0;
  }
  if (action == "churn" && rest.size() == 4) {
    const uint64_t bytes = std::stoull(rest[2]);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(std::stoi(rest[3]));
    for (uint64_t gen = 0; std::chrono::steady_clock::now() < until; ++gen) {
      Checkpoint c = MakeCheckpoint(rest[1], bytes, rest[1] + "#" + std::to_string(gen));
      const Done d = p.Spill(c.key, c.Segments());
      std::printf("gen %llu %s\n", static_cast<unsigned long long>(gen),
                  tier_status_name(d.status));
      p.Remove(c.key).IgnoreError();
    }
    return 0;
  }
  return Usage(("unknown action or arguments: " + action).c_str());
}

}  // namespace
}  // namespace tier::rados::test

int main(int argc, char** argv) {
  return tier::rados::test::Main(argc, argv);
}
