#include "conformance_fixture.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "checkpoint_bytes.h"

namespace tier::conformance {

void OpRecord::Callback(void* user_data, const tier_completion* completion) {
  auto* record = static_cast<OpRecord*>(user_data);
  std::lock_guard<std::mutex> lock(record->mutex);
  if (completion != nullptr) {
    record->status = completion->status;
    record->message = completion->message != nullptr ? completion->message : "(NULL message)";
    record->logical_bytes = completion->logical_bytes;
    record->stored_bytes = completion->stored_bytes;
  }
  record->calls.fetch_add(1);
  record->cv.notify_all();
}

bool OpRecord::Wait() {
  std::unique_lock<std::mutex> lock(mutex);
  return cv.wait_for(lock, std::chrono::seconds(120), [this] { return calls.load() > 0; });
}

std::vector<tier_segment> TestCheckpoint::Segments() {
  std::vector<tier_segment> segments;
  for (size_t i = 0; i < layout.size(); ++i) {
    segments.push_back({layout[i].kind, layout[i].index, layout[i].length_bytes,
                        buffers[i].empty() ? nullptr : buffers[i].data()});
  }
  return segments;
}

std::vector<tier_segment> TestCheckpoint::EmptySegments() {
  for (auto& buffer : buffers) std::fill(buffer.begin(), buffer.end(), std::byte{0});
  return Segments();
}

bool TestCheckpoint::Matches() const {
  for (size_t i = 0; i < layout.size(); ++i) {
    if (!SegmentBytesMatch(key, layout[i].kind, layout[i].index, buffers[i])) return false;
  }
  return true;
}

uint64_t TestCheckpoint::logical_bytes() const {
  uint64_t total = 0;
  for (const auto& s : layout) total += s.length_bytes;
  return total;
}

TestCheckpoint MakeCheckpoint(const std::string& label, std::vector<tier_segment_info> layout) {
  TestCheckpoint checkpoint;
  checkpoint.key = KeyFromText("conformance:" + label);
  checkpoint.layout = std::move(layout);
  for (const auto& s : checkpoint.layout) {
    checkpoint.buffers.emplace_back(s.length_bytes);
    FillSegmentBytes(checkpoint.key, s.kind, s.index, checkpoint.buffers.back());
  }
  return checkpoint;
}

TestCheckpoint MakeCheckpoint(const std::string& label, uint64_t scale_bytes) {
  return MakeCheckpoint(label, {{TIER_SEGMENT_MAIN_KV, 0, scale_bytes},
                                {TIER_SEGMENT_MAIN_KV, 1, scale_bytes + 13},
                                {TIER_SEGMENT_SPEC_KV, 16, scale_bytes / 4 + 1},
                                {TIER_SEGMENT_STATE_IMAGE, 0, scale_bytes * 2 + 5},
                                {TIER_SEGMENT_HIDDEN_STATE, 0, 10240},
                                {TIER_SEGMENT_OTHER, 3, 77},
                                {TIER_SEGMENT_MANIFEST, 0, 300}});
}

bool SameKey(const tier_key& a, const tier_key& b) {
  return std::memcmp(a.bytes, b.bytes, TIER_KEY_BYTES) == 0;
}

void AbiConformance::SetUp() {
  const Target& target = GetParam();
  auto library = PluginLibrary::Load(target.path, host_.table());
  ASSERT_TRUE(library.ok()) << library.status().message();
  library_ = library.value();
  for (std::string option : target.options) {
    const size_t at = option.find("{tmpdir}");
    if (at != std::string::npos) {
      if (!tmpdir_) tmpdir_ = std::make_unique<test::ScopedTempDir>("tier-conformance");
      option.replace(at, 8, tmpdir_->path());
    }
    options_.push_back(option);
  }
  Open();
  if (HasFatalFailure()) return;
  tier_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(table()->info(instance_, &info, nullptr), TIER_OK);
  const tier_stats stats = Stats();
  persistent_ = (info.capabilities & TIER_CAP_PERSISTENT) != 0;
  switch (target.expectation) {
    case Expectation::kAbsent:
      absent_ = true;
      break;
    case Expectation::kFull:
      absent_ = false;
      break;
    case Expectation::kAuto:
      absent_ = stats.capacity_bytes == 0 || (info.capabilities & TIER_CAP_ZERO_CAPACITY) != 0;
  }
}

void AbiConformance::TearDown() {
  Close();
}

tier_status AbiConformance::TryOpen(const std::string& namespace_id, tier_instance** out,
                                    tier_error* error) {
  std::vector<std::string> keys, values;
  for (const std::string& option : options_) {
    const size_t eq = option.find('=');
    keys.push_back(option.substr(0, eq));
    values.push_back(eq == std::string::npos ? "" : option.substr(eq + 1));
  }
  std::vector<tier_option> raw;
  for (size_t i = 0; i < keys.size(); ++i) raw.push_back({keys[i].c_str(), values[i].c_str()});
  const std::string ns = namespace_id.empty() ? GetParam().namespace_id : namespace_id;
  return table()->open(host_.table(), ns.c_str(), raw.data(), static_cast<uint32_t>(raw.size()),
                       out, error);
}

tier_instance* AbiConformance::Open(const std::string& namespace_id) {
  Close();
  tier_error error{};
  const tier_status status = TryOpen(namespace_id, &instance_, &error);
  EXPECT_EQ(status, TIER_OK) << "open failed: " << error.message;
  if (status != TIER_OK) instance_ = nullptr;
  return instance_;
}

void AbiConformance::Close() {
  if (instance_ != nullptr) table()->close(instance_);
  instance_ = nullptr;
}

tier_status AbiConformance::Spill(TestCheckpoint& checkpoint) {
  OpRecord record;
  auto segments = checkpoint.Segments();
  tier_error error{};
  const tier_status accepted =
      table()->spill(instance_, &checkpoint.key, segments.data(),
                     static_cast<uint32_t>(segments.size()), OpRecord::Callback, &record, &error);
  if (accepted != TIER_OK) {
    EXPECT_EQ(record.calls.load(), 0) << "a refused spill must not call back";
    EXPECT_NE(error.message[0], '\0') << "a refusal says why";
    return accepted;
  }
  EXPECT_TRUE(record.Wait()) << "spill never completed";
  EXPECT_EQ(record.calls.load(), 1);
  if (record.status == TIER_OK) {
    EXPECT_EQ(record.logical_bytes, checkpoint.logical_bytes());
  }
  return record.status;
}

tier_status AbiConformance::Restore(TestCheckpoint& checkpoint) {
  OpRecord record;
  auto segments = checkpoint.EmptySegments();
  std::reverse(segments.begin(), segments.end());  // any order must work
  tier_error error{};
  const tier_status accepted =
      table()->restore(instance_, &checkpoint.key, segments.data(),
                       static_cast<uint32_t>(segments.size()), OpRecord::Callback, &record, &error);
  if (accepted != TIER_OK) {
    EXPECT_EQ(record.calls.load(), 0) << "a refused restore must not call back";
    return accepted;
  }
  EXPECT_TRUE(record.Wait()) << "restore never completed";
  EXPECT_EQ(record.calls.load(), 1);
  return record.status;
}

tier_stats AbiConformance::Stats() {
  tier_stats stats{};
  stats.struct_size = sizeof(stats);
  tier_error error{};
  EXPECT_EQ(table()->stats(instance_, &stats, &error), TIER_OK) << error.message;
  return stats;
}

std::vector<tier_key> AbiConformance::EnumerateKeys() {
  std::vector<tier_key> keys;
  tier_error error{};
  EXPECT_EQ(table()->enumerate(
                instance_,
                [](void* user, const tier_entry* entry) -> int32_t {
                  static_cast<std::vector<tier_key>*>(user)->push_back(entry->key);
                  return 0;
                },
                &keys, &error),
            TIER_OK)
      << error.message;
  return keys;
}

}  // namespace tier::conformance
