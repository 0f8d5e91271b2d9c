// dir_guard.h -- opening the cold-tier directory safely: created 0700 if missing, never through a
// symlink, refused when other-writable or on a network/foreign filesystem, and held with an
// exclusive lock so a second server cannot share it by accident.
//
// The lock is flock(LOCK_EX) on the directory itself (its O_DIRECTORY descriptor), which nothing
// in the directory can take away: deleting LOCK, or putting something else under that name, does
// not let a second server in. LOCK only carries the holder's note (pid, namespace) for the
// refusal message, written into a file created fresh each time: never through a link.
#pragma once

#include <string>

#include "errno_status.h"
#include "file_ops.h"

namespace tier::disk {

struct DirHandle {
  int dir_fd = -1;      // O_DIRECTORY descriptor every file is opened relative to; holds the flock
  std::string fs_name;  // "ext4/xfs/btrfs", "tmpfs", ... for logs
};

inline constexpr const char* kLockFileName = "LOCK";  // the holder's note, not the lock
inline constexpr const char* kQuarantineDirName = "quarantine";

// Opens (creating with mode 0700 where missing) `path`, checks it and locks it. On success the
// caller owns the descriptor (CloseDir). `holder_note` is written into LOCK so a second server can
// name the holder. Any thread.
Result<DirHandle> OpenTierDir(FileOps* ops, const std::string& path, bool allow_foreign_fs,
                              const std::string& holder_note);

// Releases the lock and closes the descriptor. Any thread, once.
void CloseDir(FileOps* ops, DirHandle* handle);

// Name of a filesystem type from statfs.f_type and whether it is refused by default (network or
// foreign: NFS, 9p (WSL2 /mnt/c), FUSE, SMB/CIFS, NTFS, Ceph, ...). Pure.
const char* FilesystemName(long f_type, bool* foreign);

}  // namespace tier::disk
