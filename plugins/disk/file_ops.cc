#include "file_ops.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace tier::disk {
namespace {

template <typename F>
auto RetryEintr(F&& f) {
  for (;;) {
    auto r = f();
    if (r >= 0) return decltype(r)(r);
    if (errno != EINTR) return decltype(r)(-errno);
  }
}

}  // namespace

int PosixFileOps::OpenAt(int dirfd, const char* name, int flags, mode_t mode) {
  return RetryEintr([&] { return ::openat(dirfd, name, flags, mode); });
}

int FileOps::FAllocate(int fd, uint64_t length_bytes) {
  return RetryEintr([&] { return ::fallocate(fd, 0, 0, static_cast<off_t>(length_bytes)); });
}

int FileOps::FChmod(int fd, mode_t mode) {
  return RetryEintr([&] { return ::fchmod(fd, mode); });
}

int FileOps::TouchModificationTime(int fd) {
  const timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
  return RetryEintr([&] { return ::futimens(fd, times); });
}

int FileOps::LStatAt(int dirfd, const char* name, struct stat* out) {
  return RetryEintr([&] { return ::fstatat(dirfd, name, out, AT_SYMLINK_NOFOLLOW); });
}

int PosixFileOps::Close(int fd) {
  return ::close(fd) == 0 ? 0 : -errno;
}

int64_t PosixFileOps::PRead(int fd, void* buf, uint64_t length_bytes, uint64_t offset_bytes) {
  return RetryEintr(
      [&] { return ::pread(fd, buf, length_bytes, static_cast<off_t>(offset_bytes)); });
}

int64_t PosixFileOps::PWrite(int fd, const void* buf, uint64_t length_bytes,
                             uint64_t offset_bytes) {
  return RetryEintr(
      [&] { return ::pwrite(fd, buf, length_bytes, static_cast<off_t>(offset_bytes)); });
}

int PosixFileOps::FDataSync(int fd) {
  return RetryEintr([&] { return ::fdatasync(fd); });
}

int PosixFileOps::FSyncDir(int dirfd) {
  return RetryEintr([&] { return ::fsync(dirfd); });
}

int PosixFileOps::RenameNoReplace(int dirfd, const char* from, const char* to) {
  return RetryEintr([&] {
    return static_cast<int>(::syscall(SYS_renameat2, dirfd, from, dirfd, to, RENAME_NOREPLACE));
  });
}

int PosixFileOps::UnlinkAt(int dirfd, const char* name, int flags) {
  return RetryEintr([&] { return ::unlinkat(dirfd, name, flags); });
}

int PosixFileOps::MkdirAt(int dirfd, const char* name, mode_t mode) {
  return RetryEintr([&] { return ::mkdirat(dirfd, name, mode); });
}

int PosixFileOps::FTruncate(int fd, uint64_t length_bytes) {
  return RetryEintr([&] { return ::ftruncate(fd, static_cast<off_t>(length_bytes)); });
}

int PosixFileOps::FStat(int fd, struct stat* out) {
  return ::fstat(fd, out) == 0 ? 0 : -errno;
}

int PosixFileOps::FStatFs(int fd, struct statfs* out) {
  return RetryEintr([&] { return ::fstatfs(fd, out); });
}

int PosixFileOps::ListDir(int dirfd, std::vector<std::string>* names) {
  const int fd =
      RetryEintr([&] { return ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); });
  if (fd < 0) return fd;
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    const int err = errno;
    ::close(fd);
    return -err;
  }
  names->clear();
  errno = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names->push_back(name);
    errno = 0;
  }
  const int err = errno;
  ::closedir(dir);
  return err == 0 ? 0 : -err;
}

int PosixFileOps::LockExclusive(int fd) {
  return RetryEintr([&] { return ::flock(fd, LOCK_EX | LOCK_NB); });
}

}  // namespace tier::disk
