// file_ops.h -- the seam for every synchronous file-system call the provider makes. Tests replace
// it (FaultInjection) to inject EIO, ENOSPC, short writes, failing fdatasync or rename. Every
// method returns >= 0 on success or -errno; none throws. Thread-safe: any thread.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>
#include <sys/vfs.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tier::disk {

class FileOps {
 public:
  virtual ~FileOps() = default;
  // openat(2); `name` is relative to `dirfd` (O_NOFOLLOW is the caller's job). Returns an fd.
  virtual int OpenAt(int dirfd, const char* name, int flags, mode_t mode) = 0;
  virtual int Close(int fd) = 0;
  // pread/pwrite(2): one call, may transfer fewer bytes than asked.
  virtual int64_t PRead(int fd, void* buf, uint64_t length_bytes, uint64_t offset_bytes) = 0;
  virtual int64_t PWrite(int fd, const void* buf, uint64_t length_bytes, uint64_t offset_bytes) = 0;
  virtual int FDataSync(int fd) = 0;
  // fsync(2) of a directory descriptor (makes renames and unlinks in it durable).
  virtual int FSyncDir(int dirfd) = 0;
  // renameat2(RENAME_NOREPLACE) within one directory.
  virtual int RenameNoReplace(int dirfd, const char* from, const char* to) = 0;
  virtual int UnlinkAt(int dirfd, const char* name, int flags) = 0;
  virtual int MkdirAt(int dirfd, const char* name, mode_t mode) = 0;
  virtual int FTruncate(int fd, uint64_t length_bytes) = 0;
  virtual int FStat(int fd, struct stat* out) = 0;
  virtual int FStatFs(int fd, struct statfs* out) = 0;
  // Names in the directory (without "." and ".."), via a duplicate of `dirfd`.
  virtual int ListDir(int dirfd, std::vector<std::string>* names) = 0;
  // flock(2) with LOCK_EX | LOCK_NB.
  virtual int LockExclusive(int fd) = 0;
  // The calls below are not pure: test doubles inherit the real ones.
  // fallocate(2), mode 0, over [0, length_bytes): reserves the blocks and sets the file size, so
  // that direct writes into the file do not extend it (ext4 serializes size-extending O_DIRECT
  // writes). -EOPNOTSUPP where the filesystem cannot.
  virtual int FAllocate(int fd, uint64_t length_bytes);
  // fchmod(2): a spill's temporary file is set to exactly 0600 whatever the umask.
  virtual int FChmod(int fd, mode_t mode);
  // futimens(2) with the modification time set to now (the access time left alone): records the
  // last completed restore of a checkpoint where it survives a restart.
  virtual int TouchModificationTime(int fd);
  // fstatat(2) with AT_SYMLINK_NOFOLLOW: what stands under `name` (a link is not followed).
  virtual int LStatAt(int dirfd, const char* name, struct stat* out);
};

// The real thing: thin wrappers over the system calls, EINTR retried. Not final: a test that
// changes one call derives from it and overrides that call only.
class PosixFileOps : public FileOps {
 public:
  int OpenAt(int dirfd, const char* name, int flags, mode_t mode) override;
  int Close(int fd) override;
  int64_t PRead(int fd, void* buf, uint64_t length_bytes, uint64_t offset_bytes) override;
  int64_t PWrite(int fd, const void* buf, uint64_t length_bytes, uint64_t offset_bytes) override;
  int FDataSync(int fd) override;
  int FSyncDir(int dirfd) override;
  int RenameNoReplace(int dirfd, const char* from, const char* to) override;
  int UnlinkAt(int dirfd, const char* name, int flags) override;
  int MkdirAt(int dirfd, const char* name, mode_t mode) override;
  int FTruncate(int fd, uint64_t length_bytes) override;
  int FStat(int fd, struct stat* out) override;
  int FStatFs(int fd, struct statfs* out) override;
  int ListDir(int dirfd, std::vector<std::string>* names) override;
  int LockExclusive(int fd) override;
};

}  // namespace tier::disk
