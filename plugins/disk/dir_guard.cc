#include "dir_guard.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "scope_guard.h"

namespace tier::disk {
namespace {

constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

// Splits "/a/b/c" into {"a","b","c"}; "." and empty parts are dropped.
std::vector<std::string> Components(const std::string& path) {
  std::vector<std::string> parts;
  size_t at = 0;
  while (at <= path.size()) {
    const size_t slash = path.find('/', at);
    const std::string part =
        path.substr(at, slash == std::string::npos ? std::string::npos : slash - at);
    if (!part.empty() && part != ".") parts.push_back(part);
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  return parts;
}

}  // namespace

const char* FilesystemName(long f_type, bool* foreign) {
  struct Known {
    unsigned long magic;
    const char* name;
    bool foreign;
  };
  static const Known kKnown[] = {
      {0xEF53, "ext2/3/4", false},
      {0x58465342, "xfs", false},
      {0x9123683E, "btrfs", false},
      {0x01021994, "tmpfs", false},
      {0x794C7630, "overlayfs", false},
      {0x2FC12FC1, "zfs", false},
      {0xF2F52010, "f2fs", false},
      {0x3153464A, "jfs", false},
      {0x52654973, "reiserfs", false},
      {0xCA451A4E, "bcachefs", false},
      {0x6969, "nfs", true},
      {0x01021997, "9p (WSL2 drvfs or a VM share)", true},
      {0x65735546, "fuse", true},
      {0xFF534D42, "cifs", true},
      {0xFE534D42, "smb2", true},
      {0x517B, "smb", true},
      {0x5346544E, "ntfs", true},
      {0x00C36400, "ceph", true},
      {0x6B414653, "afs", true},
      {0x5346414F, "openafs", true},
      {0x73757245, "coda", true},
      {0x0BD00BD0, "lustre", true},
      {0x47504653, "gpfs", true},
      {0x013111A8, "ibrix", true},
      {0x4D44, "vfat", true},
      {0x2011BAB0, "exfat", true},
      {0xAAD7AAEA, "panfs", true},
      {0x19830326, "fhgfs/beegfs", true},
      {0x564C, "ncp", true},
      {0x7461636F, "ocfs2", true},
  };
  for (const Known& k : kKnown) {
    if (static_cast<unsigned long>(f_type) == k.magic) {
      *foreign = k.foreign;
      return k.name;
    }
  }
  *foreign = false;
  return "unknown local filesystem";
}

namespace {

// A directory just created is durable only once the directory holding it is synced (fsync(2)):
// without that, a power loss can take the new directory away, with every checkpoint published in
// it since. Filesystems that cannot sync a directory (EINVAL) are let be.
Status SyncCreated(FileOps* ops, int parent_fd, const std::string& what) {
  const int rc = ops->FSyncDir(parent_fd);
  if (rc < 0 && rc != -EINVAL) return ErrnoStatus(-rc, "sync the directory holding " + what);
  return Status::Ok();
}

// Opens one component of the path under `parent_fd`, creating it 0700 where missing (and syncing
// `parent_fd` then). The last component is opened O_NOFOLLOW: a symbolic link there is refused.
Result<int> OpenComponent(FileOps* ops, int parent_fd, const std::string& name, bool last,
                          const std::string& quoted) {
  const int flags = last ? kDirFlags : (O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int fd = ops->OpenAt(parent_fd, name.c_str(), flags, 0);
  if (fd == -ENOENT) {
    const int rc = ops->MkdirAt(parent_fd, name.c_str(), 0700);
    if (rc < 0 && rc != -EEXIST) {
      return ErrnoStatus(-rc, "create directory '" + name + "' of " + quoted);
    }
    if (rc == 0) TIER_RETURN_IF_ERROR(SyncCreated(ops, parent_fd, "'" + name + "' of " + quoted));
    fd = ops->OpenAt(parent_fd, name.c_str(), flags, 0);
  }
  if (fd >= 0) return fd;
  struct stat st {};
  if (last && ops->LStatAt(parent_fd, name.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    return Status(TIER_INVALID_ARGUMENT,
                  "disk: directory " + quoted +
                      " is a symbolic link; give the real path (symlinks are refused)");
  }
  return ErrnoStatus(-fd, "open directory " + quoted);
}

// Walks `path` from "/" or ".", creating missing components 0700. Parents may be symlinks (e.g.
// /home -> /var/home) as the user wrote them; the last component may not. Returns its descriptor.
Result<int> OpenOrCreatePath(FileOps* ops, const std::string& path, const std::string& quoted) {
  const std::vector<std::string> parts = Components(path);
  if (parts.empty()) {
    return Status(TIER_INVALID_ARGUMENT, "disk: directory " + quoted + " is not usable");
  }
  int fd = ops->OpenAt(AT_FDCWD, path[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(-fd, "open " + quoted);
  for (size_t i = 0; i < parts.size(); ++i) {
    Result<int> next = OpenComponent(ops, fd, parts[i], i + 1 == parts.size(), quoted);
    ops->Close(fd);
    if (!next.ok()) return next.status();
    fd = next.value();
  }
  return fd;
}

// Anyone else who can write here can plant a checkpoint that verifies (checksums are not
// signatures) and have it served: neither other users nor the group may write, and the directory
// must be ours. Network and foreign filesystems are refused unless allowed. Names the filesystem.
Status CheckDirectory(FileOps* ops, int dir_fd, const std::string& quoted, bool allow_foreign_fs,
                      std::string* fs_name) {
  struct stat st {};
  if (const int rc = ops->FStat(dir_fd, &st); rc < 0) return ErrnoStatus(-rc, "stat " + quoted);
  if (st.st_mode & (S_IWOTH | S_IWGRP)) {
    return Status(TIER_INVALID_ARGUMENT,
                  "disk: directory " + quoted +
                      " is writable by other users or its group; refusing it (chmod go-w, "
                      "or use a private directory: it is created 0700 when missing)");
  }
  if (st.st_uid != geteuid()) {
    return Status(TIER_INVALID_ARGUMENT,
                  "disk: directory " + quoted + " belongs to uid " + std::to_string(st.st_uid) +
                      ", not to this process (uid " + std::to_string(geteuid()) + ")");
  }
  struct statfs sfs {};
  if (const int rc = ops->FStatFs(dir_fd, &sfs); rc < 0)
    return ErrnoStatus(-rc, "statfs " + quoted);
  bool foreign = false;
  *fs_name = FilesystemName(sfs.f_type, &foreign);
  if (foreign && !allow_foreign_fs) {
    char magic[32];
    std::snprintf(magic, sizeof(magic), "0x%lx", static_cast<unsigned long>(sfs.f_type));
    return Status(TIER_UNSUPPORTED,
                  "disk: directory " + quoted + " is on a " + *fs_name + " filesystem (f_type " +
                      magic +
                      "): network and foreign filesystems lose renames, locks or O_DIRECT "
                      "semantics and are slow; use a local Linux filesystem (on WSL2: under "
                      "~, not /mnt/c), or set allow_foreign_fs=1");
  }
  return Status::Ok();
}

// The holder's note from LOCK, read only from a regular file with one link (a planted link is not
// read through), control characters shown as '?'. "unknown" when there is none.
std::string ReadHolderNote(FileOps* ops, int dir_fd) {
  const int fd =
      ops->OpenAt(dir_fd, kLockFileName, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
  if (fd < 0) return "unknown";
  char note[512] = {};
  struct stat st {};
  int64_t n = 0;
  if (ops->FStat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1) {
    n = ops->PRead(fd, note, sizeof(note) - 1, 0);
  }
  ops->Close(fd);
  std::string who = n > 0 ? std::string(note, static_cast<size_t>(n)) : "";
  while (!who.empty() && (who.back() == '\n' || who.back() == '\0')) who.pop_back();
  for (char& c : who) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return who.empty() ? "unknown" : who;
}

// flock(LOCK_EX | LOCK_NB) on the directory: BUSY, naming the holder, when another instance has it.
Status LockDirectory(FileOps* ops, int dir_fd, const std::string& quoted) {
  const int rc = ops->LockExclusive(dir_fd);
  if (rc == 0) return Status::Ok();
  if (rc == -EWOULDBLOCK) {
    return Status(TIER_BUSY, "disk: directory " + quoted + " is in use by another tier instance (" +
                                 ReadHolderNote(ops, dir_fd) +
                                 "); two servers must not share a cold-tier directory");
  }
  return ErrnoStatus(-rc, "lock " + quoted);
}

// Replaces LOCK with a file created for the note, so nothing is ever written through a link: a
// hard link planted as LOCK loses that name and keeps its contents. A symbolic link or a
// directory there is refused (the tier never follows or removes those). Holds the lock.
Status WriteHolderNote(FileOps* ops, int dir_fd, const std::string& quoted,
                       const std::string& holder_note) {
  const std::string lock = quoted.substr(0, quoted.size() - 1) + "/" + kLockFileName + "'";
  struct stat st {};
  if (ops->LStatAt(dir_fd, kLockFileName, &st) == 0) {
    if (S_ISLNK(st.st_mode)) {
      return Status(
          TIER_INVALID_ARGUMENT,
          "disk: " + lock + " is a symbolic link; remove it (the tier never follows one)");
    }
    if (S_ISDIR(st.st_mode)) {
      return Status(TIER_INVALID_ARGUMENT, "disk: " + lock + " is a directory; remove it");
    }
    if (const int rc = ops->UnlinkAt(dir_fd, kLockFileName, 0); rc < 0 && rc != -ENOENT) {
      return ErrnoStatus(-rc, "replace " + lock);
    }
  }
  const int fd = ops->OpenAt(dir_fd, kLockFileName,
                             O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(-fd, "create " + lock);
  // Just created, exclusively, under the lock: one link, ours. Checked anyway before writing.
  const std::string note = holder_note + "\n";
  if (ops->FStat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1) {
    (void)ops->PWrite(fd, note.data(), note.size(), 0);  // a missing note only says "unknown"
  }
  ops->Close(fd);
  return Status::Ok();
}

// quarantine/ exists and is a real directory: corrupt files are renamed into it, and a symbolic
// link there would move them out of the tier.
Status PrepareQuarantine(FileOps* ops, int dir_fd, const std::string& quoted) {
  const int rc = ops->MkdirAt(dir_fd, kQuarantineDirName, 0700);
  if (rc < 0 && rc != -EEXIST) {
    return ErrnoStatus(-rc, "create " + quoted + "/" + kQuarantineDirName);
  }
  if (rc == 0) TIER_RETURN_IF_ERROR(SyncCreated(ops, dir_fd, kQuarantineDirName));
  const int fd = ops->OpenAt(dir_fd, kQuarantineDirName, kDirFlags, 0);
  if (fd < 0) {
    return Status(TIER_INVALID_ARGUMENT, "disk: " + quoted + "/" + kQuarantineDirName +
                                             " is not a directory (" + Status::ErrnoText(-fd) +
                                             "; a symbolic link?); remove it");
  }
  ops->Close(fd);
  return Status::Ok();
}

}  // namespace

Result<DirHandle> OpenTierDir(FileOps* ops, const std::string& path, bool allow_foreign_fs,
                              const std::string& holder_note) {
  const std::string quoted = "'" + path + "'";
  Result<int> dir_fd = OpenOrCreatePath(ops, path, quoted);
  if (!dir_fd.ok()) return dir_fd.status();
  DirHandle handle;
  handle.dir_fd = dir_fd.value();
  ScopeGuard close_on_failure([&] { CloseDir(ops, &handle); });
  TIER_RETURN_IF_ERROR(
      CheckDirectory(ops, handle.dir_fd, quoted, allow_foreign_fs, &handle.fs_name));
  TIER_RETURN_IF_ERROR(LockDirectory(ops, handle.dir_fd, quoted));
  TIER_RETURN_IF_ERROR(WriteHolderNote(ops, handle.dir_fd, quoted, holder_note));
  TIER_RETURN_IF_ERROR(PrepareQuarantine(ops, handle.dir_fd, quoted));
  close_on_failure.Dismiss();
  return handle;
}

void CloseDir(FileOps* ops, DirHandle* handle) {
  if (handle->dir_fd >= 0) ops->Close(handle->dir_fd);  // closing drops the flock
  handle->dir_fd = -1;
}

}  // namespace tier::disk
