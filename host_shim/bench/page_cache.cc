#include "page_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

namespace tier::bench {
namespace {

constexpr uint64_t kPage = 4096;

Status Errno(const std::string& what) {
  return Status(TIER_IO_ERROR, what + ": " + std::strerror(errno));
}

Result<CacheState> CountResident(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Errno("fstat '" + path + "'");
  CacheState state;
  state.files = 1;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size == 0) return state;
  state.pages = (size + kPage - 1) / kPage;
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return Errno("mmap '" + path + "'");
  std::vector<unsigned char> vec(state.pages);
  const int rc = ::mincore(map, size, vec.data());
  ::munmap(map, size);
  if (rc != 0) return Errno("mincore '" + path + "'");
  for (unsigned char v : vec) state.resident_pages += v & 1;
  return state;
}

}  // namespace

Result<CacheState> ResidentPages(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("open '" + path + "'");
  Result<CacheState> state = CountResident(fd, path);
  ::close(fd);
  return state;
}

Result<CacheState> EvictDirectory(const std::string& dir) {
  CacheState total;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string path = it->path().string();
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // removed meanwhile
      return Errno("open '" + path + "'");
    }
    // DONTNEED drops clean pages only: write dirty ones back first.
    if (::fdatasync(fd) != 0 || ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) {
      const Status failed = Errno("evict '" + path + "' from the page cache");
      ::close(fd);
      return failed;
    }
    Result<CacheState> state = CountResident(fd, path);
    ::close(fd);
    if (!state.ok()) return state.status();
    total.files += state.value().files;
    total.pages += state.value().pages;
    total.resident_pages += state.value().resident_pages;
  }
  if (ec) return Status(TIER_IO_ERROR, "walk '" + dir + "': " + ec.message());
  return total;
}

std::string DescribeEviction(const CacheState& worst) {
  return "fdatasync + POSIX_FADV_DONTNEED on every written file before each restore round; "
         "mincore() then found " +
         std::to_string(worst.resident_pages) + " of " + std::to_string(worst.pages) +
         " pages resident (worst round); fio and the provider read with O_DIRECT";
}

}  // namespace tier::bench
