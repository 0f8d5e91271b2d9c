// dir_guard.h -- opening the cold-tier directory safely: created 0700 if missing, never through a
// symlink, refused when other-writable or on a network/foreign filesystem, and held with an
// exclusive lock so a second server cannot share it by accident.
#pragma once

#include <string>

#include "file_ops.h"
#include "errno_status.h"

namespace tier::disk {

struct DirHandle {
  int dir_fd = -1;      // O_DIRECTORY descriptor every file is opened relative to
  int lock_fd = -1;     // holds flock(LOCK_EX) on <dir>/LOCK
  std::string fs_name;  // "ext4/xfs/btrfs", "tmpfs", ... for logs
};

inline constexpr const char* kLockFileName = "LOCK";
inline constexpr const char* kQuarantineDirName = "quarantine";

// Opens (creating with mode 0700 where missing) `path`, checks it and locks it. On success the
// caller owns both descriptors (CloseDir). `holder_note` is written into the lock file so a second
// server can name the holder. Any thread.
Result<DirHandle> OpenTierDir(FileOps* ops, const std::string& path, bool allow_foreign_fs,
                              const std::string& holder_note);

// Releases the lock and closes both descriptors. Any thread, once.
void CloseDir(FileOps* ops, DirHandle* handle);

// Name of a filesystem type from statfs.f_type and whether it is refused by default (network or
// foreign: NFS, 9p (WSL2 /mnt/c), FUSE, SMB/CIFS, NTFS, Ceph, ...). Pure.
const char* FilesystemName(long f_type, bool* foreign);

}  // namespace tier::disk
