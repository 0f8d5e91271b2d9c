#include "gc.h"

#include <tier/host/format.h>
#include <tier/host/host_services.h>
#include <tier/host/identity.h>
#include <tier/host/log.h>
#include <tier/host/metrics_registry.h>
#include <tier/host/model_profile.h>
#include <tier/host/plugin_loader.h>
#include <tier/host/provider_instance.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "flag_ranges.h"

namespace tier {
namespace {

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "tier-host gc: %s\n", EscapeForLog(message).c_str());
  return code;
}

uint64_t LastUse(const EntryCopy& e) {
  return e.last_used_unix_ns != 0 ? e.last_used_unix_ns : e.created_unix_ns;
}

uint64_t UnixNowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

std::string Age(uint64_t unix_ns, uint64_t now_ns) {
  if (unix_ns == 0) return "never recorded";
  return FormatDurationNs(now_ns > unix_ns ? now_ns - unix_ns : 0) + " ago";
}

}  // namespace

void AddGcFlags(CLI::App& gc, GcConfig& c) {
  gc.add_option("--keep-gib", c.keep_gib,
                "Keep at most this many GiB (logical, as --cold-kv-gib) of the namespace's "
                "checkpoints; the least recently used go first")
      ->required()
      ->check(NumberInRange(0, 16777216, "GiB"));
  gc.add_flag("--dry-run", c.dry_run, "List what would be removed; remove nothing");
}

int RunGcCommand(const ServerConfig& config, const GcConfig& gc) {
  auto profile = LoadModelProfile(ResolveProfilePath(config.model_profile));
  if (!profile.ok()) return Fail(kExitUsage, profile.status().message());
  auto choice = ChooseProvider(config);
  if (!choice.ok()) return Fail(kExitUsage, choice.status().message());
  if (choice.value().plugin == "null") {
    return Fail(kExitUsage,
                "no cold tier to collect: give --cold-kv-dir DIR (the disk provider) or "
                "--tier-plugin NAME with its --tier-opt options");
  }
  MetricsRegistry metrics;
  HostServices host(&metrics);
  const std::string path = ResolvePluginPath(choice.value().plugin);
  auto library = PluginLibrary::Load(path, host.table());
  if (!library.ok()) return Fail(kExitUsage, library.status().message());
  if (std::string(library.value()->name()) == "null") {
    return Fail(kExitUsage, "no cold tier to collect: " + path + " is the null provider");
  }
  const std::string ns = NamespaceFor(config, profile.value());
  auto instance = ProviderInstance::Open(library.value(), host.table(), ns, choice.value().options);
  if (!instance.ok()) {
    return Fail(kExitUsage, std::string("cannot open the ") + library.value()->name() +
                                " provider: " + instance.status().ToString());
  }
  std::vector<EntryCopy> entries;
  const Status walked = instance.value()->Enumerate([&](const tier_entry& e) {
    entries.push_back(EntryCopy::Of(e));
    return true;
  });
  if (!walked.ok()) return Fail(kExitFailed, "enumerate: " + walked.ToString());
  std::sort(entries.begin(), entries.end(),
            [](const EntryCopy& a, const EntryCopy& b) { return LastUse(a) < LastUse(b); });
  uint64_t stored = 0;
  for (const EntryCopy& e : entries) stored += e.stored_bytes;
  const uint64_t keep_bytes =
      static_cast<uint64_t>(gc.keep_gib * 1073741824.0 / static_cast<double>(config.bytes_scale));
  uint64_t removed = 0, removed_bytes = 0, gone = 0;
  const uint64_t now_ns = UnixNowNs();
  for (const EntryCopy& e : entries) {
    if (stored <= keep_bytes) break;
    const Status s = gc.dry_run ? Status::Ok() : instance.value()->Remove(e.key);
    if (!s.ok() && s.code() != TIER_NOT_FOUND) {
      return Fail(kExitFailed, "remove " + KeyHex(e.key) + ": " + s.ToString());
    }
    gone += s.code() == TIER_NOT_FOUND ? 1 : 0;  // another server removed it meanwhile
    stored -= std::min(stored, e.stored_bytes);
    ++removed;
    removed_bytes += e.stored_bytes;
    std::cout << (gc.dry_run ? "would remove " : "removed ") << KeyHex(e.key) << "  last used "
              << Age(LastUse(e), now_ns) << "  " << FormatBytes(e.stored_bytes) << " stored\n";
  }
  if (entries.empty()) {
    std::cout << "gc: nothing stored under namespace '" << EscapeForLog(ns) << "' on "
              << library.value()->name()
              << "; removed nothing (the namespace comes from --namespace, --model-profile and "
                 "--bytes-scale: give the ones the servers use)\n";
    instance.value()->Close();
    return kExitOk;
  }
  std::cout << "gc: namespace '" << EscapeForLog(ns) << "' on " << library.value()->name() << ": "
            << entries.size() << " checkpoint(s); " << (gc.dry_run ? "would remove " : "removed ")
            << removed << " (" << FormatBytes(removed_bytes) << " stored"
            << (gone > 0 ? ", " + std::to_string(gone) + " already gone" : std::string()) << "); "
            << FormatBytes(stored) << " stored remain (keep " << FormatBytes(keep_bytes)
            << " stored = " << gc.keep_gib << " GiB logical / bytes-scale " << config.bytes_scale
            << ")\n";
  instance.value()->Close();
  return kExitOk;
}

}  // namespace tier
