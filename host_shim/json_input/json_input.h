// json_input.h -- JSON that a user wrote (model profiles, trace lines), read with checked types
// and ranges. Every error names the field and shows the value as it was written: a number that
// is not an exact integer (1.5, 1e30, 18446744073709551616) keeps its own text, so the message
// never shows a rounded or wrapped value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include <tier/status.h>

namespace tier {

constexpr size_t kMaxJsonDepth = 64;  // objects and arrays nested deeper are refused

// A parsed document and the text of every number in it that is not an exact integer, keyed by
// its JSON pointer ("/prefill/chunk_ns", "/hash_ids/3").
struct JsonInput {
  nlohmann::json doc;
  std::map<std::string, std::string> number_text;
};

// Parses `text`. INVALID_ARGUMENT "not JSON: <the parser's reason, position included>", or
// "field 'x' is 1e400, beyond the range of a number", otherwise. Pure.
Result<JsonInput> ParseJsonInput(std::string_view text);

// "prefill.chunk_ns" for "/prefill/chunk_ns", "state_image[0].bytes" for "/state_image/0/bytes".
std::string JsonFieldName(std::string_view pointer);

// Typed, bounded reads from one JsonInput. Messages read
//   "<where>: field 'input_length' is -5; expected a whole number from 1 to 4194304"
//   "<where>: field 'name' is missing".
// Borrows `input`, which must outlive the reader. One thread at a time.
class JsonReader {
 public:
  JsonReader(const JsonInput& input, std::string where) : input_(input), where_(std::move(where)) {}

  // The value at `pointer`, or nullptr when absent.
  const nlohmann::json* Find(const std::string& pointer) const;
  // The value at `pointer` as written: a number's own text, else its JSON (cut at 64 bytes).
  std::string Text(const std::string& pointer) const;

  // A JSON integer (not 1.0, not 1e3) in [min, max].
  Status Whole(const std::string& pointer, uint64_t min, uint64_t max, uint64_t* out) const;
  Status Whole(const std::string& pointer, uint32_t min, uint32_t max, uint32_t* out) const;
  // Any JSON number in [min, max] (both finite).
  Status Number(const std::string& pointer, double min, double max, double* out) const;
  // A string of 1 to `max_bytes` bytes, each accepted by `allowed`; `allowed_what` says which
  // ("letters, digits and . _ + -").
  Status Text(const std::string& pointer, size_t max_bytes, bool (*allowed)(unsigned char),
              std::string_view allowed_what, std::string* out) const;
  // An array of at most `max_items` items; its size in *count.
  Status Array(const std::string& pointer, size_t max_items, size_t* count) const;
  // An object.
  Status Object(const std::string& pointer) const;

  // "<where>: field '<name>' is <text>; expected <expected>".
  Status Problem(const std::string& pointer, std::string_view expected) const;
  const std::string& where() const { return where_; }

 private:
  Status Missing(const std::string& pointer) const;
  const JsonInput& input_;
  std::string where_;
};

// Byte classes for JsonReader::Text.
bool IsNameByte(unsigned char c);       // [A-Za-z0-9._+-]
bool IsPrintableByte(unsigned char c);  // no C0 control, no DEL (UTF-8 allowed)

// A bound written for people: 18446744073709551615 stays digits, 1e+10 becomes 10000000000,
// 0.001 stays 0.001.
std::string FormatBound(double value);

}  // namespace tier
