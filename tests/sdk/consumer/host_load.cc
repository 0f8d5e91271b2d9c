// Links tier::host from an installed SDK: loads the provider given as argv[1], prints its name.
#include <cstdio>

#include <tier/host/host_services.h>
#include <tier/host/metrics_registry.h>
#include <tier/host/plugin_loader.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  tier::MetricsRegistry metrics;
  tier::HostServices host(&metrics);
  auto library = tier::PluginLibrary::Load(argv[1], host.table());
  if (!library.ok()) {
    std::fprintf(stderr, "%s\n", library.status().message().c_str());
    return 1;
  }
  std::printf("loaded %s\n", library.value()->name());
  return 0;
}
