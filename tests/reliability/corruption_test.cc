// Corruption: every region of a stored checkpoint (each fixed-header field, the namespace, each
// segment's record and chunk table, the manifest, each chunk's data, and the padding between) is
// damaged in turn -- a bit flipped at its first, middle and last byte, its first 4 KiB zeroed, the
// file truncated at its start and in its middle -- once while the provider is open (found at
// restore) and once before the next open (found by the scan or at restore). Every damaged
// checkpoint answers DATA_LOSS or is never adopted; a restore never reports OK with wrong bytes;
// enumerate never lists a damaged segment table or manifest. Only damage to padding nobody reads
// may go unnoticed, and then the bytes restored are exact.
#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "derived_checkpoint.h"
#include "format.h"

namespace tier::disk::test {
namespace {

constexpr const char* kNs = "corruption-ns";

struct Region {
  std::string name;
  uint64_t offset;
  uint64_t length;
  bool checked;  // covered by a checksum or a length check (padding is not)
};

enum class Harm { kFlipFirst, kFlipMiddle, kFlipLast, kZero, kTruncateAtStart, kTruncateInside };
constexpr Harm kHarms[] = {Harm::kFlipFirst, Harm::kFlipMiddle,      Harm::kFlipLast,
                           Harm::kZero,      Harm::kTruncateAtStart, Harm::kTruncateInside};

const char* HarmName(Harm h) {
  switch (h) {
    case Harm::kFlipFirst:
      return "bit flip at its first byte";
    case Harm::kFlipMiddle:
      return "bit flip at its middle byte";
    case Harm::kFlipLast:
      return "bit flip at its last byte";
    case Harm::kZero:
      return "first 4 KiB zeroed";
    case Harm::kTruncateAtStart:
      return "file truncated at its start";
    case Harm::kTruncateInside:
      return "file truncated inside it";
  }
  return "?";
}

// The same shape for every seed (so region names line up), different bytes: four data segments
// of 1 to 3 chunks (64 KiB chunks; one block-aligned length, some partial), an empty segment and
// a manifest.
Checkpoint Shaped(uint64_t seed) {
  Checkpoint cp;
  cp.Add(TIER_SEGMENT_MAIN_KV, 0, RandomBytes(150000, seed));
  cp.Add(TIER_SEGMENT_MAIN_KV, 1, Fp32StateLike(65536, seed + 1));
  cp.Add(TIER_SEGMENT_STATE_IMAGE, 0, Bf16Like(70004, seed + 2));
  cp.Add(TIER_SEGMENT_HIDDEN_STATE, 0, RandomBytes(10240, seed + 3));
  cp.Add(TIER_SEGMENT_OTHER, 5, {});
  cp.Add(TIER_SEGMENT_MANIFEST, 0, RandomBytes(1000, seed + 4));
  return cp;
}

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every region of a checkpoint file, from its own (valid) header.
std::vector<Region> RegionsOf(const std::vector<uint8_t>& file) {
  Header h;
  ParseError e;
  EXPECT_TRUE(ParseHeader(file, &h, &e)) << e.message;
  std::vector<Region> out = {{"magic", 0, 8, true},          {"version", 8, 4, true},
                             {"header length", 12, 4, true}, {"header checksum", 16, 8, true},
                             {"flags", 24, 4, true},         {"chunk size", 28, 4, true},
                             {"key", 32, 32, true},          {"namespace length", 64, 2, true},
                             {"reserved16", 66, 2, true},    {"segment count", 68, 4, true},
                             {"chunk count", 72, 8, true},   {"manifest length", 80, 8, true},
                             {"logical bytes", 88, 8, true}, {"data offset", 96, 8, true},
                             {"file length", 104, 8, true},  {"creation time", 112, 8, true},
                             {"reserved64", 120, 8, true}};
  const uint64_t ns_at = kFixedHeaderBytes;
  out.push_back({"namespace", ns_at, h.namespace_id.size(), true});
  const uint64_t seg_at = ns_at + AlignUp(h.namespace_id.size(), 8);
  const uint64_t chunk_at = seg_at + h.segments.size() * kSegmentRecordBytes;
  const uint64_t manifest_at = chunk_at + h.chunks.size() * kChunkRecordBytes;
  const uint64_t content_end = manifest_at + h.manifest.size();
  for (size_t s = 0; s < h.segments.size(); ++s) {
    const SegmentRecord& seg = h.segments[s];
    const std::string name = "segment " + std::to_string(s);
    out.push_back({name + " record", seg_at + s * kSegmentRecordBytes, kSegmentRecordBytes, true});
    out.push_back({name + " chunk table", chunk_at + seg.first_chunk * kChunkRecordBytes,
                   uint64_t{seg.chunk_count} * kChunkRecordBytes, true});
    for (uint32_t c = 0; c < seg.chunk_count; ++c) {
      const ChunkRecord& ch = h.chunks[seg.first_chunk + c];
      const std::string chunk = name + " chunk " + std::to_string(c);
      out.push_back({chunk + " data", ch.file_offset, ch.stored_bytes, true});
      out.push_back({chunk + " padding", ch.file_offset + ch.stored_bytes,
                     AlignUp(ch.stored_bytes, kBlockBytes) - ch.stored_bytes, false});
    }
  }
  out.push_back({"manifest", manifest_at, h.manifest.size(), true});
  out.push_back({"header padding", content_end, h.data_offset - content_end, false});
  std::vector<Region> nonempty;
  for (const Region& r : out) {
    if (r.length > 0) nonempty.push_back(r);
  }
  return nonempty;
}

// Applies `harm` to `region` of the file. Returns false when the file did not change.
bool Apply(const std::string& path, const Region& region, Harm harm) {
  std::vector<uint8_t> bytes = ReadAll(path);
  const std::vector<uint8_t> before = bytes;
  const uint64_t mid = region.offset + region.length / 2;
  switch (harm) {
    case Harm::kFlipFirst:
      bytes[region.offset] ^= 0x01;
      break;
    case Harm::kFlipMiddle:
      bytes[mid] ^= 0x10;
      break;
    case Harm::kFlipLast:
      bytes[region.offset + region.length - 1] ^= 0x80;
      break;
    case Harm::kZero:
      std::fill_n(bytes.begin() + region.offset, std::min<uint64_t>(region.length, 4096), 0);
      break;
    case Harm::kTruncateAtStart:
      bytes.resize(region.offset);
      break;
    case Harm::kTruncateInside:
      bytes.resize(mid == region.offset ? mid + 1 : mid);
      break;
  }
  if (bytes == before) return false;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  return true;
}

struct Case {
  std::string what;
  uint64_t seed;
  bool must_detect = true;  // false: unread padding, or damage that changed nothing
};

std::string FileOf(const std::string& dir, const tier_key& key) {
  const std::string hex = Hex(std::span(key.bytes, TIER_KEY_BYTES));
  for (const std::string& n : ListDir(dir)) {
    if (n.find(hex) != std::string::npos && n.size() > 5 && n.substr(n.size() - 5) == ".ckpt") {
      return dir + "/" + n;
    }
  }
  return "";
}

// Spills one checkpoint per (region, harm) of the shape, returns the cases in seed order.
std::vector<Case> SpillAll(DiskProvider& p, const std::string& dir, uint64_t first_seed) {
  Checkpoint probe = Shaped(first_seed);
  EXPECT_EQ(SpillSync(p, MakeKey(first_seed), probe).status, TIER_OK);
  const size_t regions = RegionsOf(ReadAll(FileOf(dir, MakeKey(first_seed)))).size();
  const tier_key k = MakeKey(first_seed);
  EXPECT_TRUE(p.Remove(&k).ok());
  std::vector<Case> cases;
  uint64_t seed = first_seed + 1;
  for (size_t r = 0; r < regions; ++r) {
    for (Harm h : kHarms) {
      (void)h;
      Checkpoint cp = Shaped(seed);
      const Done d = SpillSync(p, MakeKey(seed), cp);
      EXPECT_EQ(d.status, TIER_OK) << d.message;
      cases.push_back({"", seed++});
    }
  }
  return cases;
}

// Damages case i's file with region i / |harms|, harm i % |harms|.
void DamageAll(const std::string& dir, std::vector<Case>* cases) {
  for (size_t i = 0; i < cases->size(); ++i) {
    Case& c = (*cases)[i];
    const std::string path = FileOf(dir, MakeKey(c.seed));
    ASSERT_FALSE(path.empty());
    const std::vector<Region> regions = RegionsOf(ReadAll(path));
    const Region& region = regions[i / std::size(kHarms)];
    const Harm harm = kHarms[i % std::size(kHarms)];
    c.what = region.name + ": " + HarmName(harm);
    const bool truncation = harm == Harm::kTruncateAtStart || harm == Harm::kTruncateInside;
    const bool changed = Apply(path, region, harm);
    c.must_detect = changed && (region.checked || truncation);
  }
}

// A restore of a damaged checkpoint: DATA_LOSS, NOT_FOUND (never adopted), or -- only for damage
// nothing reads -- OK with the exact bytes. Returns whether the damage was detected.
bool ExpectNeverWrong(DiskProvider& p, const Case& c, bool adopted_at_open) {
  SCOPED_TRACE(c.what);
  Checkpoint cp = Shaped(c.seed);
  RestoreTarget t = MakeTarget(cp, c.seed % 2);
  const Done d = RestoreSync(p, MakeKey(c.seed), t);
  if (d.status == TIER_OK) {
    EXPECT_TRUE(t.Equals(cp)) << "WRONG BYTES served as valid";
    EXPECT_FALSE(c.must_detect) << "damage went unnoticed";
    return false;
  }
  if (d.status == TIER_NOT_FOUND) {
    EXPECT_FALSE(adopted_at_open) << "an adopted checkpoint vanished";
    return true;
  }
  EXPECT_EQ(d.status, TIER_DATA_LOSS) << d.message;
  EXPECT_EQ(d.logical_bytes, 0u);
  // Dropped: never offered again.
  EXPECT_EQ(RestoreSync(p, MakeKey(c.seed), t).status, TIER_NOT_FOUND);
  tier_plan plan{};
  plan.struct_size = sizeof(plan);
  const tier_key key = MakeKey(c.seed);
  EXPECT_TRUE(p.PlanRestore(&key, UINT64_MAX, &plan).ok());
  EXPECT_EQ(plan.reason, static_cast<tier_reason>(TIER_REASON_CORRUPT));
  return true;
}

Options CorruptionOptions(const std::string& dir, const char* compression) {
  return BaseOptions(dir).Set("compression", compression).Set("chunk_kib", "64");
}

// Damage needs no real disk: tmpfs (which takes O_DIRECT on current kernels) keeps the matrix
// fast. Falls back to the build tree's disk where /dev/shm is absent.
std::string ScratchRoot() {
  return ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : TempDir::DefaultRoot();
}

class Corruption : public ::testing::TestWithParam<const char*> {};

TEST_P(Corruption, EveryRegionDamagedWhileOpenIsDataLossAtRestore) {
  TempDir tmp(ScratchRoot());
  const std::string dir = tmp.Sub("tier");
  FakeHost host;
  auto opened = OpenDisk(host, kNs, CorruptionOptions(dir, GetParam()));
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  DiskProvider& p = *opened.value();
  std::vector<Case> cases = SpillAll(p, dir, 1000);
  DamageAll(dir, &cases);
  uint64_t detected = 0;
  for (const Case& c : cases) detected += ExpectNeverWrong(p, c, /*adopted_at_open=*/true);
  uint64_t must = 0;
  for (const Case& c : cases) must += c.must_detect;
  EXPECT_GE(detected, must);
  EXPECT_GT(must, 200u) << "the matrix covers every region";
  EXPECT_EQ(host.Value("tier_cold_data_loss_total", "disk,restore"), detected);
  EXPECT_EQ(ListDir(dir + "/quarantine").size(), detected) << "each moved aside, none deleted";
  tier_stats st{};
  st.struct_size = sizeof(st);
  EXPECT_TRUE(p.Stats(&st).ok());
  EXPECT_EQ(st.entries, cases.size() - detected);
  EXPECT_EQ(st.used_bytes, SumCheckpointFileBytes(dir));
}

TEST_P(Corruption, EveryRegionDamagedWhileClosedIsCaughtAtReopen) {
  TempDir tmp(ScratchRoot());
  const std::string dir = tmp.Sub("tier");
  std::vector<Case> cases;
  {
    FakeHost host;
    auto opened = OpenDisk(host, kNs, CorruptionOptions(dir, GetParam()));
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    cases = SpillAll(*opened.value(), dir, 5000);
  }
  DamageAll(dir, &cases);
  FakeHost host;
  auto reopened = OpenDisk(host, kNs, CorruptionOptions(dir, GetParam()));
  ASSERT_TRUE(reopened.ok()) << reopened.status().message();
  DiskProvider& p = *reopened.value();
  // What enumerate offers a restarted server is exactly what was stored: segment table, sizes
  // and manifest (a damaged header never reaches it).
  struct Seen {
    std::set<uint64_t> seeds;
    int wrong = 0;
  } seen;
  EXPECT_TRUE(
      p.Enumerate(
           [](void* u, const tier_entry* e) -> int32_t {
             auto* s = static_cast<Seen*>(u);
             uint64_t seed = 0;
             for (uint64_t candidate = 5000; candidate < 5000 + 4096; ++candidate) {
               if (std::memcmp(MakeKey(candidate).bytes, e->key.bytes, TIER_KEY_BYTES) == 0) {
                 seed = candidate;
                 break;
               }
             }
             const Checkpoint cp = Shaped(seed);
             const bool manifest_ok = e->manifest_bytes == cp.data[5].size() &&
                                      std::memcmp(e->manifest, cp.data[5].data(), 1000) == 0;
             if (seed == 0 || !LayoutMatches(cp, e->segments, e->segment_count) || !manifest_ok) {
               ++s->wrong;
             }
             s->seeds.insert(seed);
             return 0;
           },
           &seen)
          .ok());
  EXPECT_EQ(seen.wrong, 0) << "enumerate offered a damaged identity, table or manifest";
  uint64_t detected = 0, not_adopted = 0;
  for (const Case& c : cases) {
    const bool adopted = seen.seeds.count(c.seed) > 0;
    not_adopted += !adopted;
    detected += ExpectNeverWrong(p, c, adopted);
  }
  EXPECT_GT(p.quarantined_at_open(), 100u) << "header damage is found by the scan";
  EXPECT_EQ(host.Value("tier_cold_data_loss_total", "disk,open"),
            static_cast<double>(p.quarantined_at_open()));
  EXPECT_GT(host.Value("tier_cold_data_loss_total", "disk,restore"), 20)
      << "data damage is found at restore";
  EXPECT_TRUE(host.LogContains("is corrupt"));
  uint64_t must = 0;
  for (const Case& c : cases) must += c.must_detect;
  EXPECT_GE(detected, must);
  EXPECT_GE(not_adopted, p.quarantined_at_open());
}

INSTANTIATE_TEST_SUITE_P(Compression, Corruption, ::testing::Values("off", "zstd"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace tier::disk::test

namespace tier::disk::test {
namespace {

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// Two segments of whole raw 64 KiB chunks (compression off): four and two chunks.
Checkpoint Chunky(uint64_t seed) {
  Checkpoint cp;
  cp.Add(TIER_SEGMENT_MAIN_KV, 0, RandomBytes(4 * 65536, seed));
  cp.Add(TIER_SEGMENT_STATE_IMAGE, 0, RandomBytes(2 * 65536, seed + 1));
  return cp;
}

struct Swap {
  const char* what;
  size_t a, b;     // chunk table positions: segment 0 holds 0-3, segment 1 holds 4-5
  bool move_data;  // swap the data blocks and the checksums (offsets stay), or the whole records
};

// What a forger who knows the format does: swaps two chunks of a stored checkpoint and reseals
// every table checksum and the header checksum, so the header verifies.
void SwapAndReseal(const std::string& path, const Swap& swap) {
  std::vector<uint8_t> file = ReadAll(path);
  Header h;
  ParseError error;
  ASSERT_TRUE(ParseHeader(file, &h, &error)) << error.message;
  ChunkRecord& a = h.chunks[swap.a];
  ChunkRecord& b = h.chunks[swap.b];
  ASSERT_EQ(a.codec, kCodecRaw);
  ASSERT_EQ(a.stored_bytes, b.stored_bytes);
  if (swap.move_data) {
    std::swap_ranges(file.begin() + a.file_offset, file.begin() + a.file_offset + a.stored_bytes,
                     file.begin() + b.file_offset);
    std::swap(a.checksum, b.checksum);
  } else {
    std::swap(a, b);
  }
  EncodeHeader(h, {file.data(), h.data_offset});
  Header resealed;
  ASSERT_TRUE(ParseHeader(file, &resealed, &error)) << "the forgery must verify: " << error.message;
  WriteBytes(path, file);
}

TEST(Corruption, ChunksSwappedAndResealedAreDataLoss) {
  const Swap swaps[] = {{"two chunks of one segment, records swapped", 0, 2, false},
                        {"two chunks of one segment, data swapped", 1, 3, true},
                        {"chunks of two segments, records swapped", 1, 4, false},
                        {"chunks of two segments, data swapped", 3, 5, true}};
  for (bool reopen : {false, true}) {
    for (const Swap& swap : swaps) {
      SCOPED_TRACE(std::string(swap.what) + (reopen ? ", found after a restart" : ", while open"));
      TempDir tmp(ScratchRoot());
      const std::string dir = tmp.Sub("tier");
      const Options options = CorruptionOptions(dir, "off");
      const uint64_t seed = 9000;
      Checkpoint cp = Chunky(seed);
      FakeHost host;
      auto opened = OpenDisk(host, kNs, options);
      ASSERT_TRUE(opened.ok()) << opened.status().message();
      ASSERT_EQ(SpillSync(*opened.value(), MakeKey(seed), cp).status, TIER_OK);
      SwapAndReseal(FileOf(dir, MakeKey(seed)), swap);
      if (reopen) {
        opened.value()->Close();
        opened = OpenDisk(host, kNs, options);
        ASSERT_TRUE(opened.ok()) << opened.status().message();
        ASSERT_EQ(opened.value()->quarantined_at_open(), 0u) << "its header verifies";
      }
      DiskProvider& p = *opened.value();
      RestoreTarget t = MakeTarget(cp);
      const Done d = RestoreSync(p, MakeKey(seed), t);
      EXPECT_EQ(d.status, TIER_DATA_LOSS) << "a chunk in the wrong place was served: " << d.message;
      EXPECT_EQ(d.logical_bytes, 0u);
      EXPECT_EQ(ListDir(dir + "/quarantine").size(), 1u);
      EXPECT_EQ(RestoreSync(p, MakeKey(seed), t).status, TIER_NOT_FOUND);
    }
  }
}

TEST(Corruption, AChunkOfAnotherCheckpointIsDataLoss) {
  // Same segment table, same chunk positions, another key: checksums differ by their seed.
  TempDir tmp(ScratchRoot());
  const std::string dir = tmp.Sub("tier");
  const Options options = CorruptionOptions(dir, "off");
  FakeHost host;
  auto opened = OpenDisk(host, kNs, options);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  DiskProvider& p = *opened.value();
  Checkpoint mine = Chunky(9100), theirs = Chunky(9200);
  ASSERT_EQ(SpillSync(p, MakeKey(9100), mine).status, TIER_OK);
  ASSERT_EQ(SpillSync(p, MakeKey(9200), theirs).status, TIER_OK);
  const std::string my_path = FileOf(dir, MakeKey(9100));
  std::vector<uint8_t> file = ReadAll(my_path);
  const std::vector<uint8_t> other = ReadAll(FileOf(dir, MakeKey(9200)));
  Header h, other_h;
  ParseError error;
  ASSERT_TRUE(ParseHeader(file, &h, &error)) << error.message;
  ASSERT_TRUE(ParseHeader(other, &other_h, &error)) << error.message;
  // Chunk 2 of segment 0 and its checksum taken from the other checkpoint, the header resealed.
  const ChunkRecord& from = other_h.chunks[2];
  std::copy_n(other.begin() + from.file_offset, from.stored_bytes,
              file.begin() + h.chunks[2].file_offset);
  h.chunks[2].checksum = from.checksum;
  EncodeHeader(h, {file.data(), h.data_offset});
  WriteBytes(my_path, file);
  RestoreTarget t = MakeTarget(mine);
  EXPECT_EQ(RestoreSync(p, MakeKey(9100), t).status, TIER_DATA_LOSS);
  RestoreTarget u = MakeTarget(theirs);
  ASSERT_EQ(RestoreSync(p, MakeKey(9200), u).status, TIER_OK);
  EXPECT_TRUE(u.Equals(theirs));
}

}  // namespace
}  // namespace tier::disk::test
