// rados_test_env.h -- what the rados suites share: the fixture cluster (tests/ceph/ceph-cluster.sh
// started by the ctest fixture RadosCluster.Start), unique namespaces, the provider loaded through
// the ABI as a server loads it, admin access to the pool through librados, checkpoints with
// verifiable bytes, and the worker process (tier_rados_worker) for multi-process tests.
#pragma once

#include <rados/librados.h>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <tier/host/host_services.h>
#include <tier/host/metrics_registry.h>
#include <tier/host/plugin_loader.h>
#include <tier/host/provider_instance.h>
#include <tier/status.h>
#include "test_support.h"

namespace tier::rados::test {

struct ClusterInfo {
  std::string dir;  // the cluster's directory (ceph-cluster.sh start DIR)
  std::string conf;
  std::string pool;
  std::string client;
  std::string keyring;
  std::string admin_keyring;
  std::string mon_host;
};

// The running fixture cluster ($TIER_RADOS_CLUSTER_DIR, else the build tree's), or nullopt with
// why there is none in *why (tests skip with it).
std::optional<ClusterInfo> FixtureCluster(std::string* why);

// Skips the current test, with the reason, when there is no cluster; else sets `info`.
#define RADOS_REQUIRE_CLUSTER(info)                                              \
  do {                                                                           \
    std::string why_;                                                            \
    auto found_ = ::tier::rados::test::FixtureCluster(&why_);                    \
    if (!found_)                                                                 \
      GTEST_SKIP() << "no test cluster (" << why_                                \
                   << "): the ctest fixture "                                    \
                      "RadosCluster.Start brings one up when ceph is installed"; \
    info = *found_;                                                              \
  } while (0)

// A namespace no other test or run uses ("<label>/<pid>/<random>").
std::string UniqueNamespace(const std::string& label);

// The options every test starts from (conf, pool, client, keyring, capacity, short timeouts),
// with `extra` replacing or adding keys.
ProviderOptions Options(const ClusterInfo& c, const ProviderOptions& extra = {});
// As "--opt k=v" arguments for the worker.
std::vector<std::string> OptionArgs(const ProviderOptions& options);

// What a spill or restore completion reported.
struct Done {
  tier_status status = -1;
  std::string message;
  uint64_t logical_bytes = 0;
  uint64_t stored_bytes = 0;
};

// The provider loaded through dlopen and the ABI (as a server loads it), with its own host
// services. Any thread, except Close and destruction.
class Provider {
 public:
  static Result<std::unique_ptr<Provider>> Open(const std::string& namespace_id,
                                                const ProviderOptions& options);
  ~Provider();  // Close()
  void Close();

  const tier_provider* table() const { return library_->table(); }
  tier_instance* instance() const { return instance_; }
  // Submit and wait (a refusal is returned as the status, with no callback).
  Done Spill(const tier_key& key, std::vector<tier_segment> segments);
  Done Restore(const tier_key& key, std::vector<tier_segment> segments);
  // Submit only; `done` is filled by the callback and `calls` counts them.
  struct Pending {
    std::mutex mu;
    std::condition_variable cv;
    int calls = 0;
    Done done;
    // Waits up to `timeout_s`; true once the callback ran.
    bool Wait(double timeout_s);
    // The completion callback (tier_done_fn) that fills the Pending at `user`.
    static void Complete(void* user, const tier_completion* c);
  };
  tier_status SpillAsync(const tier_key& key, std::vector<tier_segment> segments, Pending* p);
  tier_status RestoreAsync(const tier_key& key, std::vector<tier_segment> segments, Pending* p);
  Result<tier_stat_result> Stat(const tier_key& key);
  Status Remove(const tier_key& key);
  Result<std::vector<tier_entry>> Enumerate();  // pointers inside are not kept
  Result<tier_plan> Plan(const tier_key& key, uint64_t predicted_prefill_ns);
  Result<std::vector<uint8_t>> Probe(const std::vector<tier_key>& keys);
  Result<tier_stats> Stats();
  MetricsRegistry& metrics() { return registry_; }

 private:
  Provider() = default;
  MetricsRegistry registry_;
  std::unique_ptr<HostServices> host_;
  std::shared_ptr<PluginLibrary> library_;
  tier_instance* instance_ = nullptr;
};

// A checkpoint whose bytes derive from `content` (checkpoint_bytes.h), stored under `key`.
struct Checkpoint {
  tier_key key{};
  tier_key content{};
  std::vector<tier_segment_info> layout;
  std::vector<std::vector<std::byte>> buffers;

  std::vector<tier_segment> Segments();       // over the filled buffers
  std::vector<tier_segment> EmptySegments();  // zeroed buffers, for a restore
  bool Matches() const;                       // the buffers hold `content`'s bytes
  bool MatchesContent(const tier_key& other) const;
  uint64_t logical_bytes() const;
};
// KV-like segments totalling about `kv_bytes`, a StateImage part, hidden state and a manifest.
Checkpoint MakeCheckpoint(const std::string& key_text, uint64_t kv_bytes,
                          const std::string& content_text = "");

// client.admin on the cluster through librados: objects of one RADOS namespace, mon commands.
class Admin {
 public:
  static Result<std::unique_ptr<Admin>> Connect(const ClusterInfo& c);
  ~Admin();
  std::vector<std::string> List(const std::string& rados_namespace, const std::string& pool = "");
  Result<std::string> Read(const std::string& rados_namespace, const std::string& oid);
  Result<uint64_t> Size(const std::string& rados_namespace, const std::string& oid);
  Status WriteFull(const std::string& rados_namespace, const std::string& oid,
                   const std::string& bytes);
  Status Remove(const std::string& rados_namespace, const std::string& oid);
  Status Truncate(const std::string& rados_namespace, const std::string& oid, uint64_t size);
  Status SetXattr(const std::string& rados_namespace, const std::string& oid,
                  const std::string& name, const std::string& value);
  // A JSON mon command ({"prefix": ...}); the output in *out.
  Status MonCommand(const std::string& json, std::string* out = nullptr);

 private:
  Admin() = default;
  rados_ioctx_t Io(const std::string& rados_namespace, const std::string& pool = "");
  rados_t cluster_ = nullptr;
  std::string pool_;
  std::vector<std::pair<std::string, rados_ioctx_t>> ios_;
};

// The RADOS namespace the provider uses for `namespace_id` (no prefix).
std::string RadosNamespaceOf(const std::string& namespace_id);

// tier_rados_worker with `args` (see rados_worker.cc), waited for.
::tier::test::CommandResult RunWorker(const std::vector<std::string>& args);
// Started in the background with stdout to `out_path`; returns the pid.
int StartWorker(const std::vector<std::string>& args, const std::string& out_path);
// Waits up to `timeout_s` for `pid`; its exit code (128 + signal), or -1 on timeout.
int WaitWorker(int pid, int timeout_s);

// ceph-cluster.sh SUBCOMMAND on the fixture cluster (kill-osd, start-osd), waited for.
::tier::test::CommandResult ClusterScript(const ClusterInfo& c, const std::string& subcommand);

// Restarts the fixture cluster's OSD when a test that killed it ends, however it ends.
class OsdGuard {
 public:
  explicit OsdGuard(const ClusterInfo& c) : c_(c) {}
  ~OsdGuard() { Restart(); }
  OsdGuard(const OsdGuard&) = delete;
  OsdGuard& operator=(const OsdGuard&) = delete;
  ::tier::test::CommandResult Kill();  // ceph-cluster.sh kill-osd
  void Restart();                      // start-osd (expected to succeed) once killed; else nothing

 private:
  ClusterInfo c_;
  bool killed_ = false;
};

// Polls `condition` every 100 ms for up to `timeout_s`; true once it holds.
bool Eventually(double timeout_s, const std::function<bool()>& condition);

}  // namespace tier::rados::test
