#include "conformance_fixture.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <set>
#include <thread>

#include "checkpoint_bytes.h"

namespace tier::conformance {
namespace {

std::mutex g_stuck_mutex;
std::set<std::string> g_stuck_targets;  // guarded by g_stuck_mutex
std::string g_current_target;           // guarded by g_stuck_mutex; set by SetUp
// guarded by g_stuck_mutex; never freed, nor destroyed at exit: LeakSanitizer checks after the
// static destructors have run, and must still find these states reachable.
auto* const g_unfinished = new std::vector<OpState*>;

void MarkCurrentTargetStuck() {
  std::lock_guard lock(g_stuck_mutex);
  g_stuck_targets.insert(g_current_target);
}

void SetCurrentTarget(const std::string& path) {
  std::lock_guard lock(g_stuck_mutex);
  g_current_target = path;
}

std::string DeadlineText() {
  return std::to_string(OpDeadline().count()) + " s (--tier-op-timeout-s)";
}

// What a completion must look like whatever its status; failures are reported from the
// provider's thread (GoogleTest records them in the running test).
void CheckCompletion(const tier_completion* completion, int previous_calls) {
  if (previous_calls > 0) ADD_FAILURE() << "a completion ran a second time for one operation";
  if (completion == nullptr) {
    ADD_FAILURE() << "the completion callback got a NULL tier_completion";
    return;
  }
  if (completion->struct_size < offsetof(tier_completion, duration_ns) + sizeof(uint64_t)) {
    ADD_FAILURE() << "completion struct_size " << completion->struct_size
                  << " is smaller than a 1.0 tier_completion";
  }
  if (completion->message == nullptr) {
    ADD_FAILURE() << "completion message is NULL (status " << tier_status_name(completion->status)
                  << "): the ABI says never NULL, \"\" if none";
  } else if (completion->status != TIER_OK && completion->message[0] == '\0') {
    ADD_FAILURE() << "a completion with status " << tier_status_name(completion->status)
                  << " carries no message";
  }
}

}  // namespace

std::chrono::seconds OpDeadline() {
  return std::chrono::seconds(Options().op_timeout_s);
}

bool TargetIsStuck(const std::string& path) {
  std::lock_guard lock(g_stuck_mutex);
  return g_stuck_targets.count(path) > 0;
}

OpRecord::OpRecord()
    : state_(new OpState),
      calls(state_->calls),
      status(state_->status),
      message(state_->message),
      logical_bytes(state_->logical_bytes),
      stored_bytes(state_->stored_bytes),
      duration_ns(state_->duration_ns) {}

OpRecord::~OpRecord() {
  bool completed;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);  // a callback in progress finishes first
    completed = state_->calls.load() > 0;
  }
  if (completed) {
    delete state_;
    return;
  }
  // Refused, or accepted and never completed (a test that gave up): a late completion must find
  // live memory, so the state stays, reachable, until the process ends.
  state_->started_counter = nullptr;
  std::lock_guard lock(g_stuck_mutex);
  g_unfinished->push_back(state_);
}

void OpRecord::Callback(void* user_data, const tier_completion* completion) {
  auto* state = static_cast<OpState*>(user_data);
  state->started.store(true);
  if (state->started_counter != nullptr) state->started_counter->fetch_add(1);
  CheckCompletion(completion, state->calls.load());
  std::lock_guard<std::mutex> lock(state->mutex);
  if (completion != nullptr) {
    state->status = completion->status;
    state->message = completion->message != nullptr ? completion->message : "(NULL message)";
    state->logical_bytes = completion->logical_bytes;
    state->stored_bytes = completion->stored_bytes;
    state->duration_ns = completion->duration_ns;
  }
  state->calls.fetch_add(1);
  state->cv.notify_all();
}

bool OpRecord::Wait(const char* what) {
  std::unique_lock<std::mutex> lock(state_->mutex);
  if (state_->cv.wait_for(lock, OpDeadline(), [this] { return state_->calls.load() > 0; })) {
    return true;
  }
  lock.unlock();
  MarkCurrentTargetStuck();
  ADD_FAILURE() << "an accepted " << what << " never completed within " << DeadlineText()
                << ": its completion callback did not run";
  return false;
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
    if (!sim::SegmentBytesMatch(key, layout[i].kind, layout[i].index, buffers[i])) return false;
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
    sim::FillSegmentBytes(checkpoint.key, s.kind, s.index, checkpoint.buffers.back());
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
  SetCurrentTarget(target.path);
  if (TargetIsStuck(target.path)) {
    GTEST_SKIP() << "not run: an operation of " << target.name
                 << " never completed in an earlier test (see that failure), so its instances "
                    "cannot be trusted to complete or close";
  }
  auto library = PluginLibrary::Load(target.path, host_.table());
  ASSERT_TRUE(library.ok()) << library.status().message();
  library_ = library.value();
  // Never unmapped while the run lasts: a provider's threads may outlive the instance a test
  // gave up on (a stuck operation, a close that returned early) and must still find their code.
  ::dlopen(target.path.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  for (std::string option : target.options) {
    // Every "{tmpdir}" (dirs=A,B names it twice), the same directory each time.
    for (size_t at = option.find("{tmpdir}"); at != std::string::npos;
         at = option.find("{tmpdir}", at)) {
      if (!tmpdir_) tmpdir_ = std::make_unique<test::ScopedTempDir>("tier-conformance");
      option.replace(at, 8, tmpdir_->path());
      at += tmpdir_->path().size();
    }
    options_.push_back(option);
  }
  Open();
  if (HasFatalFailure() || instance_ == nullptr) return;
  info_.struct_size = sizeof(info_);
  ASSERT_EQ(table()->info(instance_, &info_, nullptr), TIER_OK);
  const tier_stats stats = Stats();
  persistent_ = (info_.capabilities & TIER_CAP_PERSISTENT) != 0;
  switch (target.expectation) {
    case Expectation::kAbsent:
      absent_ = true;
      break;
    case Expectation::kFull:
      absent_ = false;
      break;
    case Expectation::kAuto:
      absent_ = stats.capacity_bytes == 0 || (info_.capabilities & TIER_CAP_ZERO_CAPACITY) != 0;
  }
}

void AbiConformance::TearDown() {
  Close();
}

tier_status AbiConformance::TryOpen(const std::optional<std::string>& namespace_id,
                                    tier_instance** out, tier_error* error) {
  return TryOpenWith(host_.table(), namespace_id, {}, out, error);
}

tier_status AbiConformance::TryOpenWith(const tier_host_services* host,
                                        const std::optional<std::string>& namespace_id,
                                        const std::vector<std::string>& extra_options,
                                        tier_instance** out, tier_error* error) {
  std::vector<std::string> all = extra_options;
  all.insert(all.end(), options_.begin(), options_.end());
  std::vector<std::string> keys, values;
  for (const std::string& option : all) {
    const size_t eq = option.find('=');
    keys.push_back(option.substr(0, eq));
    values.push_back(eq == std::string::npos ? "" : option.substr(eq + 1));
  }
  std::vector<tier_option> raw;
  for (size_t i = 0; i < keys.size(); ++i) raw.push_back({keys[i].c_str(), values[i].c_str()});
  const std::string ns = namespace_id.value_or(GetParam().namespace_id);
  return table()->open(host, ns.c_str(), raw.data(), static_cast<uint32_t>(raw.size()), out, error);
}

tier_instance* AbiConformance::Open(const std::optional<std::string>& namespace_id) {
  Close();
  tier_error error{};
  const tier_status status = TryOpen(namespace_id, &instance_, &error);
  EXPECT_EQ(status, TIER_OK) << "open failed: " << error.message;
  if (status != TIER_OK) instance_ = nullptr;
  return instance_;
}

void AbiConformance::Close() {
  tier_instance* const instance = std::exchange(instance_, nullptr);
  if (instance == nullptr) return;
  if (TargetIsStuck(GetParam().path)) {
    std::printf(
        "note: leaving an instance of %s open: one of its operations never completed, so "
        "close would wait for ever\n",
        GetParam().name.c_str());
    return;
  }
  std::shared_ptr<PluginLibrary> library = library_;  // keeps the code loaded for the thread
  ReturnsWithinDeadline("close", [library, instance] { library->table()->close(instance); });
}

bool AbiConformance::ReturnsWithinDeadline(const char* what, std::function<void()> call) {
  auto returned = std::make_shared<std::promise<void>>();
  std::future<void> done = returned->get_future();
  std::thread([call = std::move(call), returned] {
    call();
    returned->set_value();
  }).detach();
  if (done.wait_for(OpDeadline()) == std::future_status::ready) return true;
  MarkCurrentTargetStuck();
  ADD_FAILURE() << what << " did not return within " << DeadlineText()
                << " (an accepted operation that never completes, or a deadlock)";
  return false;
}

tier_status AbiConformance::Spill(TestCheckpoint& checkpoint) {
  OpRecord record;
  auto segments = checkpoint.Segments();
  tier_error error{};
  const tier_status accepted = table()->spill(instance_, &checkpoint.key, segments.data(),
                                              static_cast<uint32_t>(segments.size()),
                                              OpRecord::Callback, record.cookie(), &error);
  if (accepted != TIER_OK) {
    EXPECT_EQ(record.calls.load(), 0) << "a refused spill must not call back";
    EXPECT_NE(error.message[0], '\0') << "a refusal says why";
    return accepted;
  }
  if (!record.Wait("spill")) return TIER_INTERNAL;
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
  const tier_status accepted = table()->restore(instance_, &checkpoint.key, segments.data(),
                                                static_cast<uint32_t>(segments.size()),
                                                OpRecord::Callback, record.cookie(), &error);
  if (accepted != TIER_OK) {
    EXPECT_EQ(record.calls.load(), 0) << "a refused restore must not call back";
    EXPECT_NE(error.message[0], '\0') << "a refusal says why";
    return accepted;
  }
  if (!record.Wait("restore")) return TIER_INTERNAL;
  EXPECT_EQ(record.calls.load(), 1);
  if (record.status == TIER_OK) {
    EXPECT_EQ(record.logical_bytes, checkpoint.logical_bytes())
        << "a restore completion's logical_bytes is the bytes of segment data restored";
  }
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
