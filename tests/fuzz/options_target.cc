#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_targets.h"
#include "options.h"

namespace tier::disk::fuzz {
namespace {

#define FUZZ_CHECK(cond)                                                    \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "options fuzz: property violated: %s\n", #cond); \
      std::abort();                                                         \
    }                                                                       \
  } while (0)

}  // namespace

int FuzzOptionParser(const uint8_t* data, size_t size) {
  // Lines of key=value (a line without '=' is a key with an empty value), at most 64.
  std::vector<std::string> keys, values;
  std::string text(reinterpret_cast<const char*>(data), size);
  size_t at = 0;
  while (at <= text.size() && keys.size() < 64) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    const size_t eq = line.find('=');
    keys.push_back(line.substr(0, eq));
    values.push_back(eq == std::string::npos ? "" : line.substr(eq + 1));
    at = end + 1;
  }
  std::vector<tier_option> options;
  for (size_t i = 0; i < keys.size(); ++i) options.push_back({keys[i].c_str(), values[i].c_str()});
  Result<DiskOptions> r = ParseOptions(options);
  if (!r.ok()) {
    FUZZ_CHECK(r.status().code() == TIER_INVALID_ARGUMENT);
    FUZZ_CHECK(r.status().message().rfind("disk: ", 0) == 0);
    return 0;
  }
  const DiskOptions& o = r.value();
  FUZZ_CHECK(!o.dir.empty());
  FUZZ_CHECK(o.capacity_bytes > 0);
  FUZZ_CHECK(o.zstd_level >= -7 && o.zstd_level <= 19);
  FUZZ_CHECK(o.queue_depth >= 1 && o.queue_depth <= 1024);
  FUZZ_CHECK(o.io_threads >= 1 && o.io_threads <= 64);
  FUZZ_CHECK(o.codec_threads >= 1 && o.codec_threads <= 64);
  FUZZ_CHECK(o.chunk_bytes >= (64u << 10) && o.chunk_bytes <= (64u << 20));
  FUZZ_CHECK(o.chunk_bytes % 4096 == 0);
  FUZZ_CHECK(o.staging_bytes >= 2ull * o.chunk_bytes);
  FUZZ_CHECK(o.staging_buffers() >= 2);
  // Deterministic: the same input parses to the same options.
  Result<DiskOptions> again = ParseOptions(options);
  FUZZ_CHECK(again.ok() && again.value().capacity_bytes == o.capacity_bytes &&
             again.value().dir == o.dir && again.value().chunk_bytes == o.chunk_bytes);
  return 0;
}

}  // namespace tier::disk::fuzz
