#include "cluster.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace tier::rados {
namespace {

std::string Errno(int rc) {
  return Status::ErrnoText(rc < 0 ? -rc : rc);
}

// Digits only, optional surrounding quotes/space (the mon answers "134217728\n" or a JSON value).
bool ParseCount(std::string text, uint64_t* out) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '"')) {
    text.pop_back();
  }
  size_t start = 0;
  while (start < text.size() && (text[start] == ' ' || text[start] == '"')) ++start;
  text = text.substr(start);
  if (text.empty() || text.size() > 19 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  *out = std::strtoull(text.c_str(), nullptr, 10);
  return true;
}

}  // namespace

std::string Cluster::ConfGet(const char* name) const {
  char buffer[1024] = {};
  if (rados_conf_get(cluster_, name, buffer, sizeof(buffer)) < 0) return "";
  return buffer;
}

Status Cluster::Configure(const RadosOptions& o) {
  if (!o.conf.empty()) {
    if (const int rc = rados_conf_read_file(cluster_, o.conf.c_str()); rc < 0) {
      return Status::InvalidArgument("rados: option 'conf': cannot read '" + o.conf +
                                     "': " + Errno(rc));
    }
    conf_path_ = o.conf;
  } else {
    // librados's own search: $CEPH_CONF, /etc/ceph/ceph.conf, ~/.ceph/config, ./ceph.conf.
    if (rados_conf_read_file(cluster_, nullptr) < 0)
      conf_path_ = "(none found)";
    else
      conf_path_ = "(default search)";
  }
  rados_conf_parse_env(cluster_, nullptr);  // CEPH_ARGS
  if (!o.keyring.empty()) {
    if (const int rc = rados_conf_set(cluster_, "keyring", o.keyring.c_str()); rc < 0) {
      return Status::InvalidArgument("rados: option 'keyring': " + Errno(rc));
    }
  }
  const std::string timeout = std::to_string(o.op_timeout_s);
  // A shorter objecter tick than the op timeout: with osd_op_timeout <= objecter_timeout a client
  // did not recover after its OSD came back (found on this machine, issue 14).
  const std::string tick = std::to_string(std::max<uint32_t>(1, o.op_timeout_s / 3));
  // The client's in-flight byte throttle must not cut our window below queue_depth objects.
  const uint64_t window_bytes =
      2ull * o.queue_depth * (static_cast<uint64_t>(o.object_bytes) + (64u << 10));
  uint64_t throttle = 0;
  const std::string current = ConfGet("objecter_inflight_op_bytes");
  if (!ParseCount(current, &throttle) || throttle < window_bytes) throttle = window_bytes;
  const std::pair<const char*, std::string> settings[] = {
      {"rados_osd_op_timeout", timeout},
      {"rados_mon_op_timeout", timeout},
      {"client_mount_timeout", timeout},
      {"objecter_timeout", tick},
      {"objecter_inflight_op_bytes", std::to_string(throttle)},
      // The provider reports through the host's log; librados must not write to its stderr.
      {"log_to_stderr", "false"},
      {"err_to_stderr", "false"},
      // No admin socket unless asked: any local user could talk to it, and a client that hangs
      // up before the answer raised SIGPIPE in the server (issue 26).
      {"admin_socket", o.admin_socket},
  };
  for (const auto& [name, value] : settings) {
    if (const int rc = rados_conf_set(cluster_, name, value.c_str()); rc < 0) {
      return Status::Internal("rados: cannot set " + std::string(name) + "=" + value + ": " +
                              Errno(rc));
    }
  }
  mon_host_ = ConfGet("mon_host");
  if (mon_host_.empty()) mon_host_ = "(none: no mon_host in " + conf_path_ + ")";
  return Status::Ok();
}

bool Cluster::MonConfigGet(const std::string& name, std::string* value, std::string* error) const {
  const std::string command =
      R"({"prefix": "config get", "who": "osd", "key": ")" + name + R"(", "format": "json"})";
  const char* argv[] = {command.c_str()};
  char* out = nullptr;
  char* status = nullptr;
  size_t out_len = 0, status_len = 0;
  const int rc = rados_mon_command(cluster_, argv, 1, "", 0, &out, &out_len, &status, &status_len);
  if (rc == 0 && out != nullptr) value->assign(out, out_len);
  if (rc != 0) {
    *error = Errno(rc) + (status != nullptr ? ": " + std::string(status, status_len) : "");
  }
  if (out != nullptr) rados_buffer_free(out);
  if (status != nullptr) rados_buffer_free(status);
  return rc == 0;
}

Status Cluster::ReadLimits(const Logger& log) {
  std::string object_text, write_text, error;
  uint64_t object_bytes = 0, write_mib = 0;
  if (MonConfigGet("osd_max_object_size", &object_text, &error) &&
      MonConfigGet("osd_max_write_size", &write_text, &error) &&
      ParseCount(object_text, &object_bytes) && ParseCount(write_text, &write_mib)) {
    limits_.max_object_bytes = object_bytes;
    limits_.max_write_bytes = write_mib << 20;
    limits_.source = "mon";
    return Status::Ok();
  }
  // A client without 'mon allow r' cannot ask: the client's own defaults are the OSDs' unless an
  // operator changed them on the OSDs only.
  ParseCount(ConfGet("osd_max_object_size"), &limits_.max_object_bytes);
  if (ParseCount(ConfGet("osd_max_write_size"), &write_mib))
    limits_.max_write_bytes = write_mib << 20;
  limits_.source = "client defaults (the mon refused 'config get': " + error.substr(0, 120) + ")";
  log(TIER_LOG_WARN, "rados: could not ask the mon for osd_max_object_size/osd_max_write_size (" +
                         error.substr(0, 160) + "); using the client's defaults " +
                         std::to_string(limits_.max_object_bytes) + "/" +
                         std::to_string(limits_.max_write_bytes) + " bytes");
  return Status::Ok();
}

Result<std::unique_ptr<Cluster>> Cluster::Connect(const RadosOptions& o,
                                                  const std::string& rados_namespace,
                                                  const Logger& log) {
  std::unique_ptr<Cluster> c(new Cluster());
  const std::string name = o.client_name();
  if (const int rc = rados_create2(&c->cluster_, "ceph", name.c_str(), 0); rc < 0) {
    c->cluster_ = nullptr;
    return Status::InvalidArgument("rados: option 'client': cannot create a client '" + name +
                                   "': " + Errno(rc));
  }
  TIER_RETURN_IF_ERROR(c->Configure(o));
  if (const int rc = rados_connect(c->cluster_); rc < 0) {
    const bool timeout = rc == -ETIMEDOUT || rc == -EINTR;
    return Status::IoError(
        "rados: cannot connect to the cluster at mon_host " + c->mon_host_ + " (conf " +
        c->conf_path_ + ", " + name + "): " +
        (timeout ? "no answer within op_timeout_s=" + std::to_string(o.op_timeout_s) + " s"
                 : Errno(rc)) +
        (rc == -EACCES || rc == -EPERM || rc == -ENOENT ? " (check 'client' and 'keyring')" : ""));
  }
  if (const int rc = rados_ioctx_create(c->cluster_, o.pool.c_str(), &c->io_); rc < 0) {
    c->io_ = nullptr;
    return Status::InvalidArgument("rados: option 'pool': cannot open pool '" + o.pool +
                                   "' on the cluster at mon_host " + c->mon_host_ + ": " +
                                   Errno(rc));
  }
  rados_ioctx_set_namespace(c->io_, rados_namespace.c_str());
  TIER_RETURN_IF_ERROR(c->ReadLimits(log));
  const uint64_t chunk_write = static_cast<uint64_t>(o.object_bytes) + kChunkOverheadBytes;
  if (chunk_write > c->limits_.max_object_bytes || chunk_write > c->limits_.max_write_bytes) {
    const uint64_t fits = std::min(c->limits_.max_object_bytes, c->limits_.max_write_bytes);
    return Status::InvalidArgument(
        "rados: option 'object_mib'=" + std::to_string(o.object_bytes >> 20) +
        ": a chunk object of " + std::to_string(chunk_write) +
        " bytes exceeds the cluster's osd_max_object_size (" +
        std::to_string(c->limits_.max_object_bytes) + " bytes) or osd_max_write_size (" +
        std::to_string(c->limits_.max_write_bytes) + " bytes, from " + c->limits_.source +
        "); the largest that fits is object_mib=" +
        std::to_string(fits > kChunkOverheadBytes ? (fits - kChunkOverheadBytes) >> 20 : 0));
  }
  return c;
}

Cluster::~Cluster() {
  if (io_ != nullptr) rados_ioctx_destroy(io_);
  if (cluster_ != nullptr) rados_shutdown(cluster_);
}

}  // namespace tier::rados
