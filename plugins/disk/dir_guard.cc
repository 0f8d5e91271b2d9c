#include "dir_guard.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <vector>

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

Result<DirHandle> OpenTierDir(FileOps* ops, const std::string& path, bool allow_foreign_fs,
                              const std::string& holder_note) {
  const std::string quoted = "'" + path + "'";
  // Walk the path from "/" or ".", creating missing components 0700. Only the final component is
  // opened with O_NOFOLLOW semantics checked strictly (a symlink there is refused); parents may be
  // symlinks (e.g. /home -> /var/home) as the user wrote them.
  const std::vector<std::string> parts = Components(path);
  if (parts.empty())
    return Status(TIER_INVALID_ARGUMENT, "disk: directory " + quoted + " is not usable");
  int fd = ops->OpenAt(AT_FDCWD, path[0] == '/' ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(-fd, "open " + quoted);
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    const char* name = parts[i].c_str();
    int next = ops->OpenAt(fd, name, last ? kDirFlags : (O_RDONLY | O_DIRECTORY | O_CLOEXEC), 0);
    if (next == -ENOENT) {
      const int rc = ops->MkdirAt(fd, name, 0700);
      if (rc < 0 && rc != -EEXIST) {
        ops->Close(fd);
        return ErrnoStatus(-rc, "create directory '" + parts[i] + "' of " + quoted);
      }
      next = ops->OpenAt(fd, name, last ? kDirFlags : (O_RDONLY | O_DIRECTORY | O_CLOEXEC), 0);
    }
    if (next < 0) {
      struct stat st {};
      const bool is_link = fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
      ops->Close(fd);
      if (last && is_link) {
        return Status(TIER_INVALID_ARGUMENT,
                      "disk: directory " + quoted +
                          " is a symbolic link; give the real path (symlinks are refused)");
      }
      return ErrnoStatus(-next, "open directory " + quoted);
    }
    ops->Close(fd);
    fd = next;
  }
  DirHandle handle;
  handle.dir_fd = fd;
  auto fail = [&](Status status) -> Result<DirHandle> {
    ops->Close(handle.dir_fd);
    if (handle.lock_fd >= 0) ops->Close(handle.lock_fd);
    return status;
  };

  struct stat st {};
  if (const int rc = ops->FStat(fd, &st); rc < 0)
    return fail(ErrnoStatus(-rc, "stat " + quoted));
  // Anyone else who can write here can plant a checkpoint that verifies (checksums are not
  // signatures) and have it served: neither other users nor the group may write.
  if (st.st_mode & (S_IWOTH | S_IWGRP)) {
    return fail(Status(TIER_INVALID_ARGUMENT,
                       "disk: directory " + quoted +
                           " is writable by other users or its group; refusing it (chmod go-w, "
                           "or use a private directory: it is created 0700 when missing)"));
  }
  if (st.st_uid != geteuid()) {
    return fail(Status(TIER_INVALID_ARGUMENT, "disk: directory " + quoted + " belongs to uid " +
                                                  std::to_string(st.st_uid) +
                                                  ", not to this process (uid " +
                                                  std::to_string(geteuid()) + ")"));
  }
  struct statfs sfs {};
  if (const int rc = ops->FStatFs(fd, &sfs); rc < 0) {
    return fail(ErrnoStatus(-rc, "statfs " + quoted));
  }
  bool foreign = false;
  handle.fs_name = FilesystemName(sfs.f_type, &foreign);
  if (foreign && !allow_foreign_fs) {
    char magic[32];
    std::snprintf(magic, sizeof(magic), "0x%lx", static_cast<unsigned long>(sfs.f_type));
    return fail(Status(TIER_UNSUPPORTED,
                       "disk: directory " + quoted + " is on a " + handle.fs_name +
                           " filesystem (f_type " + magic +
                           "): network and foreign filesystems lose renames, locks or O_DIRECT "
                           "semantics and are slow; use a local Linux filesystem (on WSL2: under "
                           "~, not /mnt/c), or set allow_foreign_fs=1"));
  }

  const int lock_fd =
      ops->OpenAt(fd, kLockFileName, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (lock_fd < 0) return fail(ErrnoStatus(-lock_fd, "open lock file in " + quoted));
  handle.lock_fd = lock_fd;
  if (const int rc = ops->LockExclusive(lock_fd); rc < 0) {
    if (rc == -EWOULDBLOCK) {
      char holder[512] = {};
      const int64_t n = ops->PRead(lock_fd, holder, sizeof(holder) - 1, 0);
      std::string who = n > 0 ? std::string(holder, static_cast<size_t>(n)) : "unknown";
      while (!who.empty() && (who.back() == '\n' || who.back() == '\0')) who.pop_back();
      return fail(Status(TIER_BUSY, "disk: directory " + quoted +
                                        " is in use by another tier instance (" + who +
                                        "); two servers must not share a cold-tier directory"));
    }
    return fail(ErrnoStatus(-rc, "lock " + quoted + "/LOCK"));
  }
  // We hold the lock: record who we are for the next one to name.
  const std::string note = holder_note + "\n";
  if (ops->FTruncate(lock_fd, 0) == 0) ops->PWrite(lock_fd, note.data(), note.size(), 0);

  const int qrc = ops->MkdirAt(fd, kQuarantineDirName, 0700);
  if (qrc < 0 && qrc != -EEXIST) {
    return fail(ErrnoStatus(-qrc, "create " + quoted + "/" + kQuarantineDirName));
  }
  // Corrupt files are renamed into it: a symlink there would move them out of the tier.
  const int qfd = ops->OpenAt(fd, kQuarantineDirName, kDirFlags, 0);
  if (qfd < 0) {
    return fail(Status(TIER_INVALID_ARGUMENT, "disk: " + quoted + "/" + kQuarantineDirName +
                                                  " is not a directory (" + Status::ErrnoText(-qfd) +
                                                  "; a symbolic link?); remove it"));
  }
  ops->Close(qfd);
  return handle;
}

void CloseDir(FileOps* ops, DirHandle* handle) {
  if (handle->lock_fd >= 0) ops->Close(handle->lock_fd);  // closing drops the flock
  if (handle->dir_fd >= 0) ops->Close(handle->dir_fd);
  handle->lock_fd = handle->dir_fd = -1;
}

}  // namespace tier::disk
