#include "run_dirs.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace tier {
namespace {

std::string Quoted(const std::filesystem::path& dir) {
  return "'" + dir.string() + "'";
}

// The directory's descriptor with the disk provider's lock taken (flock, not blocking), or -1 and
// the status why not.
int LockDirectory(const std::filesystem::path& dir, Status* why) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    *why = Status::InvalidArgument("compare-policies: " + Quoted(dir) +
                                   " cannot be opened as a directory: " + Status::ErrnoText(errno));
    return -1;
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    *why = err == EWOULDBLOCK ? Status::Busy("compare-policies: " + Quoted(dir) +
                                             " is in use (a server holds its lock); left alone")
                              : Status::FromErrno(err, "compare-policies: lock " + Quoted(dir));
    return -1;
  }
  return fd;
}

// Whether `dir_fd` holds our marker: a regular file, reached without following a link.
bool HasMarker(int dir_fd) {
  struct stat st {};
  return ::fstatat(dir_fd, kRunDirMarker, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

Status WriteMarker(const std::filesystem::path& dir) {
  const std::filesystem::path marker = dir / kRunDirMarker;
  const int fd = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno(errno, "compare-policies: create " + Quoted(marker));
  const std::string note = "created by tier-host compare-policies (pid " +
                           std::to_string(::getpid()) + "); removed with its directory\n";
  const bool ok = ::write(fd, note.data(), note.size()) == static_cast<ssize_t>(note.size());
  ::close(fd);
  return ok ? Status::Ok() : Status::IoError("compare-policies: write " + Quoted(marker));
}

// Removes `dir` (ours, locked by `fd`) and closes `fd`.
Status RemoveLocked(const std::filesystem::path& dir, int fd) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  ::close(fd);  // after the removal: the lock held throughout
  if (ec) return Status::IoError("compare-policies: remove " + Quoted(dir) + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

Status MakeRunDirectory(const std::filesystem::path& dir) {
  const std::filesystem::path parent = dir.parent_path();
  if (::mkdir(parent.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::FromErrno(errno, "compare-policies: create " + Quoted(parent));
  }
  if (::mkdir(dir.c_str(), 0700) == 0) return WriteMarker(dir);
  if (errno != EEXIST) return Status::FromErrno(errno, "compare-policies: create " + Quoted(dir));
  Status why;
  const int fd = LockDirectory(dir, &why);
  if (fd < 0) return why;
  if (!HasMarker(fd)) {
    ::close(fd);
    return Status::InvalidArgument(
        "compare-policies: " + Quoted(dir) +
        " exists and was not created by compare-policies; it is left alone (choose another "
        "--cold-kv-dir, or remove it yourself)");
  }
  // Left by an interrupted compare-policies: empty it, then start afresh.
  TIER_RETURN_IF_ERROR(RemoveLocked(dir, fd));
  if (::mkdir(dir.c_str(), 0700) != 0) {
    return Status::FromErrno(errno, "compare-policies: create " + Quoted(dir));
  }
  return WriteMarker(dir);
}

Status RemoveRunDirectory(const std::filesystem::path& dir) {
  Status why;
  const int fd = LockDirectory(dir, &why);
  if (fd < 0) return why;
  if (!HasMarker(fd)) {
    ::close(fd);
    return Status::InvalidArgument("compare-policies: " + Quoted(dir) +
                                   " has no marker of compare-policies; left alone");
  }
  return RemoveLocked(dir, fd);
}

}  // namespace tier
