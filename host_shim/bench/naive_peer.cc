#include "naive_peer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include <tier/host/host_services.h>

namespace tier::bench {
namespace {

std::string PathOf(const std::string& dir, const SegmentShape& s) {
  return dir + "/" + s.name + ".bin";
}

Status Errno(const std::string& what) {
  return Status(TIER_IO_ERROR, "naive peer: " + what + ": " + std::strerror(errno));
}

}  // namespace

Result<NaiveSpillTimes> NaiveSpill(const std::string& dir, const CheckpointShape& shape,
                                   const SegmentBuffers& buffers) {
  NaiveSpillTimes times;
  const uint64_t t0 = MonotonicNs();
  for (size_t i = 0; i < shape.segments.size(); ++i) {
    const std::string path = PathOf(dir, shape.segments[i]);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return Errno("fopen '" + path + "'");
    const std::span<std::byte> data = buffers.segment(i);
    const size_t n = std::fwrite(data.data(), 1, data.size(), f);
    if (std::fclose(f) != 0 || n != data.size()) return Errno("fwrite '" + path + "'");
  }
  times.buffered_ns = MonotonicNs() - t0;
  for (const SegmentShape& s : shape.segments) {
    const std::string path = PathOf(dir, s);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Errno("open '" + path + "'");
    const int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0) return Errno("fsync '" + path + "'");
  }
  times.synced_ns = MonotonicNs() - t0;
  return times;
}

Result<uint64_t> NaiveRestore(const std::string& dir, const CheckpointShape& shape,
                              SegmentBuffers& buffers) {
  const uint64_t t0 = MonotonicNs();
  for (size_t i = 0; i < shape.segments.size(); ++i) {
    const std::string path = PathOf(dir, shape.segments[i]);
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) return Errno("fopen '" + path + "'");
    const std::span<std::byte> data = buffers.segment(i);
    const size_t n = std::fread(data.data(), 1, data.size(), f);
    std::fclose(f);
    if (n != data.size()) return Errno("fread '" + path + "' (short read)");
  }
  return MonotonicNs() - t0;
}

void NaiveRemove(const std::string& dir, const CheckpointShape& shape) {
  for (const SegmentShape& s : shape.segments) ::unlink(PathOf(dir, s).c_str());
}

}  // namespace tier::bench
