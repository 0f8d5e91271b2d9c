// FuzzRegression: every committed corpus input and every input a fuzzer once found (regressions/)
// runs through the fuzz targets in every build, sanitizers included; plus a named test for each
// bug found.
#include <gtest/gtest.h>

#include <dirent.h>

#include <fstream>
#include <string>
#include <vector>

#include "format.h"
#include "fuzz_targets.h"

namespace tier::disk::test {
namespace {

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') out.push_back(dir + "/" + e->d_name);
    }
    ::closedir(d);
  }
  return out;
}

std::vector<uint8_t> Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int RunAll(const std::string& kind, int (*target)(const uint8_t*, size_t)) {
  int inputs = 0;
  for (const char* where : {"corpus", "regressions"}) {
    for (const std::string& path : FilesIn(std::string(TIER_FUZZ_DIR) + "/" + where + "/" + kind)) {
      SCOPED_TRACE(path);
      const std::vector<uint8_t> bytes = Bytes(path);
      EXPECT_EQ(target(bytes.data(), bytes.size()), 0);  // a violated property aborts
      ++inputs;
    }
  }
  return inputs;
}

TEST(FuzzRegression, HeaderCorpusAndRegressions) {
  EXPECT_GE(RunAll("header", fuzz::FuzzHeaderParser), 8);
}

TEST(FuzzRegression, OptionsCorpusAndRegressions) {
  EXPECT_GE(RunAll("options", fuzz::FuzzOptionParser), 8);
}

TEST(FuzzRegression, HeaderSeedsParse) {
  // The seeds named valid are valid: the fuzzer starts from headers that reach every check.
  for (const char* name : {"typical", "one-segment", "no-segments", "manifest-only",
                           "many-segments", "long-namespace", "format-1"}) {
    const std::vector<uint8_t> bytes =
        Bytes(std::string(TIER_FUZZ_DIR) + "/corpus/header/" + name + ".bin");
    Header h;
    ParseError error;
    EXPECT_TRUE(ParseHeader(bytes, &h, &error)) << name << ": " << error.message;
    EXPECT_EQ(h.format_version, std::string(name) == "format-1" ? 1u : kFormatVersion) << name;
  }
  const std::vector<uint8_t> newer =
      Bytes(std::string(TIER_FUZZ_DIR) + "/corpus/header/newer-version.bin");
  Header h;
  ParseError error;
  EXPECT_FALSE(ParseHeader(newer, &h, &error));
  EXPECT_EQ(error.kind, ParseErrorKind::kUnsupported) << error.message;
}

}  // namespace
}  // namespace tier::disk::test

namespace tier::disk::test {
namespace {

// A header whose only segment claims `logical` bytes stored in `chunks` raw chunks of 64 KiB.
std::vector<uint8_t> OneSegment(uint64_t logical, uint32_t chunks) {
  Header h;
  h.chunk_bytes = 64u << 10;
  h.namespace_id = "ns";
  h.segments.push_back({TIER_SEGMENT_MAIN_KV, 0, logical, 0, kCodecRaw, chunks, 0, 0});
  h.chunks.resize(chunks);
  h.data_offset = AlignUp(HeaderContentBytes(2, 1, chunks, 0), kBlockBytes);
  for (uint32_t c = 0; c < chunks; ++c) {
    const uint64_t len = std::min<uint64_t>(h.chunk_bytes, logical - uint64_t{c} * h.chunk_bytes);
    h.chunks[c] = {h.data_offset + c * h.chunk_bytes, static_cast<uint32_t>(len), kCodecRaw, c};
    h.segments[0].stored_bytes += AlignUp(len, kBlockBytes);
  }
  h.file_bytes = h.data_offset + uint64_t{chunks} * h.chunk_bytes;
  h.logical_bytes = logical;
  std::vector<uint8_t> out(h.data_offset);
  out.resize(EncodeHeader(h, out));
  return out;
}

TEST(FuzzRegression, SegmentLengthThatWrapsTheChunkCountIsRefused) {
  // ceil(logical / chunk) computed as (logical + chunk - 1) / chunk wraps around for lengths near
  // 2^64: a segment claiming 2^64 - 1 bytes in zero chunks must not parse.
  for (uint64_t logical : {~uint64_t{0}, ~uint64_t{0} - (64u << 10) + 2}) {
    const std::vector<uint8_t> bytes = OneSegment(logical, 0);
    Header h;
    ParseError error;
    EXPECT_FALSE(ParseHeader(bytes, &h, &error))
        << "accepted a segment of " << logical << " bytes in no chunks";
    EXPECT_EQ(fuzz::FuzzHeaderParser(bytes.data(), bytes.size()), 0);
  }
  const std::vector<uint8_t> fine = OneSegment(3 * (64u << 10) - 5, 3);
  Header h;
  ParseError error;
  EXPECT_TRUE(ParseHeader(fine, &h, &error)) << error.message;
}

}  // namespace
}  // namespace tier::disk::test
