// The FUSE side of the fault filesystem: high-level libfuse3 callbacks that pass each call through
// to the backing directory and append what it changed to the model's log, under one mutex so the
// log's order is the order the backing saw.
#define FUSE_USE_VERSION 35
#include "fault_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <fuse.h>
#include <fuse_lowlevel.h>
#include <linux/fs.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tier::powerloss {

// An open file or directory: fuse_file_info::fh points at one (owned by FaultFs::handles_).
struct FaultFsHandle {
  int fd = -1;
  NodeId node = 0;
  uint64_t epoch = 0;
};

namespace {

using Handle = FaultFsHandle;

constexpr auto kHoldLimit = std::chrono::seconds(60);  // a stopped request waits at most this

Handle* HandleOf(const fuse_file_info* fi) {
  return fi == nullptr ? nullptr : reinterpret_cast<Handle*>(fi->fh);
}

FsImage NamesOf(const FsImage& image) {
  FsImage names;
  names.next_node = image.next_node;
  for (const auto& [id, node] : image.nodes) {
    names.nodes[id] = FsImage::Node{node.dir, node.mode, {}, node.entries};
  }
  return names;
}

std::pair<std::string, std::string> Split(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return {"", path};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

std::string Rel(const char* path) {  // "/a/b" -> "a/b"
  std::string p = path == nullptr ? "" : path;
  while (!p.empty() && p.front() == '/') p.erase(0, 1);
  return p;
}

}  // namespace

// The callbacks. Each takes a Request: the model's lock and the gate (a stopped filesystem holds
// the request; a drained one, or a handle of a past epoch, answers EIO).
class FaultFs::Ops {
 public:
  static const fuse_operations& Table();

 private:
  struct Request {
    FaultFs* fs;
    std::unique_lock<std::mutex> lock;
    int rc = 0;
    Request(bool mutating, const Handle* h = nullptr)
        : fs(static_cast<FaultFs*>(fuse_get_context()->private_data)), lock(fs->mu_) {
      rc = Enter(mutating, h == nullptr ? 0 : h->epoch);
    }
    int Enter(bool mutating, uint64_t epoch);
    std::string Backing(const std::string& rel) const { return fs->backing_ + "/" + rel; }
    void Log(Op op) { fs->log_.push_back(std::move(op)); }
    FsImage& live() { return fs->live_; }
    uint64_t NewHandle(int fd, NodeId node) {
      auto handle = std::make_unique<Handle>(Handle{fd, node, fs->epoch_});
      const auto fh = reinterpret_cast<uint64_t>(handle.get());
      fs->handles_.emplace(fh, std::move(handle));
      return fh;
    }
  };

  static void* Init(fuse_conn_info* conn, fuse_config* cfg);
  static int GetAttr(const char* path, struct stat* st, fuse_file_info* fi);
  static int Create(const char* path, mode_t mode, fuse_file_info* fi);
  static int Open(const char* path, fuse_file_info* fi);
  static int Read(const char* path, char* buf, size_t size, off_t off, fuse_file_info* fi);
  static int Write(const char* path, const char* buf, size_t size, off_t off, fuse_file_info* fi);
  static int Truncate(const char* path, off_t size, fuse_file_info* fi);
  static int FAllocate(const char* path, int mode, off_t off, off_t len, fuse_file_info* fi);
  static int FSync(const char* path, int datasync, fuse_file_info* fi);
  static int Release(const char* path, fuse_file_info* fi);
  static int Flush(const char*, fuse_file_info*) { return 0; }
  static int OpenDir(const char* path, fuse_file_info* fi);
  static int ReadDir(const char* path, void* buf, fuse_fill_dir_t filler, off_t off,
                     fuse_file_info* fi, fuse_readdir_flags flags);
  static int FSyncDir(const char* path, int datasync, fuse_file_info* fi);
  static int MkDir(const char* path, mode_t mode);
  static int Unlink(const char* path) { return Remove(path, false); }
  static int RmDir(const char* path) { return Remove(path, true); }
  static int Remove(const char* path, bool dir);
  static int Rename(const char* from, const char* to, unsigned int flags);
  static int Chmod(const char* path, mode_t mode, fuse_file_info* fi);
  static int Chown(const char* path, uid_t uid, gid_t gid, fuse_file_info* fi);
  static int Utimens(const char* path, const timespec tv[2], fuse_file_info* fi);
  static int StatFs(const char* path, struct statvfs* st);
  static int Refuse() { return -EPERM; }
};

int FaultFs::Ops::Request::Enter(bool mutating, uint64_t epoch) {
  if (fs->drained_ || fs->shutting_down_) return -EIO;
  if (epoch != 0 && epoch != fs->epoch_) return -EIO;
  if (!fs->cut_ && mutating && fs->arm_at_ != 0 && ++fs->mutations_ >= fs->arm_at_) {
    fs->cut_ = true;
    fs->cut_at_ = fs->log_.size();
    fs->cv_.notify_all();
  }
  if (!fs->cut_) return 0;
  const uint64_t at = fs->epoch_;
  if (!fs->cv_.wait_for(lock, kHoldLimit,
                        [&] { return fs->drained_ || fs->shutting_down_ || fs->epoch_ != at; })) {
    std::fprintf(stderr, "tier-faultfs: a request waited %lld s on a cut filesystem; EIO\n",
                 static_cast<long long>(kHoldLimit.count()));
  }
  return -EIO;
}

void* FaultFs::Ops::Init(fuse_conn_info* conn, fuse_config* cfg) {
  cfg->entry_timeout = 0;
  cfg->negative_timeout = 0;
  cfg->attr_timeout = 0;
  cfg->ac_attr_timeout_set = 1;
  cfg->ac_attr_timeout = 0;
  cfg->hard_remove = 1;  // an unlinked open file is not renamed to .fuse_hidden*
  cfg->nullpath_ok = 1;
  cfg->direct_io = 1;  // no page cache: every read and write reaches the model
  cfg->kernel_cache = 0;
  cfg->use_ino = 0;
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  return fuse_get_context()->private_data;
}

int FaultFs::Ops::GetAttr(const char* path, struct stat* st, fuse_file_info* fi) {
  const Handle* h = HandleOf(fi);
  Request r(false, h);
  if (r.rc != 0) return r.rc;
  r.lock.unlock();
  const int rc =
      h != nullptr && h->fd >= 0 ? ::fstat(h->fd, st) : ::lstat(r.Backing(Rel(path)).c_str(), st);
  return rc == 0 ? 0 : -errno;
}

int FaultFs::Ops::Create(const char* path, mode_t mode, fuse_file_info* fi) {
  Request r(true);
  if (r.rc != 0) return r.rc;
  if (fi->flags & O_DIRECT) return -EINVAL;
  const auto [parent, name] = Split(Rel(path));
  const NodeId dir = r.live().Resolve(parent);
  if (dir == 0 || !r.live().nodes[dir].dir) return -ENOENT;
  const bool existed = r.live().nodes[dir].entries.count(name) != 0;
  const int fd = ::open(r.Backing(Rel(path)).c_str(), fi->flags | O_CREAT | O_CLOEXEC, mode);
  if (fd < 0) return -errno;
  NodeId node = 0;
  if (existed) {
    node = r.live().nodes[dir].entries[name];
    if (fi->flags & O_TRUNC) r.Log(Op::SetSize(node, 0));
  } else {
    struct stat st {};
    ::fstat(fd, &st);
    node = r.live().next_node++;
    r.live().nodes[node] = FsImage::Node{false, st.st_mode & 07777u, {}, {}};
    r.live().nodes[dir].entries[name] = node;
    r.Log(Op::Link(dir, name, node, false, st.st_mode & 07777u));
  }
  fi->fh = r.NewHandle(fd, node);
  fi->direct_io = 1;
  return 0;
}

int FaultFs::Ops::Open(const char* path, fuse_file_info* fi) {
  const bool truncating = (fi->flags & O_TRUNC) != 0;
  Request r(truncating);
  if (r.rc != 0) return r.rc;
  if (fi->flags & O_DIRECT) return -EINVAL;
  const NodeId node = r.live().Resolve(Rel(path));
  if (node == 0) return -ENOENT;
  const int fd = ::open(r.Backing(Rel(path)).c_str(), (fi->flags & ~O_CREAT) | O_CLOEXEC);
  if (fd < 0) return -errno;
  if (truncating) r.Log(Op::SetSize(node, 0));
  fi->fh = r.NewHandle(fd, node);
  fi->direct_io = 1;
  return 0;
}

int FaultFs::Ops::Read(const char*, char* buf, size_t size, off_t off, fuse_file_info* fi) {
  const Handle* h = HandleOf(fi);
  Request r(false, h);
  if (r.rc != 0) return r.rc;
  r.lock.unlock();
  const ssize_t n = ::pread(h->fd, buf, size, off);
  return n < 0 ? -errno : static_cast<int>(n);
}

int FaultFs::Ops::Write(const char*, const char* buf, size_t size, off_t off, fuse_file_info* fi) {
  const Handle* h = HandleOf(fi);
  Request r(true, h);
  if (r.rc != 0) return r.rc;
  const ssize_t n = ::pwrite(h->fd, buf, size, off);
  if (n < 0) return -errno;
  r.Log(Op::Write(h->node, static_cast<uint64_t>(off), std::string(buf, static_cast<size_t>(n))));
  return static_cast<int>(n);
}

int FaultFs::Ops::Truncate(const char* path, off_t size, fuse_file_info* fi) {
  const Handle* h = HandleOf(fi);
  Request r(true, h);
  if (r.rc != 0) return r.rc;
  const NodeId node = h != nullptr ? h->node : r.live().Resolve(Rel(path));
  if (node == 0) return -ENOENT;
  const int rc =
      h != nullptr ? ::ftruncate(h->fd, size) : ::truncate(r.Backing(Rel(path)).c_str(), size);
  if (rc != 0) return -errno;
  r.Log(Op::SetSize(node, static_cast<uint64_t>(size)));
  return 0;
}

int FaultFs::Ops::FAllocate(const char*, int mode, off_t off, off_t len, fuse_file_info* fi) {
  const Handle* h = HandleOf(fi);
  Request r(true, h);
  if (r.rc != 0) return r.rc;
  if (mode != 0) return -EOPNOTSUPP;
  if (::fallocate(h->fd, 0, off, len) != 0) return -errno;
  r.Log(Op::Grow(h->node, static_cast<uint64_t>(off + len)));
  return 0;
}

int FaultFs::Ops::FSync(const char*, int, fuse_file_info* fi) {
  const Handle* h = HandleOf(fi);
  Request r(true, h);
  if (r.rc != 0) return r.rc;
  r.Log(Op::SyncFile(h->node));  // the backing need not be synced
  return 0;
}

int FaultFs::Ops::Release(const char*, fuse_file_info* fi) {
  Handle* h = HandleOf(fi);
  if (h == nullptr) return 0;
  if (h->fd >= 0) ::close(h->fd);
  auto* fs = static_cast<FaultFs*>(fuse_get_context()->private_data);
  std::lock_guard lock(fs->mu_);
  fs->handles_.erase(fi->fh);
  return 0;
}

int FaultFs::Ops::OpenDir(const char* path, fuse_file_info* fi) {
  Request r(false);
  if (r.rc != 0) return r.rc;
  const NodeId node = r.live().Resolve(Rel(path));
  if (node == 0) return -ENOENT;
  if (!r.live().nodes[node].dir) return -ENOTDIR;
  const int fd = ::open(r.Backing(Rel(path)).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  fi->fh = r.NewHandle(fd, node);
  return 0;
}

int FaultFs::Ops::ReadDir(const char*, void* buf, fuse_fill_dir_t filler, off_t, fuse_file_info* fi,
                          fuse_readdir_flags) {
  const Handle* h = HandleOf(fi);
  Request r(false, h);
  if (r.rc != 0) return r.rc;
  r.lock.unlock();
  const int fd = ::dup(h->fd);
  DIR* d = fd < 0 ? nullptr : ::fdopendir(fd);
  if (d == nullptr) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    return -err;
  }
  ::rewinddir(d);
  while (const dirent* e = ::readdir(d)) {
    if (filler(buf, e->d_name, nullptr, 0, static_cast<fuse_fill_dir_flags>(0)) != 0) break;
  }
  ::closedir(d);
  return 0;
}

int FaultFs::Ops::FSyncDir(const char*, int, fuse_file_info* fi) {
  const Handle* h = HandleOf(fi);
  Request r(true, h);
  if (r.rc != 0) return r.rc;
  r.Log(Op::SyncDir(h->node));
  return 0;
}

int FaultFs::Ops::MkDir(const char* path, mode_t mode) {
  Request r(true);
  if (r.rc != 0) return r.rc;
  const auto [parent, name] = Split(Rel(path));
  const NodeId dir = r.live().Resolve(parent);
  if (dir == 0 || !r.live().nodes[dir].dir) return -ENOENT;
  const std::string backing = r.Backing(Rel(path));
  if (::mkdir(backing.c_str(), mode) != 0) return -errno;
  struct stat st {};
  ::lstat(backing.c_str(), &st);
  const NodeId node = r.live().next_node++;
  r.live().nodes[node] = FsImage::Node{true, st.st_mode & 07777u, {}, {}};
  r.live().nodes[dir].entries[name] = node;
  r.Log(Op::Link(dir, name, node, true, st.st_mode & 07777u));
  return 0;
}

int FaultFs::Ops::Remove(const char* path, bool is_dir) {
  Request r(true);
  if (r.rc != 0) return r.rc;
  const auto [parent, name] = Split(Rel(path));
  const NodeId dir = r.live().Resolve(parent);
  const NodeId node = r.live().Resolve(Rel(path));
  if (dir == 0 || node == 0) return -ENOENT;
  const std::string backing = r.Backing(Rel(path));
  if ((is_dir ? ::rmdir(backing.c_str()) : ::unlink(backing.c_str())) != 0) return -errno;
  r.live().nodes[dir].entries.erase(name);
  r.Log(Op::Unlink(dir, name, node));
  return 0;
}

int FaultFs::Ops::Rename(const char* from, const char* to, unsigned int flags) {
  Request r(true);
  if (r.rc != 0) return r.rc;
  if (flags & RENAME_EXCHANGE) return -EINVAL;
  const auto [from_parent, from_name] = Split(Rel(from));
  const auto [to_parent, to_name] = Split(Rel(to));
  const NodeId from_dir = r.live().Resolve(from_parent), to_dir = r.live().Resolve(to_parent);
  const NodeId node = r.live().Resolve(Rel(from));
  if (from_dir == 0 || to_dir == 0 || node == 0) return -ENOENT;
  if (::syscall(SYS_renameat2, AT_FDCWD, r.Backing(Rel(from)).c_str(), AT_FDCWD,
                r.Backing(Rel(to)).c_str(), flags) != 0) {
    return -errno;
  }
  r.live().nodes[from_dir].entries.erase(from_name);
  r.live().nodes[to_dir].entries[to_name] = node;
  r.Log(Op::Rename(from_dir, from_name, to_dir, to_name, node));
  return 0;
}

int FaultFs::Ops::Chmod(const char* path, mode_t mode, fuse_file_info* fi) {
  const Handle* h = HandleOf(fi);
  Request r(true, h);
  if (r.rc != 0) return r.rc;
  const NodeId node = h != nullptr ? h->node : r.live().Resolve(Rel(path));
  if (node == 0) return -ENOENT;
  const int rc = h != nullptr ? ::fchmod(h->fd, mode) : ::chmod(r.Backing(Rel(path)).c_str(), mode);
  if (rc != 0) return -errno;
  r.live().nodes[node].mode = mode & 07777u;
  r.Log(Op::Chmod(node, mode & 07777u));
  return 0;
}

int FaultFs::Ops::Chown(const char* path, uid_t uid, gid_t gid, fuse_file_info* fi) {
  const Handle* h = HandleOf(fi);
  Request r(false, h);
  if (r.rc != 0) return r.rc;
  r.lock.unlock();
  const int rc =
      h != nullptr ? ::fchown(h->fd, uid, gid) : ::lchown(r.Backing(Rel(path)).c_str(), uid, gid);
  return rc == 0 ? 0 : -errno;
}

int FaultFs::Ops::Utimens(const char* path, const timespec tv[2], fuse_file_info* fi) {
  const Handle* h = HandleOf(fi);
  Request r(false, h);  // timestamps are not modelled
  if (r.rc != 0) return r.rc;
  r.lock.unlock();
  const int rc = h != nullptr
                     ? ::futimens(h->fd, tv)
                     : ::utimensat(AT_FDCWD, r.Backing(Rel(path)).c_str(), tv, AT_SYMLINK_NOFOLLOW);
  return rc == 0 ? 0 : -errno;
}

int FaultFs::Ops::StatFs(const char*, struct statvfs* st) {
  Request r(false);
  if (r.rc != 0) return r.rc;
  r.lock.unlock();
  return ::statvfs(r.fs->backing_.c_str(), st) == 0 ? 0 : -errno;
}

const fuse_operations& FaultFs::Ops::Table() {
  static const fuse_operations ops = [] {
    fuse_operations o{};
    o.init = Init;
    o.getattr = GetAttr;
    o.create = Create;
    o.open = Open;
    o.read = Read;
    o.write = Write;
    o.truncate = Truncate;
    o.fallocate = FAllocate;
    o.fsync = FSync;
    o.flush = Flush;
    o.release = Release;
    o.opendir = OpenDir;
    o.readdir = ReadDir;
    o.releasedir = Release;
    o.fsyncdir = FSyncDir;
    o.mkdir = MkDir;
    o.unlink = Unlink;
    o.rmdir = RmDir;
    o.rename = Rename;
    o.chmod = Chmod;
    o.chown = Chown;
    o.utimens = Utimens;
    o.statfs = StatFs;
    o.symlink = [](const char*, const char*) { return Refuse(); };
    o.link = [](const char*, const char*) { return Refuse(); };
    o.mknod = [](const char*, mode_t, dev_t) { return Refuse(); };
    o.readlink = [](const char*, char*, size_t) { return -EINVAL; };
    return o;
  }();
  return ops;
}

FaultFs::FaultFs(std::string backing, std::string mountpoint)
    : backing_(std::move(backing)), mountpoint_(std::move(mountpoint)) {}

std::unique_ptr<FaultFs> FaultFs::Mount(const std::string& backing, const std::string& mountpoint,
                                        std::string* error) {
  std::unique_ptr<FaultFs> fs(new FaultFs(backing, mountpoint));
  if (std::string why = LoadImage(backing, &fs->base_); !why.empty()) {
    *error = "tier-faultfs: reading the backing directory: " + why;
    return nullptr;
  }
  fs->live_ = NamesOf(fs->base_);
  fuse_args args = FUSE_ARGS_INIT(0, nullptr);
  fuse_opt_add_arg(&args, "tier-faultfs");
  fuse_opt_add_arg(&args, "-o");
  fuse_opt_add_arg(&args, "fsname=tier-faultfs,subtype=tier-faultfs");
  fs->fuse_ = fuse_new(&args, &Ops::Table(), sizeof(fuse_operations), fs.get());
  fuse_opt_free_args(&args);
  if (fs->fuse_ == nullptr) {
    *error = "tier-faultfs: fuse_new failed";
    return nullptr;
  }
  if (fuse_mount(fs->fuse_, mountpoint.c_str()) != 0) {
    fuse_destroy(fs->fuse_);
    fs->fuse_ = nullptr;
    *error = "tier-faultfs: cannot mount on '" + mountpoint +
             "' (is /dev/fuse there and may this user mount?)";
    return nullptr;
  }
  const int session_fd = fuse_session_fd(fuse_get_session(fs->fuse_));
  ::fcntl(session_fd, F_SETFD, FD_CLOEXEC);  // processes the tests start must not hold it
  struct fuse* f = fs->fuse_;
  fs->loop_ = std::thread([f] {
    fuse_loop_config config{};
    config.clone_fd = 0;
    config.max_idle_threads = 16;
    fuse_loop_mt(f, &config);
  });
  return fs;
}

FaultFs::~FaultFs() {
  {
    std::lock_guard lock(mu_);
    shutting_down_ = true;
    cv_.notify_all();
  }
  if (fuse_ == nullptr) return;
  // Unmounting ends the connection: the loop's reads return ENODEV and it returns. Lazy, so a
  // user still holding something cannot make this block; every request is answered EIO meanwhile.
  if (::umount2(mountpoint_.c_str(), 0) != 0) ::umount2(mountpoint_.c_str(), MNT_DETACH);
  fuse_exit(fuse_);
  if (loop_.joinable()) loop_.join();
  fuse_unmount(fuse_);
  fuse_destroy(fuse_);
  // Handles whose RELEASE never came (the kernel sends it asynchronously; a lazily unmounted
  // filesystem's may come after the loop stopped): closed here.
  for (auto& [fh, handle] : handles_) {
    if (handle->fd >= 0) ::close(handle->fd);
  }
}

void FaultFs::ArmCut(uint64_t nth) {
  std::lock_guard lock(mu_);
  arm_at_ = mutations_ + nth;
}

void FaultFs::CutNow() {
  std::lock_guard lock(mu_);
  if (cut_) return;
  cut_ = true;
  cut_at_ = log_.size();
  cv_.notify_all();
}

bool FaultFs::WaitForCut(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return cut_; });
}

bool FaultFs::is_cut() const {
  std::lock_guard lock(mu_);
  return cut_;
}

void FaultFs::Drain() {
  std::lock_guard lock(mu_);
  if (!cut_) {
    cut_ = true;
    cut_at_ = log_.size();
  }
  drained_ = true;
  cv_.notify_all();
}

FaultFs::PowerLossResult FaultFs::PowerLoss(uint64_t seed, const CutOptions& options) {
  std::lock_guard lock(mu_);
  if (!cut_) {
    cut_ = true;
    cut_at_ = log_.size();
  }
  PowerLossResult result;
  result.cut_ops = cut_at_;
  const std::map<size_t, Fate> fates = RandomFates(log_, cut_at_, seed, options);
  result.pending_ops = PendingOps(log_, cut_at_).size();
  result.description = DescribeFates(log_, cut_at_, fates);
  result.pending = ListPending(log_, cut_at_, fates);
  result.image = CrashState(base_, log_, cut_at_, fates);
  result.error = Materialize(result.image, backing_);
  base_ = result.image;
  live_ = NamesOf(base_);
  log_.clear();
  ++epoch_;
  mutations_ = 0;
  arm_at_ = 0;
  cut_ = false;
  drained_ = false;
  cv_.notify_all();
  return result;
}

void FaultFs::Mark(const std::string& text) {
  std::lock_guard lock(mu_);
  log_.push_back(Op::Mark(text));
}

FsImage FaultFs::Base() const {
  std::lock_guard lock(mu_);
  return base_;
}

std::vector<Op> FaultFs::Log() const {
  std::lock_guard lock(mu_);
  return log_;
}

std::string FaultFs::SyncAll() {
  std::lock_guard lock(mu_);
  if (cut_) return "tier-faultfs: SyncAll on a cut filesystem";
  base_ = CrashState(base_, log_, log_.size(), {});  // nothing pending: every operation kept
  log_.clear();
  return "";
}

uint64_t FaultFs::epoch() const {
  std::lock_guard lock(mu_);
  return epoch_;
}

}  // namespace tier::powerloss
