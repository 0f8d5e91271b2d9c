#include "line_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace tier::sim {
namespace {

constexpr size_t kReadBytes = 64 << 10;

}  // namespace

Result<LineReader> LineReader::Open(const std::string& path, const std::string& what,
                                    size_t max_line_bytes) {
  const std::string where = what + " '" + path + "'";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status(TIER_INVALID_ARGUMENT, where + ": cannot open: " + Status::ErrnoText(errno));
  }
  LineReader reader(fd, where, max_line_bytes);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return Status(TIER_INVALID_ARGUMENT, where + ": " + Status::ErrnoText(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    return Status(TIER_INVALID_ARGUMENT, where + ": is a directory, not a " + what + " file");
  }
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
    return Status(TIER_INVALID_ARGUMENT, where + ": is a device, not a " + what + " file");
  }
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    return Status(TIER_INVALID_ARGUMENT, where + ": is neither a regular file nor a pipe");
  }
  return reader;
}

LineReader::LineReader(LineReader&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      what_(std::move(other.what_)),
      max_line_bytes_(other.max_line_bytes_),
      buffer_(std::move(other.buffer_)),
      start_(other.start_),
      eof_(other.eof_),
      line_number_(other.line_number_) {}

LineReader::~LineReader() {
  if (fd_ >= 0) ::close(fd_);
}

Status LineReader::Fill() {
  buffer_.erase(0, start_);
  start_ = 0;
  const size_t have = buffer_.size();
  buffer_.resize(have + kReadBytes);
  ssize_t n;
  do {
    n = ::read(fd_, buffer_.data() + have, kReadBytes);
  } while (n < 0 && errno == EINTR);
  buffer_.resize(have + (n > 0 ? static_cast<size_t>(n) : 0));
  if (n < 0) return Status::FromErrno(errno, what_ + ": read");
  if (n == 0) eof_ = true;
  return Status::Ok();
}

Result<bool> LineReader::Next(std::string* line) {
  size_t scanned = start_;
  for (;;) {
    const size_t newline = buffer_.find('\n', scanned);
    const size_t end = newline == std::string::npos ? buffer_.size() : newline;
    if (end - start_ > max_line_bytes_) {
      return Status(TIER_INVALID_ARGUMENT, what_ + " line " + std::to_string(line_number_ + 1) +
                                               ": longer than " + std::to_string(max_line_bytes_) +
                                               " bytes");
    }
    if (newline != std::string::npos || (eof_ && start_ < buffer_.size())) {
      line->assign(buffer_, start_, end - start_);
      start_ = newline == std::string::npos ? buffer_.size() : newline + 1;
      ++line_number_;
      return true;
    }
    if (eof_) return false;
    scanned = buffer_.size() - start_;  // Fill() moves the unread part to the front
    Status filled = Fill();
    if (!filled.ok()) return filled;
  }
}

}  // namespace tier::sim
