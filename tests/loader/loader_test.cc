// loader_test.cc -- PluginLoader: every way a plugin can fail to load gives one clear line naming
// the path and the cause; minors that differ load in both directions.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <tier/host/host_services.h>
#include <tier/host/metrics_registry.h>
#include <tier/host/plugin_loader.h>
#include <tier/host/provider_instance.h>
#include "test_support.h"

namespace tier {
namespace {

std::string Variant(const std::string& name) {
  return std::string(TEST_PLUGIN_DIR) + "/libtier_testprov_" + name + ".so";
}

class PluginLoader : public ::testing::Test {
 protected:
  MetricsRegistry metrics_;
  HostServices host_{&metrics_};

  // Loads `path`, expects failure, and returns the message (checked to be one line naming path).
  std::string LoadFailure(const std::string& path) {
    auto library = PluginLibrary::Load(path, host_.table());
    EXPECT_FALSE(library.ok()) << path << " loaded but should not";
    const std::string message = library.status().message();
    EXPECT_NE(message.find("'" + path + "'"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
    return message;
  }
};

// "1.<this host's minor>", the version this test binary was compiled against.
std::string HostVersion() {
  return "1." + std::to_string(TIER_ABI_VERSION_MINOR);
}

TEST_F(PluginLoader, GoodPluginLoadsAndNegotiatesSameVersion) {
  auto library = PluginLibrary::Load(Variant("good"), host_.table());
  ASSERT_TRUE(library.ok()) << library.status().ToString();
  EXPECT_STREQ(library.value()->name(), "test");
  EXPECT_EQ(library.value()->AbiDescription(),
            HostVersion() + " (host " + HostVersion() + ", plugin " + HostVersion() + ")");
}

TEST_F(PluginLoader, NoSuchFile) {
  EXPECT_NE(LoadFailure("/no/such/plugin.so").find("no such file"), std::string::npos);
}

TEST_F(PluginLoader, DirectoryIsRefused) {
  test::ScopedTempDir dir;
  EXPECT_NE(LoadFailure(dir.path()).find("is a directory"), std::string::npos);
}

TEST_F(PluginLoader, NotASharedObject) {
  test::ScopedTempDir dir;
  const std::string path = dir.path() + "/fake.so";
  std::ofstream(path) << "this is text, not ELF\n";
  const std::string message = LoadFailure(path);
  EXPECT_NE(message.find("not a shared object"), std::string::npos) << message;
}

TEST_F(PluginLoader, MissingEntrySymbol) {
  const std::string message = LoadFailure(Variant("no_entry"));
  EXPECT_NE(message.find("no entry symbol 'tier_provider_entry'"), std::string::npos) << message;
}

TEST_F(PluginLoader, WrongMajorNamesBothVersions) {
  const std::string message = LoadFailure(Variant("wrong_major"));
  EXPECT_NE(message.find("ABI major version mismatch: plugin 2." +
                         std::to_string(TIER_ABI_VERSION_MINOR) + ", host " + HostVersion()),
            std::string::npos)
      << message;
}

TEST_F(PluginLoader, ShortTableIsRefused) {
  const std::string message = LoadFailure(Variant("short_table"));
  EXPECT_NE(message.find("provider table too short: 72 bytes"), std::string::npos) << message;
  EXPECT_NE(message.find("at least 112"), std::string::npos) << message;
}

TEST_F(PluginLoader, NullRequiredSlotIsRefused) {
  const std::string message = LoadFailure(Variant("null_slot"));
  EXPECT_NE(message.find("misses required slot 'restore'"), std::string::npos) << message;
}

TEST_F(PluginLoader, NewerMinorPluginLoadsAndExtraSlotIsVisible) {
  auto library = PluginLibrary::Load(Variant("minor_newer"), host_.table());
  ASSERT_TRUE(library.ok()) << library.status().ToString();
  EXPECT_EQ(library.value()->negotiated_abi_minor(), TIER_ABI_VERSION_MINOR);
  EXPECT_EQ(library.value()->AbiDescription(),
            HostVersion() + " (host " + HostVersion() + ", plugin 1.7)");
  // The appended 1.7 slot lies inside the plugin's table; this host simply never calls it.
  EXPECT_TRUE(library.value()->HasSlot(sizeof(tier_provider), sizeof(void*)));
  auto instance = ProviderInstance::Open(library.value(), host_.table(), "ns", {});
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  auto info = instance.value()->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_STREQ(info.value().name, "test");
}

TEST_F(PluginLoader, OlderMinorPluginWorksWithNewerHost) {
  // A 1.3 host: its services table has a slot the 1.0 plugin (built against the frozen 1.0
  // header, tests/abi/v1_0) does not know about.
  struct HostServicesV1_3 {
    tier_host_services v1_0;
    void (*future_service)(void*);
  } newer{};
  newer.v1_0 = *host_.table();
  newer.v1_0.struct_size = sizeof(newer);
  newer.v1_0.abi_minor = 3;
  newer.future_service = [](void*) {};
  auto library = PluginLibrary::Load(Variant("minor_older"), &newer.v1_0, /*host_abi_minor=*/3);
  ASSERT_TRUE(library.ok()) << library.status().ToString();
  EXPECT_EQ(library.value()->AbiDescription(), "1.0 (host 1.3, plugin 1.0)");
  // The host must not call slots beyond the older plugin's table: 1.1's probe is not there.
  EXPECT_FALSE(library.value()->HasSlot(offsetof(tier_provider, probe), sizeof(void*)));
  EXPECT_FALSE(library.value()->HasSlot(sizeof(tier_provider), sizeof(void*)));
  auto instance = ProviderInstance::Open(library.value(), &newer.v1_0, "ns", {});
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  auto info = instance.value()->Info();
  ASSERT_TRUE(info.ok());
  EXPECT_STREQ(info.value().io_path, "host-abi=1.3 services=88")
      << "the plugin saw the newer host's version and table size and still opened";
}

TEST_F(PluginLoader, OlderMinorProviderRoundTripsWithoutProbe) {
  // A 1.0 provider that stores checkpoints (tests/conformance/reference_provider.cc built against
  // the frozen 1.0 header): this 1.1 host spills, restores and enumerates through it, calls no 1.1
  // slot and reads no 1.1 field of its entries.
  auto library = PluginLibrary::Load(Variant("reference_v1_0"), host_.table());
  ASSERT_TRUE(library.ok()) << library.status().ToString();
  EXPECT_EQ(library.value()->AbiDescription(), "1.0 (host " + HostVersion() + ", plugin 1.0)");
  EXPECT_EQ(library.value()->table()->struct_size, TIER_PROVIDER_V1_0_SIZE);
  EXPECT_FALSE(library.value()->HasSlot(offsetof(tier_provider, probe), sizeof(void*)));
  auto instance = ProviderInstance::Open(library.value(), host_.table(), "ns", {});
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  tier_key key{};
  key.bytes[0] = 10;
  std::vector<std::byte> kv(8192), manifest(40), back_kv(8192), back_manifest(40);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = static_cast<std::byte>(i * 31 + 7);
  for (size_t i = 0; i < manifest.size(); ++i) manifest[i] = static_cast<std::byte>(i + 1);
  tier_segment spill[2] = {{TIER_SEGMENT_MAIN_KV, 0, kv.size(), kv.data()},
                           {TIER_SEGMENT_MANIFEST, 0, manifest.size(), manifest.data()}};
  const Completion spilled = instance.value()->SpillAndWait(key, spill);
  ASSERT_TRUE(spilled.status.ok()) << spilled.status.ToString();
  tier_segment restore[2] = {
      {TIER_SEGMENT_MAIN_KV, 0, back_kv.size(), back_kv.data()},
      {TIER_SEGMENT_MANIFEST, 0, back_manifest.size(), back_manifest.data()}};
  const Completion restored = instance.value()->RestoreAndWait(key, restore);
  ASSERT_TRUE(restored.status.ok()) << restored.status.ToString();
  EXPECT_EQ(back_kv, kv);
  EXPECT_EQ(back_manifest, manifest);
  int entries = 0;
  uint32_t entry_size = 0;
  ASSERT_TRUE(instance.value()
                  ->Enumerate([&](const tier_entry& entry) {
                    ++entries;
                    entry_size = entry.struct_size;
                    EXPECT_EQ(entry.segment_count, 2u);
                    EXPECT_EQ(entry.manifest_bytes, manifest.size());
                    return true;
                  })
                  .ok());
  EXPECT_EQ(entries, 1);
  EXPECT_EQ(entry_size, TIER_ENTRY_V1_0_SIZE) << "a 1.0 provider's entries end before the times";
  tier_entry probe_size{};
  probe_size.struct_size = entry_size;
  EXPECT_FALSE(TIER_HAS_FIELD(&probe_size, tier_entry, created_unix_ns))
      << "so a 1.1 host must not read created_unix_ns of them";
  EXPECT_TRUE(instance.value()->Remove(key).ok());
}

// Issue 20, defect 2: a waiter woken by a completion must not find that operation outstanding
// (tier-host --check read 1 and failed a correct provider). The count drops before `done` runs.
TEST_F(PluginLoader, CompletedOperationIsNotOutstandingWhenItsDoneRuns) {
  auto library = PluginLibrary::Load(Variant("reference_v1_0"), host_.table());
  ASSERT_TRUE(library.ok()) << library.status().ToString();
  auto instance = ProviderInstance::Open(library.value(), host_.table(), "ns", {});
  ASSERT_TRUE(instance.ok()) << instance.status().ToString();
  ProviderInstance& provider = *instance.value();
  std::vector<std::byte> kv(4096, std::byte{7}), manifest(40, std::byte{1});
  tier_segment segments[2] = {{TIER_SEGMENT_MAIN_KV, 0, kv.size(), kv.data()},
                              {TIER_SEGMENT_MANIFEST, 0, manifest.size(), manifest.data()}};
  for (int i = 0; i < 20; ++i) {
    tier_key key{};
    key.bytes[0] = static_cast<uint8_t>(i + 1);
    std::promise<uint64_t> seen;
    std::future<uint64_t> outstanding_in_done = seen.get_future();
    ASSERT_TRUE(provider
                    .Spill(key, segments,
                           [&](const Completion&) { seen.set_value(provider.outstanding()); })
                    .ok());
    ASSERT_EQ(outstanding_in_done.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    EXPECT_EQ(outstanding_in_done.get(), 0u) << "spill " << i << " still counted in its done";
    const Completion restored = provider.RestoreAndWait(key, segments);
    ASSERT_TRUE(restored.status.ok()) << restored.status.ToString();
    EXPECT_EQ(provider.outstanding(), 0u) << "what tier-host --check reads after a wait";
    EXPECT_TRUE(provider.Remove(key).ok());
  }
}

TEST_F(PluginLoader, NullProviderLoadsAndDeclinesCleanly) {
  auto library = PluginLibrary::Load(NULL_PLUGIN, host_.table());
  ASSERT_TRUE(library.ok()) << library.status().ToString();
  EXPECT_STREQ(library.value()->name(), "null");
  auto instance = ProviderInstance::Open(library.value(), host_.table(), "ns", {});
  ASSERT_TRUE(instance.ok());
  // The declines are counted in the shared metric families.
  tier_key key{};
  char byte = 1;
  tier_segment segment{TIER_SEGMENT_MAIN_KV, 0, 1, &byte};
  EXPECT_EQ(instance.value()->SpillAndWait(key, {&segment, 1}).status.code(), TIER_NO_SPACE);
  const std::string text = metrics_.ExpositionText();
  EXPECT_NE(text.find("tier_cold_spills_total{provider=\"null\",result=\"no_space\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tier_cold_capacity_bytes{provider=\"null\"} 0"), std::string::npos);
}

TEST_F(PluginLoader, NullProviderExportsOnlyItsEntryPoint) {
  auto result = test::RunCommand({"/usr/bin/nm", "-D", "--defined-only", NULL_PLUGIN});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(test::CountLines(result.out), 1) << result.out;
  EXPECT_NE(result.out.find(" T tier_provider_entry"), std::string::npos) << result.out;
}

TEST(PluginPath, ShortNamesResolveThroughTierPluginPath) {
  EXPECT_EQ(ResolvePluginPath("./x.so"), "./x.so");
  EXPECT_EQ(ResolvePluginPath("/abs/libtier_disk.so"), "/abs/libtier_disk.so");
  ::setenv("TIER_PLUGIN_PATH", TEST_PLUGIN_DIR, 1);
  EXPECT_EQ(ResolvePluginPath("testprov_good"), Variant("good"));
  ::unsetenv("TIER_PLUGIN_PATH");
  EXPECT_EQ(ResolvePluginPath("no_such_provider_name"), "no_such_provider_name");
  // The build tree is searched last, so "null" resolves in a build without any environment.
  EXPECT_NE(ResolvePluginPath("null").find("libtier_null.so"), std::string::npos);
}

}  // namespace
}  // namespace tier
