#include "rados_test_env.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "checkpoint_bytes.h"
#include "format.h"

extern char** environ;

namespace tier::rados::test {
namespace {

std::map<std::string, std::string> ReadReadyFile(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

}  // namespace

std::optional<ClusterInfo> FixtureCluster(std::string* why) {
  const char* env = std::getenv("TIER_RADOS_CLUSTER_DIR");
  const std::string dir = env != nullptr ? env : TIER_RADOS_CLUSTER_DIR;
  const std::string ready = dir + "/ready";
  if (::access(ready.c_str(), R_OK) != 0) {
    *why = "no " + ready;
    return std::nullopt;
  }
  auto values = ReadReadyFile(ready);
  ClusterInfo c;
  c.dir = dir;
  c.conf = values["conf"];
  c.pool = values["pool"];
  c.client = values["client"];
  c.keyring = values["keyring"];
  c.admin_keyring = values["admin_keyring"];
  c.mon_host = values["mon_host"];
  if (c.conf.empty() || c.pool.empty()) {
    *why = ready + " is incomplete";
    return std::nullopt;
  }
  return c;
}

std::string UniqueNamespace(const std::string& label) {
  std::random_device device;
  return "rados-test/" + label + "/" + std::to_string(::getpid()) + "/" + std::to_string(device()) +
         std::to_string(device());
}

ProviderOptions Options(const ClusterInfo& c, const ProviderOptions& extra) {
  ProviderOptions options = {
      {"conf", c.conf},        {"pool", c.pool},      {"client", c.client},
      {"keyring", c.keyring},  {"capacity_gib", "4"}, {"op_timeout_s", "5"},
      {"lease_grace_s", "12"}, {"object_mib", "1"},   {"sweep_interval_s", "0"}};
  for (const auto& [key, value] : extra) {
    bool replaced = false;
    for (auto& [k, v] : options) {
      if (k == key) {
        v = value;
        replaced = true;
      }
    }
    if (!replaced) options.emplace_back(key, value);
  }
  return options;
}

std::vector<std::string> OptionArgs(const ProviderOptions& options) {
  std::vector<std::string> args;
  for (const auto& [k, v] : options) {
    args.push_back("--opt");
    args.push_back(k + "=" + v);
  }
  return args;
}

Result<std::unique_ptr<Provider>> Provider::Open(const std::string& namespace_id,
                                                 const ProviderOptions& options) {
  std::unique_ptr<Provider> p(new Provider());
  p->host_ = std::make_unique<HostServices>(&p->registry_);
  auto library = PluginLibrary::Load(TIER_RADOS_PLUGIN_PATH, p->host_->table());
  if (!library.ok()) return library.status();
  p->library_ = library.value();
  std::vector<tier_option> raw;
  for (const auto& [k, v] : options) raw.push_back({k.c_str(), v.c_str()});
  tier_error error{};
  const tier_status s = p->table()->open(p->host_->table(), namespace_id.c_str(), raw.data(),
                                         static_cast<uint32_t>(raw.size()), &p->instance_, &error);
  if (s != TIER_OK) return Status(s, error.message);
  return p;
}

Provider::~Provider() {
  Close();
}

void Provider::Close() {
  if (instance_ != nullptr) table()->close(instance_);
  instance_ = nullptr;
}

void Provider::Pending::Complete(void* user, const tier_completion* c) {
  auto* p = static_cast<Provider::Pending*>(user);
  std::lock_guard lock(p->mu);
  p->done.status = c->status;
  p->done.message = c->message != nullptr ? c->message : "";
  p->done.logical_bytes = c->logical_bytes;
  p->done.stored_bytes = c->stored_bytes;
  ++p->calls;
  p->cv.notify_all();
}

bool Provider::Pending::Wait(double timeout_s) {
  std::unique_lock lock(mu);
  return cv.wait_for(lock, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)),
                     [&] { return calls > 0; });
}

tier_status Provider::SpillAsync(const tier_key& key, std::vector<tier_segment> segments,
                                 Pending* p) {
  tier_error error{};
  const tier_status s =
      table()->spill(instance_, &key, segments.data(), static_cast<uint32_t>(segments.size()),
                     Pending::Complete, p, &error);
  if (s != TIER_OK) p->done = {s, error.message, 0, 0};
  return s;
}

tier_status Provider::RestoreAsync(const tier_key& key, std::vector<tier_segment> segments,
                                   Pending* p) {
  tier_error error{};
  const tier_status s =
      table()->restore(instance_, &key, segments.data(), static_cast<uint32_t>(segments.size()),
                       Pending::Complete, p, &error);
  if (s != TIER_OK) p->done = {s, error.message, 0, 0};
  return s;
}

Done Provider::Spill(const tier_key& key, std::vector<tier_segment> segments) {
  Pending p;
  if (SpillAsync(key, std::move(segments), &p) != TIER_OK) return p.done;
  if (!p.Wait(300)) return {-1, "spill never completed", 0, 0};
  return p.done;
}

Done Provider::Restore(const tier_key& key, std::vector<tier_segment> segments) {
  Pending p;
  if (RestoreAsync(key, std::move(segments), &p) != TIER_OK) return p.done;
  if (!p.Wait(300)) return {-1, "restore never completed", 0, 0};
  return p.done;
}

Result<tier_stat_result> Provider::Stat(const tier_key& key) {
  tier_stat_result out{};
  out.struct_size = sizeof(out);
  tier_error error{};
  const tier_status s = table()->stat(instance_, &key, &out, nullptr, 0, &error);
  if (s != TIER_OK) return Status(s, error.message);
  return out;
}

Status Provider::Remove(const tier_key& key) {
  tier_error error{};
  const tier_status s = table()->remove(instance_, &key, &error);
  return s == TIER_OK ? Status::Ok() : Status(s, error.message);
}

Result<std::vector<tier_entry>> Provider::Enumerate() {
  std::vector<tier_entry> entries;
  tier_error error{};
  const tier_status s = table()->enumerate(
      instance_,
      [](void* user, const tier_entry* e) -> int32_t {
        tier_entry copy = *e;
        copy.segments = nullptr;
        copy.manifest = nullptr;
        static_cast<std::vector<tier_entry>*>(user)->push_back(copy);
        return 0;
      },
      &entries, &error);
  if (s != TIER_OK) return Status(s, error.message);
  return entries;
}

Result<tier_plan> Provider::Plan(const tier_key& key, uint64_t predicted_prefill_ns) {
  tier_plan plan{};
  plan.struct_size = sizeof(plan);
  tier_error error{};
  const tier_status s = table()->plan_restore(instance_, &key, predicted_prefill_ns, &plan, &error);
  if (s != TIER_OK) return Status(s, error.message);
  return plan;
}

Result<std::vector<uint8_t>> Provider::Probe(const std::vector<tier_key>& keys) {
  std::vector<uint8_t> found(keys.size(), 0xEE);
  tier_error error{};
  const tier_status s = table()->probe(instance_, keys.data(), static_cast<uint32_t>(keys.size()),
                                       found.data(), &error);
  if (s != TIER_OK) return Status(s, error.message);
  return found;
}

Result<tier_stats> Provider::Stats() {
  tier_stats stats{};
  stats.struct_size = sizeof(stats);
  tier_error error{};
  const tier_status s = table()->stats(instance_, &stats, &error);
  if (s != TIER_OK) return Status(s, error.message);
  return stats;
}

std::vector<tier_segment> Checkpoint::Segments() {
  std::vector<tier_segment> out;
  for (size_t i = 0; i < layout.size(); ++i) {
    out.push_back({layout[i].kind, layout[i].index, layout[i].length_bytes,
                   buffers[i].empty() ? nullptr : buffers[i].data()});
  }
  return out;
}

std::vector<tier_segment> Checkpoint::EmptySegments() {
  for (auto& b : buffers) std::fill(b.begin(), b.end(), std::byte{0});
  return Segments();
}

bool Checkpoint::MatchesContent(const tier_key& other) const {
  for (size_t i = 0; i < layout.size(); ++i) {
    if (!sim::SegmentBytesMatch(other, layout[i].kind, layout[i].index, buffers[i])) return false;
  }
  return true;
}

bool Checkpoint::Matches() const {
  return MatchesContent(content);
}

uint64_t Checkpoint::logical_bytes() const {
  uint64_t total = 0;
  for (const auto& s : layout) total += s.length_bytes;
  return total;
}

Checkpoint MakeCheckpoint(const std::string& key_text, uint64_t kv_bytes,
                          const std::string& content_text) {
  Checkpoint c;
  c.key = KeyFromText(key_text);
  c.content = KeyFromText(content_text.empty() ? key_text : content_text);
  const uint64_t layer = std::max<uint64_t>(kv_bytes / 4, 1);
  c.layout = {{TIER_SEGMENT_MAIN_KV, 0, layer},      {TIER_SEGMENT_MAIN_KV, 1, layer + 13},
              {TIER_SEGMENT_MAIN_KV, 2, layer},      {TIER_SEGMENT_SPEC_KV, 0, layer - layer / 3},
              {TIER_SEGMENT_STATE_IMAGE, 0, 300000}, {TIER_SEGMENT_HIDDEN_STATE, 0, 10240},
              {TIER_SEGMENT_MANIFEST, 0, 300}};
  for (const auto& s : c.layout) {
    c.buffers.emplace_back(s.length_bytes);
    sim::FillSegmentBytes(c.content, s.kind, s.index, c.buffers.back());
  }
  return c;
}

// ---- Admin --------------------------------------------------------------------------------------

Result<std::unique_ptr<Admin>> Admin::Connect(const ClusterInfo& c) {
  std::unique_ptr<Admin> a(new Admin());
  a->pool_ = c.pool;
  if (rados_create2(&a->cluster_, "ceph", "client.admin", 0) < 0) {
    a->cluster_ = nullptr;
    return Status::IoError("rados_create2 failed");
  }
  rados_conf_read_file(a->cluster_, c.conf.c_str());
  rados_conf_set(a->cluster_, "keyring", c.admin_keyring.c_str());
  rados_conf_set(a->cluster_, "client_mount_timeout", "20");
  rados_conf_set(a->cluster_, "rados_osd_op_timeout", "30");
  rados_conf_set(a->cluster_, "rados_mon_op_timeout", "30");
  rados_conf_set(a->cluster_, "err_to_stderr", "false");
  if (const int rc = rados_connect(a->cluster_); rc < 0) {
    return Status::IoError("admin connect: " + Status::ErrnoText(-rc));
  }
  return a;
}

Admin::~Admin() {
  for (auto& [name, io] : ios_) rados_ioctx_destroy(io);
  if (cluster_ != nullptr) rados_shutdown(cluster_);
}

rados_ioctx_t Admin::Io(const std::string& rados_namespace, const std::string& pool) {
  const std::string p = pool.empty() ? pool_ : pool;
  const std::string id = p + "/" + rados_namespace;
  for (auto& [name, io] : ios_) {
    if (name == id) return io;
  }
  rados_ioctx_t io = nullptr;
  if (rados_ioctx_create(cluster_, p.c_str(), &io) < 0) return nullptr;
  rados_ioctx_set_namespace(io, rados_namespace.c_str());
  ios_.emplace_back(id, io);
  return io;
}

std::vector<std::string> Admin::List(const std::string& rados_namespace, const std::string& pool) {
  std::vector<std::string> names;
  rados_ioctx_t io = Io(rados_namespace, pool);
  rados_list_ctx_t ctx = nullptr;
  if (io == nullptr || rados_nobjects_list_open(io, &ctx) < 0) return names;
  for (;;) {
    const char* entry = nullptr;
    if (rados_nobjects_list_next(ctx, &entry, nullptr, nullptr) < 0) break;
    names.push_back(entry);
  }
  rados_nobjects_list_close(ctx);
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::string> Admin::Read(const std::string& ns, const std::string& oid) {
  rados_ioctx_t io = Io(ns);
  uint64_t size = 0;
  time_t mtime = 0;
  if (const int rc = rados_stat(io, oid.c_str(), &size, &mtime); rc < 0) {
    return Status::IoError("stat " + oid + ": " + Status::ErrnoText(-rc));
  }
  std::string bytes(size, '\0');
  const int rc = rados_read(io, oid.c_str(), bytes.data(), size, 0);
  if (rc < 0) return Status::IoError("read " + oid + ": " + Status::ErrnoText(-rc));
  bytes.resize(static_cast<size_t>(rc));
  return bytes;
}

Result<uint64_t> Admin::Size(const std::string& ns, const std::string& oid) {
  uint64_t size = 0;
  time_t mtime = 0;
  if (const int rc = rados_stat(Io(ns), oid.c_str(), &size, &mtime); rc < 0) {
    return Status::IoError("stat " + oid + ": " + Status::ErrnoText(-rc));
  }
  return size;
}

Status Admin::WriteFull(const std::string& ns, const std::string& oid, const std::string& bytes) {
  const int rc = rados_write_full(Io(ns), oid.c_str(), bytes.data(), bytes.size());
  return rc < 0 ? Status::IoError("write " + oid + ": " + Status::ErrnoText(-rc)) : Status::Ok();
}

Status Admin::Remove(const std::string& ns, const std::string& oid) {
  const int rc = rados_remove(Io(ns), oid.c_str());
  return rc < 0 ? Status::IoError("remove " + oid + ": " + Status::ErrnoText(-rc)) : Status::Ok();
}

Status Admin::Truncate(const std::string& ns, const std::string& oid, uint64_t size) {
  const int rc = rados_trunc(Io(ns), oid.c_str(), size);
  return rc < 0 ? Status::IoError("truncate " + oid + ": " + Status::ErrnoText(-rc)) : Status::Ok();
}

Status Admin::SetXattr(const std::string& ns, const std::string& oid, const std::string& name,
                       const std::string& value) {
  const int rc = rados_setxattr(Io(ns), oid.c_str(), name.c_str(), value.data(), value.size());
  return rc < 0 ? Status::IoError("setxattr " + oid + ": " + Status::ErrnoText(-rc)) : Status::Ok();
}

Status Admin::MonCommand(const std::string& json, std::string* out) {
  const char* argv[] = {json.c_str()};
  char* outbuf = nullptr;
  char* outs = nullptr;
  size_t outbuf_len = 0, outs_len = 0;
  const int rc =
      rados_mon_command(cluster_, argv, 1, "", 0, &outbuf, &outbuf_len, &outs, &outs_len);
  if (out != nullptr && outbuf != nullptr) out->assign(outbuf, outbuf_len);
  std::string status = outs != nullptr ? std::string(outs, outs_len) : "";
  if (outbuf != nullptr) rados_buffer_free(outbuf);
  if (outs != nullptr) rados_buffer_free(outs);
  if (rc < 0) return Status::IoError(json + ": " + Status::ErrnoText(-rc) + ": " + status);
  return Status::Ok();
}

std::string RadosNamespaceOf(const std::string& namespace_id) {
  return NamespaceTag("", namespace_id);
}

// ---- processes ---------------------------------------------------------------------------------

::tier::test::CommandResult RunWorker(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {TIER_RADOS_WORKER_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return ::tier::test::RunCommand(argv);
}

int StartWorker(const std::vector<std::string>& args, const std::string& out_path) {
  std::vector<std::string> argv = {TIER_RADOS_WORKER_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> raw;
  for (const std::string& a : argv) raw.push_back(const_cast<char*>(a.c_str()));
  raw.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, raw[0], &actions, nullptr, raw.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

int WaitWorker(int pid, int timeout_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return -1;
    if (std::chrono::steady_clock::now() >= until) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

::tier::test::CommandResult ClusterScript(const ClusterInfo& c, const std::string& subcommand) {
  return ::tier::test::RunCommand({"/bin/bash", TIER_CEPH_CLUSTER_SCRIPT, subcommand, c.dir});
}

::tier::test::CommandResult OsdGuard::Kill() {
  killed_ = true;
  return ClusterScript(c_, "kill-osd");
}

void OsdGuard::Restart() {
  if (!killed_) return;
  killed_ = false;
  const auto r = ClusterScript(c_, "start-osd");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

bool Eventually(double timeout_s, const std::function<bool()>& condition) {
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  for (;;) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace tier::rados::test
