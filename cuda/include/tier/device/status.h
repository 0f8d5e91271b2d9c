// status.h -- errors as values for the device side of a transfer (tier::device).
//
// No exceptions in the hot path: every fallible call returns a Status or a Result<T> that says
// what failed and why. Both types are plain values; any thread may create, copy or read them.
#ifndef TIER_DEVICE_STATUS_H
#define TIER_DEVICE_STATUS_H

#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace tier::device {

enum class StatusCode : std::uint8_t {
  kOk = 0,
  kInvalidArgument,    // the caller passed something malformed (layout, sizes, page table)
  kOutOfRange,         // an index (page id, layer, plane) lies outside its bound
  kResourceExhausted,  // a byte bound or an allocation (host, pinned, device) ran out
  kUnavailable,        // the requested path does not exist here (no CUDA device, not compiled in)
  kDeviceError,        // the CUDA runtime reported an error
  kInternal,           // an invariant of this library broke
};

// Stable lower-case name of a code ("ok", "invalid_argument", ...). Any thread.
const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "invalid_argument: page id 9000 at index 3 is outside the pool (page_count 4096)". Any thread.
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string message) {
  return Status(StatusCode::kInvalidArgument, std::move(message));
}
inline Status out_of_range(std::string message) {
  return Status(StatusCode::kOutOfRange, std::move(message));
}
inline Status resource_exhausted(std::string message) {
  return Status(StatusCode::kResourceExhausted, std::move(message));
}
inline Status unavailable(std::string message) {
  return Status(StatusCode::kUnavailable, std::move(message));
}
inline Status device_error(std::string message) {
  return Status(StatusCode::kDeviceError, std::move(message));
}
inline Status internal_error(std::string message) {
  return Status(StatusCode::kInternal, std::move(message));
}

// A value or the Status that says why there is none. Never holds an ok Status without a value.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status)                          // NOLINT(google-explicit-constructor)
      : status_(status.ok() ? internal_error("Result built from an ok Status without a value")
                            : std::move(status)) {
    assert(!status_.ok());
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
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

}  // namespace tier::device

// Returns from the enclosing function when `expr` (a Status) is not ok.
#define TIER_DEVICE_RETURN_IF_ERROR(expr)                \
  do {                                                   \
    ::tier::device::Status tier_status_tmp_ = (expr);    \
    if (!tier_status_tmp_.ok()) return tier_status_tmp_; \
  } while (0)

#endif  // TIER_DEVICE_STATUS_H
