#include "segment_buffers.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <utility>

namespace tier::bench {
namespace {

constexpr size_t kPage = 4096;

// Runs fn(i) for i in [0, n) on up to `threads` threads.
template <typename Fn>
void ParallelFor(size_t n, unsigned threads, Fn fn) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < std::max(1u, threads); ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace

Result<SegmentBuffers> SegmentBuffers::Allocate(const CheckpointShape& shape, uint64_t misalign) {
  SegmentBuffers buffers;
  for (const SegmentShape& s : shape.segments) {
    const size_t bytes = (s.bytes + misalign + kPage - 1) / kPage * kPage + kPage;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return Status(TIER_NO_SPACE, "cannot map " + std::to_string(bytes) + " bytes for segment " +
                                       s.name + ": " + std::strerror(errno));
    }
    std::memset(p, 0, bytes);  // fault in now, not while timing
    buffers.mappings_.push_back({p, bytes});
    buffers.segments_.emplace_back(static_cast<std::byte*>(p) + misalign, s.bytes);
  }
  return buffers;
}

SegmentBuffers::~SegmentBuffers() {
  Release();
}

SegmentBuffers::SegmentBuffers(SegmentBuffers&& other) noexcept
    : mappings_(std::move(other.mappings_)), segments_(std::move(other.segments_)) {
  other.mappings_.clear();
  other.segments_.clear();
}

SegmentBuffers& SegmentBuffers::operator=(SegmentBuffers&& other) noexcept {
  if (this != &other) {
    Release();
    mappings_ = std::move(other.mappings_);
    segments_ = std::move(other.segments_);
    other.mappings_.clear();
    other.segments_.clear();
  }
  return *this;
}

void SegmentBuffers::Release() {
  for (const Mapping& m : mappings_) ::munmap(m.base, m.bytes);
  mappings_.clear();
  segments_.clear();
}

std::vector<tier_segment> SegmentBuffers::Table(const CheckpointShape& shape) const {
  std::vector<tier_segment> table;
  for (size_t i = 0; i < segments_.size(); ++i) {
    const SegmentShape& s = shape.segments[i];
    table.push_back({s.kind, s.index, s.bytes, segments_[i].data()});
  }
  return table;
}

void SegmentBuffers::Fill(DataKind kind, uint64_t seed, unsigned threads) {
  ParallelFor(segments_.size(), threads,
              [&](size_t i) { FillSegment(kind, seed, static_cast<uint32_t>(i), segments_[i]); });
}

void SegmentBuffers::Poison() {
  // One poison word at the start of every 4 KiB of every segment and at its end: a chunk the
  // restore did not write keeps it (a full memset would cost a pass over the whole checkpoint).
  constexpr uint64_t kPoison = 0xa5a5'5a5a'dead'beefull;
  for (std::span<std::byte> s : segments_) {
    for (size_t at = 0; at + sizeof(kPoison) <= s.size(); at += kPage) {
      std::memcpy(s.data() + at, &kPoison, sizeof(kPoison));
    }
    const size_t tail = std::min(s.size(), sizeof(kPoison));
    std::memcpy(s.data() + s.size() - tail, &kPoison, tail);
  }
}

int64_t SegmentBuffers::FirstMismatch(DataKind kind, uint64_t seed, unsigned threads,
                                      uint64_t* offset) const {
  std::vector<int64_t> at(segments_.size(), -1);
  ParallelFor(segments_.size(), threads, [&](size_t i) {
    auto where = bench::FirstMismatch(kind, seed, static_cast<uint32_t>(i), segments_[i]);
    if (where) at[i] = static_cast<int64_t>(*where);
  });
  for (size_t i = 0; i < at.size(); ++i) {
    if (at[i] >= 0) {
      if (offset != nullptr) *offset = static_cast<uint64_t>(at[i]);
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

int64_t SegmentBuffers::FirstDifference(const SegmentBuffers& expected) const {
  if (expected.segments_.size() != segments_.size()) return 0;
  for (size_t i = 0; i < segments_.size(); ++i) {
    const std::span<std::byte> a = segments_[i], b = expected.segments_[i];
    if (a.size() != b.size() || std::memcmp(a.data(), b.data(), a.size()) != 0) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

uint64_t SegmentBuffers::total_bytes() const {
  uint64_t total = 0;
  for (std::span<std::byte> s : segments_) total += s.size();
  return total;
}

}  // namespace tier::bench
