#include "fs_model.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

namespace tier::powerloss {
namespace {

std::string Errno(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

void WriteTorn(FsImage::Node* n, const Op& op, const Fate& fate) {
  const uint64_t s = fate.sector_bytes, end = op.offset + op.data.size();
  const uint64_t first = op.offset / s;
  for (size_t i = 0; i < fate.sectors.size(); ++i) {
    if (!fate.sectors[i]) continue;
    const uint64_t from = std::max(op.offset, (first + i) * s);
    const uint64_t to = std::min(end, (first + i + 1) * s);
    if (from >= to) continue;
    if (n->data.size() < to) n->data.resize(to, '\0');
    std::memcpy(n->data.data() + from, op.data.data() + (from - op.offset), to - from);
  }
}

void Apply(FsImage* img, const Op& op, const Fate* fate) {
  switch (op.kind) {
    case OpKind::kWrite: {
      FsImage::Node& n = img->nodes[op.node];
      if (fate != nullptr && fate->kind == Fate::kTorn) return WriteTorn(&n, op, *fate);
      const uint64_t end = op.offset + op.data.size();
      if (n.data.size() < end) n.data.resize(end, '\0');
      std::memcpy(n.data.data() + op.offset, op.data.data(), op.data.size());
      return;
    }
    case OpKind::kSetSize:
      img->nodes[op.node].data.resize(op.size, '\0');
      return;
    case OpKind::kGrow:
      if (img->nodes[op.node].data.size() < op.size) img->nodes[op.node].data.resize(op.size, '\0');
      return;
    case OpKind::kChmod:
      img->nodes[op.node].mode = op.mode;
      return;
    case OpKind::kLink:
      img->nodes[op.dir].entries[op.name] = op.node;
      return;
    case OpKind::kUnlink: {
      auto& entries = img->nodes[op.dir].entries;
      const auto it = entries.find(op.name);
      if (it != entries.end() && it->second == op.node) entries.erase(it);
      return;
    }
    case OpKind::kRename: {
      auto& from = img->nodes[op.dir].entries;
      const auto it = from.find(op.name);
      if (it != from.end() && it->second == op.node) from.erase(it);
      img->nodes[op.dir2].entries[op.name2] = op.node;
      return;
    }
    case OpKind::kSyncFile:
    case OpKind::kSyncDir:
    case OpKind::kMark:
      return;
  }
}

void CollectFiles(const FsImage& img, NodeId dir, const std::string& prefix,
                  std::map<std::string, std::string>* out, int depth) {
  if (depth > 64) return;
  const auto it = img.nodes.find(dir);
  if (it == img.nodes.end()) return;
  for (const auto& [name, node] : it->second.entries) {
    const auto child = img.nodes.find(node);
    if (child == img.nodes.end()) continue;
    const std::string path = prefix.empty() ? name : prefix + "/" + name;
    if (child->second.dir) {
      CollectFiles(img, node, path, out, depth + 1);
    } else {
      (*out)[path] = child->second.data;
    }
  }
}

std::string LoadInto(const std::string& path, FsImage* img, NodeId dir, int depth) {
  if (depth > 64) return "too deep: '" + path + "'";
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return Errno("opendir", path);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      names.push_back(e->d_name);
    }
  }
  ::closedir(d);
  for (const std::string& name : names) {
    const std::string child = path + "/" + name;
    struct stat st {};
    if (::lstat(child.c_str(), &st) != 0) return Errno("lstat", child);
    const NodeId id = img->next_node++;
    FsImage::Node n;
    n.dir = S_ISDIR(st.st_mode);
    n.mode = st.st_mode & 07777;
    if (!n.dir && !S_ISREG(st.st_mode)) return "not a file or directory: '" + child + "'";
    if (!n.dir) {
      const int fd = ::open(child.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0) return Errno("open", child);
      n.data.resize(static_cast<size_t>(st.st_size));
      const ssize_t got = ::pread(fd, n.data.data(), n.data.size(), 0);
      ::close(fd);
      if (got != st.st_size) return Errno("read", child);
    }
    img->nodes[id] = std::move(n);
    img->nodes[dir].entries[name] = id;
    if (S_ISDIR(st.st_mode)) {
      if (std::string why = LoadInto(child, img, id, depth + 1); !why.empty()) return why;
    }
  }
  return "";
}

std::string WriteTree(const FsImage& img, NodeId dir, const std::string& path, int depth) {
  if (depth > 64) return "too deep: '" + path + "'";
  for (const auto& [name, id] : img.nodes.at(dir).entries) {
    const FsImage::Node& n = img.nodes.at(id);
    const std::string child = path + "/" + name;
    if (n.dir) {
      if (::mkdir(child.c_str(), 0700) != 0 || ::chmod(child.c_str(), n.mode) != 0) {
        return Errno("mkdir", child);
      }
      if (std::string why = WriteTree(img, id, child, depth + 1); !why.empty()) return why;
      continue;
    }
    const int fd = ::open(child.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return Errno("create", child);
    const bool ok =
        ::pwrite(fd, n.data.data(), n.data.size(), 0) == static_cast<ssize_t>(n.data.size()) &&
        ::fchmod(fd, n.mode) == 0;
    ::close(fd);
    if (!ok) return Errno("write", child);
  }
  return "";
}

}  // namespace

NodeId FsImage::Resolve(const std::string& path) const {
  NodeId at = kRootNode;
  size_t from = 0;
  while (from < path.size()) {
    const size_t slash = path.find('/', from);
    const std::string part =
        path.substr(from, slash == std::string::npos ? std::string::npos : slash - from);
    from = slash == std::string::npos ? path.size() : slash + 1;
    if (part.empty()) continue;
    const auto node = nodes.find(at);
    if (node == nodes.end() || !node->second.dir) return 0;
    const auto e = node->second.entries.find(part);
    if (e == node->second.entries.end()) return 0;
    at = e->second;
  }
  return at;
}

std::map<std::string, std::string> FsImage::Files() const {
  std::map<std::string, std::string> out;
  CollectFiles(*this, kRootNode, "", &out, 0);
  return out;
}

Op Op::Write(NodeId node, uint64_t offset, std::string data) {
  Op op;
  op.kind = OpKind::kWrite;
  op.node = node;
  op.offset = offset;
  op.data = std::move(data);
  return op;
}

Op Op::SetSize(NodeId node, uint64_t size) {
  Op op;
  op.kind = OpKind::kSetSize;
  op.node = node;
  op.size = size;
  return op;
}

Op Op::Grow(NodeId node, uint64_t size) {
  Op op = SetSize(node, size);
  op.kind = OpKind::kGrow;
  return op;
}

Op Op::Chmod(NodeId node, uint32_t mode) {
  Op op;
  op.kind = OpKind::kChmod;
  op.node = node;
  op.mode = mode;
  return op;
}

Op Op::SyncFile(NodeId node) {
  Op op;
  op.kind = OpKind::kSyncFile;
  op.node = node;
  return op;
}

Op Op::Link(NodeId dir, std::string name, NodeId node, bool is_dir, uint32_t mode) {
  Op op;
  op.kind = OpKind::kLink;
  op.dir = dir;
  op.name = std::move(name);
  op.node = node;
  op.is_dir = is_dir;
  op.mode = mode;
  return op;
}

Op Op::Unlink(NodeId dir, std::string name, NodeId node) {
  Op op;
  op.kind = OpKind::kUnlink;
  op.dir = dir;
  op.name = std::move(name);
  op.node = node;
  return op;
}

Op Op::Rename(NodeId dir, std::string name, NodeId dir2, std::string name2, NodeId node) {
  Op op;
  op.kind = OpKind::kRename;
  op.dir = dir;
  op.name = std::move(name);
  op.dir2 = dir2;
  op.name2 = std::move(name2);
  op.node = node;
  return op;
}

Op Op::SyncDir(NodeId dir) {
  Op op;
  op.kind = OpKind::kSyncDir;
  op.dir = dir;
  return op;
}

Op Op::Mark(std::string text) {
  Op op;
  op.kind = OpKind::kMark;
  op.text = std::move(text);
  return op;
}

std::string Op::Describe() const {
  const auto n = [](NodeId id) { return "#" + std::to_string(id); };
  switch (kind) {
    case OpKind::kWrite:
      return "write " + n(node) + " [" + std::to_string(offset) + ", +" +
             std::to_string(data.size()) + ")";
    case OpKind::kSetSize:
      return "truncate " + n(node) + " to " + std::to_string(size);
    case OpKind::kGrow:
      return "fallocate " + n(node) + " to " + std::to_string(size);
    case OpKind::kChmod:
      return "chmod " + n(node);
    case OpKind::kSyncFile:
      return "fsync " + n(node);
    case OpKind::kLink:
      return std::string(is_dir ? "mkdir " : "create ") + n(dir) + "/" + name + " = " + n(node);
    case OpKind::kUnlink:
      return "unlink " + n(dir) + "/" + name + " (" + n(node) + ")";
    case OpKind::kRename:
      return "rename " + n(dir) + "/" + name + " -> " + n(dir2) + "/" + name2;
    case OpKind::kSyncDir:
      return "fsync dir " + n(dir);
    case OpKind::kMark:
      return "mark '" + text + "'";
  }
  return "?";
}

std::vector<size_t> PendingOps(const std::vector<Op>& log, size_t cut) {
  std::map<NodeId, std::vector<size_t>> data_pending, dir_pending;
  std::set<size_t> pending;
  for (size_t i = 0; i < cut && i < log.size(); ++i) {
    const Op& op = log[i];
    if (op.IsDataOp()) {
      data_pending[op.node].push_back(i);
      pending.insert(i);
    } else if (op.kind == OpKind::kSyncFile) {
      for (size_t j : data_pending[op.node]) pending.erase(j);
      data_pending.erase(op.node);
    } else if (op.IsDirOp()) {
      dir_pending[op.dir].push_back(i);
      if (op.kind == OpKind::kRename && op.dir2 != op.dir) dir_pending[op.dir2].push_back(i);
      pending.insert(i);
    } else if (op.kind == OpKind::kSyncDir) {
      for (size_t j : dir_pending[op.dir]) pending.erase(j);  // a rename: either directory
      dir_pending.erase(op.dir);
    }
  }
  return {pending.begin(), pending.end()};
}

FsImage CrashState(const FsImage& base, const std::vector<Op>& log, size_t cut,
                   const std::map<size_t, Fate>& fates) {
  FsImage img = base;
  cut = std::min(cut, log.size());
  // Every inode created exists (its name may be lost): later operations may reach it by a rename.
  for (size_t i = 0; i < cut; ++i) {
    const Op& op = log[i];
    if (op.kind == OpKind::kLink && img.nodes.count(op.node) == 0) {
      img.nodes[op.node] = FsImage::Node{op.is_dir, op.mode, {}, {}};
    }
    img.next_node = std::max(img.next_node, op.node + 1);
  }
  const std::vector<size_t> pending = PendingOps(log, cut);
  const std::set<size_t> pending_set(pending.begin(), pending.end());
  for (size_t i = 0; i < cut; ++i) {
    const Fate* fate = nullptr;
    if (pending_set.count(i) != 0) {
      const auto f = fates.find(i);
      if (f != fates.end()) fate = &f->second;
      if (fate != nullptr && fate->kind == Fate::kDropped) continue;
    }
    Apply(&img, log[i], fate);
  }
  return img;
}

std::map<size_t, Fate> RandomFates(const std::vector<Op>& log, size_t cut, uint64_t seed,
                                   const CutOptions& options) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  const std::vector<size_t> pending = PendingOps(log, cut);
  std::vector<size_t> writes;
  for (size_t i : pending) {
    if (log[i].kind == OpKind::kWrite) writes.push_back(i);
  }
  const size_t tearable_from =
      writes.size() > options.torn_tail ? writes.size() - options.torn_tail : 0;
  const std::set<size_t> tearable(writes.begin() + static_cast<std::ptrdiff_t>(tearable_from),
                                  writes.end());
  std::map<size_t, Fate> fates;
  for (size_t i : pending) {
    Fate f;
    const Op& op = log[i];
    if (tearable.count(i) != 0 && !op.data.empty() && coin(rng) < options.tear_probability) {
      f.kind = Fate::kTorn;
      f.sector_bytes = rng() % 2 == 0 ? 512 : 4096;
      const uint64_t first = op.offset / f.sector_bytes;
      const uint64_t last = (op.offset + op.data.size() - 1) / f.sector_bytes;
      for (uint64_t s = first; s <= last; ++s) f.sectors.push_back(rng() % 2 == 0);
    } else {
      f.kind = coin(rng) < options.keep_probability ? Fate::kKept : Fate::kDropped;
    }
    fates[i] = std::move(f);
  }
  return fates;
}

std::string DescribeFates(const std::vector<Op>& log, size_t cut,
                          const std::map<size_t, Fate>& fates) {
  const std::vector<size_t> pending = PendingOps(log, cut);
  uint64_t kept = 0, dropped = 0, torn512 = 0, torn4k = 0;
  for (size_t i : pending) {
    const auto f = fates.find(i);
    if (f == fates.end() || f->second.kind == Fate::kKept) {
      ++kept;
    } else if (f->second.kind == Fate::kDropped) {
      ++dropped;
    } else {
      ++(f->second.sector_bytes == 512 ? torn512 : torn4k);
    }
  }
  std::string s = std::to_string(pending.size()) + " of " + std::to_string(cut) +
                  " operations pending: " + std::to_string(kept) + " kept, " +
                  std::to_string(dropped) + " lost";
  if (torn512 != 0) s += ", " + std::to_string(torn512) + " torn at 512 B";
  if (torn4k != 0) s += ", " + std::to_string(torn4k) + " torn at 4 KiB";
  return s;
}

std::string ListPending(const std::vector<Op>& log, size_t cut, const std::map<size_t, Fate>& fates,
                        size_t limit) {
  std::string out;
  size_t n = 0;
  for (size_t i : PendingOps(log, cut)) {
    if (n++ == limit) {
      out += "  ...\n";
      break;
    }
    const auto f = fates.find(i);
    const char* what = f == fates.end() || f->second.kind == Fate::kKept ? "kept"
                       : f->second.kind == Fate::kDropped                ? "lost"
                                                                         : "torn";
    out += "  [" + std::to_string(i) + "] " + what + ": " + log[i].Describe() + "\n";
  }
  return out;
}

std::string LoadImage(const std::string& dir, FsImage* out) {
  *out = FsImage();
  return LoadInto(dir, out, kRootNode, 0);
}

std::string EmptyDirectory(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return Errno("opendir", dir);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      names.push_back(e->d_name);
    }
  }
  ::closedir(d);
  for (const std::string& name : names) {
    const std::string child = dir + "/" + name;
    struct stat st {};
    if (::lstat(child.c_str(), &st) != 0) return Errno("lstat", child);
    if (S_ISDIR(st.st_mode)) {
      if (std::string why = EmptyDirectory(child); !why.empty()) return why;
      if (::rmdir(child.c_str()) != 0) return Errno("rmdir", child);
    } else if (::unlink(child.c_str()) != 0) {
      return Errno("unlink", child);
    }
  }
  return "";
}

std::string Materialize(const FsImage& image, const std::string& dir) {
  if (std::string why = EmptyDirectory(dir); !why.empty()) return why;
  return WriteTree(image, kRootNode, dir, 0);
}

}  // namespace tier::powerloss
