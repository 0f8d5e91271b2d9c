// status.h -- error values for the disk provider: a tier_status plus a message that names what
// failed. Errors are values (RocksDB style); nothing inside the provider throws across the ABI.
#pragma once

#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "tier_provider.h"

namespace tier::disk {

class Status {
 public:
  Status() = default;
  Status(tier_status code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  // Maps an errno value of a failed file operation to a status: ENOSPC/EDQUOT are NO_SPACE, the
  // rest IO_ERROR. `what` names the operation and the path ("pwrite 'x.tmp'").
  static Status FromErrno(int err, const std::string& what);

  bool ok() const { return code_ == TIER_OK; }
  tier_status code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  tier_status code_ = TIER_OK;
  std::string message_;
};

// A value or an error. Minimal stand-in for std::expected (C++23).
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  T&& take() { return std::move(*value_); }

 private:
  std::optional<T> value_;
  Status status_;
};

// strerror text for an errno value (thread-safe).
std::string ErrnoText(int err);

}  // namespace tier::disk
