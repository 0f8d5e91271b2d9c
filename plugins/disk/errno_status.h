// errno_status.h -- the disk provider's spelling of a failed system call as a tier::Status. Every
// message the provider returns starts with "disk: ". Header-only; any thread.
#pragma once

#include <string>

#include "tier/status.h"

namespace tier::disk {

// ENOSPC and EDQUOT are NO_SPACE, every other errno IO_ERROR; the message is
// "disk: <what>: <strerror text> (errno N)". `what` names the call and its object
// ("spill: create '<dir>/<name>'").
inline Status ErrnoStatus(int err, const std::string& what) {
  return Status::FromErrno(err, "disk: " + what);
}

}  // namespace tier::disk
