// tier/status.h -- the project's one error type: a tier_status code plus a message that says what
// failed and why (RocksDB's Status/IOStatus: errors are values, nothing is silently dropped).
//
// Header-only C++20 over the ABI's codes, so a provider written in C++ can use it with nothing but
// tier::abi, and a status crosses the C boundary as (code, message) without translation. Plain
// values: any thread may create, copy or read them. Never thrown.
#pragma once

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

#include "tier/check.h"
#include "tier_provider.h"

namespace tier {

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(tier_status code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status NotFound(std::string m) { return {TIER_NOT_FOUND, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {TIER_ALREADY_EXISTS, std::move(m)}; }
  static Status InvalidArgument(std::string m) { return {TIER_INVALID_ARGUMENT, std::move(m)}; }
  static Status NoSpace(std::string m) { return {TIER_NO_SPACE, std::move(m)}; }
  static Status Busy(std::string m) { return {TIER_BUSY, std::move(m)}; }
  static Status DataLoss(std::string m) { return {TIER_DATA_LOSS, std::move(m)}; }
  static Status IoError(std::string m) { return {TIER_IO_ERROR, std::move(m)}; }
  static Status Cancelled(std::string m) { return {TIER_CANCELLED, std::move(m)}; }
  static Status Unsupported(std::string m) { return {TIER_UNSUPPORTED, std::move(m)}; }
  static Status Internal(std::string m) { return {TIER_INTERNAL, std::move(m)}; }
  // A failed system call: ENOSPC and EDQUOT are NO_SPACE, everything else IO_ERROR. `what` names
  // the operation and its object ("pwrite 'x.tmp'").
  static Status FromErrno(int err, const std::string& what) {
    const tier_status code = (err == ENOSPC || err == EDQUOT) ? TIER_NO_SPACE : TIER_IO_ERROR;
    return {code, what + ": " + ErrnoText(err)};
  }
  // "No space left on device (errno 28)". Thread-safe.
  static std::string ErrnoText(int err) {
    char buffer[128];
    const char* text = strerror_r(err, buffer, sizeof(buffer));  // GNU: may not use `buffer`
    return std::string(text) + " (errno " + std::to_string(err) + ")";
  }

  bool ok() const { return code_ == TIER_OK; }
  tier_status code() const { return code_; }
  const std::string& message() const { return message_; }
  const char* code_name() const { return tier_status_name(code_); }

  // The same code with "`context`: " put before the message.
  Status Annotate(const std::string& context) const {
    if (ok()) return *this;
    return {code_, message_.empty() ? context : context + ": " + message_};
  }
  // "no_space: disk: capacity 1073741824 bytes exceeded" (or "ok").
  std::string ToString() const {
    if (ok()) return "ok";
    return message_.empty() ? std::string(code_name()) : std::string(code_name()) + ": " + message_;
  }
  // Explicitly drops a status whose failure the caller has already handled or cannot act on.
  void IgnoreError() const {}

 private:
  tier_status code_ = TIER_OK;
  std::string message_;
};

// A value, or the Status that says why there is none. Never holds an ok Status without a value.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status)                          // NOLINT(google-explicit-constructor)
      : status_(status.ok() ? Status::Internal("Result made from an ok Status without a value")
                            : std::move(status)) {}

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & {
    TIER_CHECK(ok());
    return *value_;
  }
  const T& value() const& {
    TIER_CHECK(ok());
    return *value_;
  }
  T&& value() && {
    TIER_CHECK(ok());
    return std::move(*value_);
  }
  // Moves the value out (the Result is left holding a moved-from value).
  T&& take() {
    TIER_CHECK(ok());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace tier

// Returns from the enclosing function when `expr` (a Status) is not ok.
#define TIER_RETURN_IF_ERROR(expr)                             \
  do {                                                         \
    ::tier::Status tier_return_status_ = (expr);               \
    if (!tier_return_status_.ok()) return tier_return_status_; \
  } while (0)
