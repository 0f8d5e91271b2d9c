// flag_ranges.h -- range checks for tier-host's numeric flags, run on the text as typed before
// CLI11 converts it, so no value wraps (-1, 2^64), rounds or overflows later. A refusal reads
//   --host-kv-mib: '-1' is not a whole number of MiB from 0 to 17179869184 (0 B to 16 PiB)
// and the range is shown in --help.
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class Validator;
}

namespace tier {

// Plain decimal digits (no sign, no exponent, no 0x) for a value in [min, max]. `unit` names
// the flag's unit ("MiB", "lanes"); `unit_bytes` > 0 makes it a size, whose range is also
// shown in bytes ("0 B to 16 PiB").
CLI::Validator WholeInRange(uint64_t min, uint64_t max, const std::string& unit,
                            uint64_t unit_bytes = 0);
// A finite decimal number (1.5, 2e-3; not inf, not nan, not hex) in [min, max].
CLI::Validator NumberInRange(double min, double max, const std::string& unit,
                             double unit_bytes = 0);

// "16 PiB", "1 MiB", "1.5 GiB", "0 B": bytes in binary units for people. Pure.
std::string ReadableBytes(double bytes);

// The text of a whole number / number as typed, parsed exactly; false when it is not one. Pure.
bool ParseWhole(const std::string& text, uint64_t* value);
bool ParseNumber(const std::string& text, double* value);

}  // namespace tier
