// plugin_loader.h -- dlopen a tier provider, call its entry point, negotiate and validate the ABI.
// TOOL-LEVEL: not part of the integration API (host_shim/README.md, "Headers"); for the tools and
// tests built on the library (tier-host, tier-bench, the tests). tier::Host (host.h) loads the
// plugin itself.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <tier/status.h>
#include "tier_provider.h"

namespace tier {

// A loaded provider library. Instances opened from it hold a shared_ptr; the handle is closed
// after the last one, but the code stays mapped for the life of the process (RTLD_NODELETE): a
// provider's threads may outlive its instances (an instance abandoned after a timeout, thread_local
// destructors run at thread exit), and glibc's dynamic TLS of an unmapped library is left for
// whatever reads it later (LeakSanitizer's scan at exit crashed on it). Loading the same path again
// returns the same library state. Immutable after Load: any thread.
class PluginLibrary {
 public:
  // Loads `path` with dlopen(RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE), calls tier_provider_entry with
  // the host's version (major 1, minor `host_abi_minor`) and `host`, and validates the table. On
  // failure the Status message is one line naming the path and the cause. `host` must outlive the
  // library.
  static Result<std::shared_ptr<PluginLibrary>> Load(
      const std::string& path, const tier_host_services* host,
      uint32_t host_abi_minor = TIER_ABI_VERSION_MINOR);

  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  const tier_provider* table() const { return table_; }
  const std::string& path() const { return path_; }
  const char* name() const { return table_->name; }
  const char* version() const { return table_->version; }
  uint32_t plugin_abi_minor() const { return table_->abi_minor; }
  // The minor both sides understand: min(host, plugin).
  uint32_t negotiated_abi_minor() const;
  // "1.0 (host 1.0, plugin 1.0)".
  std::string AbiDescription() const;
  // True when the table has a non-NULL slot at [offset, offset + size) (TIER_HAS_SLOT by offset).
  bool HasSlot(size_t offset, size_t size) const;

 private:
  PluginLibrary() = default;
  void* handle_ = nullptr;
  const tier_provider* table_ = nullptr;
  std::string path_;
  uint32_t host_abi_minor_ = TIER_ABI_VERSION_MINOR;
};

// Turns `--tier-plugin` values into paths. Anything containing '/' or ending in ".so" is a path and
// is returned unchanged. A short name N ("disk", "null") is looked up as libtier_N.so in, in order:
// the directories of $TIER_PLUGIN_PATH (colon-separated), <executable dir>/../lib/tier (an
// install), and the build tree's plugin folder. Returns the first that exists, else the name as
// given (so the loader's "no such file" names what the user typed).
std::string ResolvePluginPath(const std::string& name_or_path);

}  // namespace tier
