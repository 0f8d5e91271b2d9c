#include "json_input.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <vector>

namespace tier {
namespace {

using nlohmann::json;

std::string PointerToken(std::string_view token) {
  std::string out;
  for (const char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// Builds the DOM like nlohmann's own parser, and remembers the text of every float-typed number.
class KeepingSax {
 public:
  explicit KeepingSax(JsonInput* input) : input_(input) {}

  bool null() { return Put(nullptr); }
  bool boolean(bool value) { return Put(value); }
  bool number_integer(json::number_integer_t value) { return Put(value); }
  bool number_unsigned(json::number_unsigned_t value) { return Put(value); }
  bool number_float(json::number_float_t value, const json::string_t& text) {
    input_->number_text[NextPointer()] = text;
    return Put(value);
  }
  bool string(json::string_t& value) { return Put(std::move(value)); }
  bool binary(json::binary_t&) { return false; }  // not in JSON text
  bool start_object(std::size_t) { return Open(json::object()); }
  bool key(json::string_t& key) {
    keys_.back() = key;
    member_ = &(*stack_.back())[key];
    return true;
  }
  bool end_object() { return Close(); }
  bool start_array(std::size_t) { return Open(json::array()); }
  bool end_array() { return Close(); }
  bool parse_error(std::size_t, const std::string& last_token,
                   const nlohmann::detail::exception& e) {
    constexpr int kNumberOverflow = 406;  // nlohmann's out_of_range.406: beyond a double
    if (e.id == kNumberOverflow) {
      error_ = "field '" + JsonFieldName(NextPointer()) + "' is " + last_token +
               ", beyond the range of a number";
    } else {
      error_ = std::string("not JSON: ") + e.what();
    }
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  // The pointer of the value about to be put.
  std::string NextPointer() const {
    std::string pointer;
    for (size_t level = 0; level < stack_.size(); ++level) {
      const json& container = *stack_[level];
      pointer += '/';
      if (container.is_object()) {
        pointer += PointerToken(keys_[level]);
      } else {
        // Below the top the child is the last item; at the top it is the next one.
        const size_t size = container.size();
        pointer += std::to_string(level + 1 < stack_.size() ? size - 1 : size);
      }
    }
    return pointer;
  }

  template <typename V>
  json* Place(V&& value) {
    if (stack_.empty()) {
      input_->doc = json(std::forward<V>(value));
      return &input_->doc;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.emplace_back(std::forward<V>(value));
      return &top.back();
    }
    *member_ = json(std::forward<V>(value));
    return member_;
  }
  template <typename V>
  bool Put(V&& value) {
    Place(std::forward<V>(value));
    return true;
  }
  bool Open(json container) {
    if (stack_.size() >= kMaxJsonDepth) {
      error_ = "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
      return false;
    }
    stack_.push_back(Place(std::move(container)));
    keys_.emplace_back();
    return true;
  }
  bool Close() {
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }

  JsonInput* input_;
  std::vector<json*> stack_;       // open containers, outermost first
  std::vector<std::string> keys_;  // per open container: the key being filled (objects)
  json* member_ = nullptr;         // the member the next value of the top object goes to
  std::string error_;
};

std::string Cut(std::string text) {
  constexpr size_t kMaxShown = 64;
  if (text.size() > kMaxShown) text = text.substr(0, kMaxShown) + "...";
  return text;
}

}  // namespace

Result<JsonInput> ParseJsonInput(std::string_view text) {
  JsonInput input;
  KeepingSax sax(&input);
  const bool ok = json::sax_parse(text.begin(), text.end(), &sax);
  if (!ok) {
    return Status(TIER_INVALID_ARGUMENT,
                  sax.error().empty() ? std::string("not JSON: parse error") : sax.error());
  }
  return input;
}

std::string JsonFieldName(std::string_view pointer) {
  std::string name;
  size_t at = 0;
  while (at < pointer.size() && pointer[at] == '/') {
    const size_t end = std::min(pointer.find('/', at + 1), pointer.size());
    std::string token(pointer.substr(at + 1, end - at - 1));
    const bool index = !token.empty() && token.find_first_not_of("0123456789") == std::string::npos;
    for (size_t p = 0; (p = token.find('~', p)) != std::string::npos; ++p) {
      token.replace(p, 2, token.compare(p, 2, "~1") == 0 ? "/" : "~");
    }
    if (index && !name.empty()) {
      name += "[" + token + "]";
    } else {
      name += (name.empty() ? "" : ".") + token;
    }
    at = end;
  }
  return name;
}

const json* JsonReader::Find(const std::string& pointer) const {
  const json::json_pointer path(pointer);
  return input_.doc.contains(path) ? &input_.doc.at(path) : nullptr;
}

std::string JsonReader::Text(const std::string& pointer) const {
  auto kept = input_.number_text.find(pointer);
  if (kept != input_.number_text.end()) return Cut(kept->second);
  const json* value = Find(pointer);
  return value == nullptr ? "missing" : Cut(value->dump());
}

Status JsonReader::Problem(const std::string& pointer, std::string_view expected) const {
  return Status(TIER_INVALID_ARGUMENT, where_ + ": field '" + JsonFieldName(pointer) + "' is " +
                                           Text(pointer) + "; expected " + std::string(expected));
}

Status JsonReader::Missing(const std::string& pointer) const {
  return Status(TIER_INVALID_ARGUMENT,
                where_ + ": field '" + JsonFieldName(pointer) + "' is missing");
}

Status JsonReader::Whole(const std::string& pointer, uint64_t min, uint64_t max,
                         uint64_t* out) const {
  const json* value = Find(pointer);
  if (value == nullptr) return Missing(pointer);
  if (value->is_number_unsigned()) {
    const uint64_t v = value->get<uint64_t>();
    if (v >= min && v <= max) {
      *out = v;
      return Status::Ok();
    }
  }
  return Problem(pointer,
                 "a whole number from " + std::to_string(min) + " to " + std::to_string(max));
}

Status JsonReader::Whole(const std::string& pointer, uint32_t min, uint32_t max,
                         uint32_t* out) const {
  uint64_t wide = 0;
  Status status = Whole(pointer, uint64_t{min}, uint64_t{max}, &wide);
  if (status.ok()) *out = static_cast<uint32_t>(wide);
  return status;
}

Status JsonReader::Number(const std::string& pointer, double min, double max, double* out) const {
  const json* value = Find(pointer);
  if (value == nullptr) return Missing(pointer);
  if (value->is_number()) {
    const double v = value->get<double>();
    if (std::isfinite(v) && v >= min && v <= max) {
      *out = v;
      return Status::Ok();
    }
  }
  return Problem(pointer, "a number from " + FormatBound(min) + " to " + FormatBound(max));
}

Status JsonReader::Text(const std::string& pointer, size_t max_bytes,
                        bool (*allowed)(unsigned char), std::string_view allowed_what,
                        std::string* out) const {
  const json* value = Find(pointer);
  if (value == nullptr) return Missing(pointer);
  if (value->is_string()) {
    const std::string& text = value->get_ref<const std::string&>();
    bool fits = !text.empty() && text.size() <= max_bytes;
    for (const char c : text) fits = fits && allowed(static_cast<unsigned char>(c));
    if (fits) {
      *out = text;
      return Status::Ok();
    }
  }
  return Problem(pointer, "a string of 1 to " + std::to_string(max_bytes) + " bytes of " +
                              std::string(allowed_what));
}

Status JsonReader::Array(const std::string& pointer, size_t max_items, size_t* count) const {
  const json* value = Find(pointer);
  if (value == nullptr) return Missing(pointer);
  if (value->is_array() && value->size() <= max_items) {
    *count = value->size();
    return Status::Ok();
  }
  return Problem(pointer, "a list of at most " + std::to_string(max_items) + " items");
}

Status JsonReader::Object(const std::string& pointer) const {
  const json* value = Find(pointer);
  if (value == nullptr) return Missing(pointer);
  if (value->is_object()) return Status::Ok();
  return Problem(pointer, "an object");
}

bool IsNameByte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '+' || c == '-';
}

bool IsPrintableByte(unsigned char c) {
  return c >= 0x20 && c != 0x7f;
}

std::string FormatBound(double value) {
  char text[64];
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    std::snprintf(text, sizeof(text), "%.0f", value);
  } else {
    std::snprintf(text, sizeof(text), "%.6g", value);
  }
  return text;
}

}  // namespace tier
