// status.h -- errors as values: a tier_status code plus a message that says what and why.
#pragma once

#include <string>
#include <utility>

#include "tier_provider.h"

namespace tier {

class Status {
 public:
  Status() = default;
  Status(tier_status code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == TIER_OK; }
  tier_status code() const { return code_; }
  const std::string& message() const { return message_; }
  const char* code_name() const { return tier_status_name(code_); }

  // "no_space: disk: capacity 1073741824 bytes exceeded" (or "ok").
  std::string ToString() const {
    if (ok()) return "ok";
    return message_.empty() ? std::string(code_name()) : std::string(code_name()) + ": " + message_;
  }

 private:
  tier_status code_ = TIER_OK;
  std::string message_;
};

// A value or the Status saying why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() { return value_; }
  const T& value() const { return value_; }
  T&& take() { return std::move(value_); }

 private:
  Status status_;
  T value_{};
};

}  // namespace tier
