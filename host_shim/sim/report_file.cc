// report_file.cc -- where the JSON report goes: checked before the replay, every write checked.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "report.h"

namespace tier::sim {
namespace {

std::string Where(const std::string& path) {
  return "--report-json '" + path + "'";
}

std::string Parent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

Status Refuse(const std::string& path, const std::string& why) {
  return Status(TIER_INVALID_ARGUMENT, Where(path) + ": " + why);
}

Status CheckNewFile(const std::string& path) {
  const std::string parent = Parent(path);
  struct stat st {};
  if (::stat(parent.c_str(), &st) != 0) {
    return Refuse(path, errno == ENOENT
                            ? "the directory '" + parent + "' does not exist"
                            : "cannot reach '" + parent + "': " + Status::ErrnoText(errno));
  }
  if (!S_ISDIR(st.st_mode)) return Refuse(path, "'" + parent + "' is not a directory");
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    return Refuse(path, "cannot create a file in '" + parent + "': " + Status::ErrnoText(errno));
  }
  return Status::Ok();
}

// Everything written, EINTR and short writes retried; the errno of a failure, else 0.
int WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

Status CheckReportPath(const std::string& path) {
  if (path.empty()) return Status::Ok();
  if (path.back() == '/') return Refuse(path, "names a directory, not a file");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return CheckNewFile(path);
    return Refuse(path, "cannot reach it: " + Status::ErrnoText(errno));
  }
  if (S_ISDIR(st.st_mode)) return Refuse(path, "is a directory");
  if (::access(path.c_str(), W_OK) != 0) {
    return Refuse(path, "cannot write it: " + Status::ErrnoText(errno));
  }
  return Status::Ok();
}

Status WriteReportText(const std::string& path, const std::string& text) {
  Status checked = CheckReportPath(path);
  if (!checked.ok()) return checked;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Refuse(path, "cannot open: " + Status::ErrnoText(errno));
  struct stat st {};
  const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  int err = WriteAll(fd, text);
  std::string step = "write";
  // A regular file's delayed errors (a full disk, a quota) show at fsync or close.
  if (err == 0 && regular && ::fsync(fd) != 0) {
    err = errno;
    step = "fsync";
  }
  if (::close(fd) != 0 && err == 0 && errno != EINTR) {
    err = errno;
    step = "close";
  }
  if (err == 0) return Status::Ok();
  std::string why = step + " failed: " + Status::ErrnoText(err);
  if (regular && ::unlink(path.c_str()) == 0) why += " (the partial file was removed)";
  return Status(err == ENOSPC || err == EDQUOT ? TIER_NO_SPACE : TIER_IO_ERROR,
                Where(path) + ": " + why);
}

}  // namespace tier::sim
