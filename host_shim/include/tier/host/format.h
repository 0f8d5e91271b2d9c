// format.h -- human-readable numbers for logs, progress lines and reports.
#pragma once

#include <cstdint>
#include <string>

namespace tier {

// "0 B", "512 B", "1.50 KiB", "3.38 GiB".
std::string FormatBytes(uint64_t bytes);
// "850 us", "12.3 ms", "1.52 s", "1m 03s".
std::string FormatDurationNs(uint64_t ns);

}  // namespace tier
