#include <tier/provider/option_text.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

namespace tier::provider {

bool ParseInteger(std::string_view text, int64_t lo, int64_t hi, int64_t* out) {
  if (text.empty()) return false;
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return false;
  if (value < lo || value > hi) return false;
  *out = value;
  return true;
}

bool ParseUnsigned(std::string_view text, uint64_t lo, uint64_t hi, uint64_t* out) {
  if (text.empty() || text[0] == '-' || text[0] == '+') return false;
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return false;
  if (value < lo || value > hi) return false;
  *out = value;
  return true;
}

bool ParseDecimal(std::string_view text, double* out) {
  if (text.empty() || text.size() > 64) return false;
  bool dot = false, digit = false;
  for (char c : text) {
    if (c == '.') {
      if (dot) return false;
      dot = true;
    } else if (c >= '0' && c <= '9') {
      digit = true;
    } else {
      return false;
    }
  }
  if (!digit) return false;
  const std::string copy(text);
  char* end = nullptr;
  const double value = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || !std::isfinite(value)) return false;
  *out = value;
  return true;
}

}  // namespace tier::provider
