// option_text.h -- the number syntax of provider options (KEY=VALUE text from the command line):
// whole decimal values with nothing around them, within a range. Pure; any thread.
#pragma once

#include <cstdint>
#include <string_view>

namespace tier::provider {

// A decimal integer in [lo, hi] ("-3" allowed when lo < 0; no '+', no spaces, no exponent).
bool ParseInteger(std::string_view text, int64_t lo, int64_t hi, int64_t* out);
// An unsigned decimal in [lo, hi], without a sign.
bool ParseUnsigned(std::string_view text, uint64_t lo, uint64_t hi, uint64_t* out);
// A non-negative decimal with an optional fraction ("1", "0.5", "12.25"): no exponent, no sign,
// at most 64 characters, finite.
bool ParseDecimal(std::string_view text, double* out);

}  // namespace tier::provider
