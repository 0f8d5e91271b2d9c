// page_cache.h -- keeps the page cache from flattering a restore: after a spill, every file the
// contestants wrote is synced and dropped from the cache (fdatasync + POSIX_FADV_DONTNEED), and
// mincore() counts how many of its pages are still resident, so the report can say the restores
// read the disk. fio and the provider read with O_DIRECT anyway; the naive peer reads buffered.
#pragma once

#include <cstdint>
#include <string>

#include <tier/status.h>

namespace tier::bench {

struct CacheState {
  uint64_t files = 0;
  uint64_t pages = 0;           // 4 KiB pages of those files
  uint64_t resident_pages = 0;  // still in the page cache after the eviction
};

// Syncs and evicts every regular file under `dir` (recursively) from the page cache; returns what
// mincore() sees afterwards. Any thread.
Result<CacheState> EvictDirectory(const std::string& dir);

// Resident pages of one file as mincore() reports them (0 for an empty file).
Result<CacheState> ResidentPages(const std::string& path);

// "fdatasync + POSIX_FADV_DONTNEED on every file before the restores; mincore: 0 of N pages
// resident" -- the method line of the report.
std::string DescribeEviction(const CacheState& worst);

}  // namespace tier::bench
