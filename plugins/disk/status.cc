#include "status.h"

#include <cstring>

namespace tier::disk {

std::string ErrnoText(int err) {
  char buffer[128];
  // GNU strerror_r returns a pointer that may or may not be `buffer`.
  const char* text = strerror_r(err, buffer, sizeof(buffer));
  return std::string(text) + " (errno " + std::to_string(err) + ")";
}

Status Status::FromErrno(int err, const std::string& what) {
  const tier_status code = (err == ENOSPC || err == EDQUOT) ? TIER_NO_SPACE : TIER_IO_ERROR;
  return Status(code, "disk: " + what + ": " + ErrnoText(err));
}

}  // namespace tier::disk
