#include "conformance_tools.h"

#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "checkpoint_bytes.h"
#include "tier/check.h"

namespace tier::conformance {

// ---- CompletionHold -----------------------------------------------------------------------------

struct CompletionHold::Blocker {
  std::shared_ptr<Gate> gate;
  std::shared_ptr<std::atomic<int>> blocked;
  TestCheckpoint checkpoint;
  std::vector<tier_segment> segments;
  std::thread::id submitter;
  std::atomic<bool> submitting{false};
  std::atomic<bool> ran_inline{false};
  std::atomic<bool> entered{false};
  std::mutex mutex;
  std::condition_variable cv;
  int calls = 0;  // guarded by mutex
};

namespace {
std::atomic<int> g_blocker_serial{0};
}  // namespace

CompletionHold::CompletionHold(const tier_provider* table, tier_instance* instance,
                               uint32_t max_inflight_ops)
    : table_(table), instance_(instance) {
  constexpr int kMaxBlockers = 12;
  const int most = max_inflight_ops == 0  // no limit
                       ? kMaxBlockers
                       : static_cast<int>(std::min<uint32_t>(kMaxBlockers, max_inflight_ops));
  auto first_latency = std::chrono::milliseconds(0);
  for (int i = 0; i < most; ++i) {
    auto* b = new Blocker;
    b->gate = state_;
    b->blocked = blocked_;
    b->checkpoint = MakeCheckpoint(
        "hold-" + std::to_string(::getpid()) + "-" + std::to_string(g_blocker_serial.fetch_add(1)),
        {{TIER_SEGMENT_MAIN_KV, 0, 4096}});
    b->segments = b->checkpoint.Segments();
    b->submitter = std::this_thread::get_id();
    b->submitting.store(true);
    tier_error error{};
    const auto submitted = std::chrono::steady_clock::now();
    const tier_status accepted =
        table_->spill(instance_, &b->checkpoint.key, b->segments.data(), 1, &Callback, b, &error);
    b->submitting.store(false);
    if (accepted != TIER_OK) {
      refusal_ = std::string("a blocker spill was refused: ") + tier_status_name(accepted) + ": " +
                 error.message;
      delete b;
      break;
    }
    blockers_.push_back(b);
    if (b->ran_inline.load()) {
      inline_ = true;
      break;
    }
    // The first blocker has every thread free: wait for it as long as any operation. Later ones
    // get four times its latency (at least 150 ms) to start before the provider counts as held.
    const auto wait = i == 0 ? std::chrono::duration_cast<std::chrono::milliseconds>(OpDeadline())
                             : std::max(std::chrono::milliseconds(150), 4 * first_latency);
    std::unique_lock lock(b->mutex);
    const bool entered =
        b->cv.wait_for(lock, wait, [b] { return b->entered.load() || b->calls > 0; });
    if (i == 0) {
      first_latency = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - submitted);
    }
    if (!entered) {
      held_ = true;
      break;
    }
  }
}

CompletionHold::~CompletionHold() {
  Release();
}

std::string CompletionHold::why_not_held() const {
  if (held_) return "";
  if (inline_) return "it completes operations on the caller's thread: nothing stays in flight";
  if (!refusal_.empty()) return refusal_;
  return "every blocker's completion started: it runs completions on more threads than the " +
         std::to_string(blockers_.size()) + " the suite blocks";
}

void CompletionHold::Callback(void* user_data, const tier_completion* completion) {
  auto* b = static_cast<Blocker*>(user_data);
  const bool on_submitter = b->submitting.load() && std::this_thread::get_id() == b->submitter;
  bool passes = false;
  {
    std::lock_guard gate(b->gate->mutex);
    passes = b->gate->passes == std::this_thread::get_id();
  }
  if (on_submitter) {
    b->ran_inline.store(true);
  } else if (!passes) {
    {
      std::lock_guard lock(b->mutex);
      b->entered.store(true);
    }
    b->cv.notify_all();
    b->blocked->fetch_add(1);
    std::unique_lock gate(b->gate->mutex);
    if (!b->gate->cv.wait_for(gate, OpDeadline(), [b] { return b->gate->open; })) {
      b->gate->timed_out.store(true);
    }
    gate.unlock();
    b->blocked->fetch_sub(1);
  }
  (void)completion;
  std::lock_guard lock(b->mutex);
  ++b->calls;
  b->cv.notify_all();
}

void CompletionHold::PassOnThisThread() {
  std::lock_guard lock(state_->mutex);
  state_->passes = std::this_thread::get_id();
}

void CompletionHold::Release() {
  if (released_) return;
  released_ = true;
  {
    std::lock_guard lock(state_->mutex);
    state_->open = true;
  }
  state_->cv.notify_all();
  for (Blocker* b : blockers_) {
    std::unique_lock lock(b->mutex);
    if (b->cv.wait_for(lock, OpDeadline(), [b] { return b->calls > 0; })) {
      lock.unlock();
      delete b;
    }  // else leaked: a late completion still finds it
  }
  blockers_.clear();
}

// ---- guard pages --------------------------------------------------------------------------------

namespace {

struct GuardEntry {
  std::atomic<uintptr_t> start{0};
  uintptr_t end = 0;
  char what[160] = {};
};
constexpr size_t kMaxGuards = 16384;
GuardEntry* const g_guards = new GuardEntry[kMaxGuards];  // never freed (a handler may read it)
std::mutex g_guard_mutex;
std::once_flag g_handler_once;
// Set while this thread scans process memory: a fault there skips the region (one unmapped under
// the scan) instead of ending the run.
thread_local sigjmp_buf* t_scan_jump = nullptr;

void WriteAll(const char* text) {
  size_t left = strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(2, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

void OnFault(int signal, siginfo_t* info, void*) {
  if (t_scan_jump != nullptr) siglongjmp(*t_scan_jump, 1);
  const auto at = reinterpret_cast<uintptr_t>(info->si_addr);
  for (size_t i = 0; i < kMaxGuards; ++i) {
    const uintptr_t start = g_guards[i].start.load();
    if (start != 0 && at >= start && at < g_guards[i].end) {
      WriteAll(
          "\n[  FAILED  ] tier-conformance: the provider touched the guard page right past the "
          "end of ");
      WriteAll(g_guards[i].what);
      WriteAll(": it reads or writes past the end of a buffer the host lent it\n");
      ::_exit(1);
    }
  }
  ::signal(signal, SIG_DFL);  // not ours: the default action, at once
}

void InstallHandler() {
  struct sigaction action {};
  action.sa_sigaction = &OnFault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGSEGV, &action, nullptr);
  ::sigaction(SIGBUS, &action, nullptr);
}

size_t PageBytes() {
  return static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace

void RegisterGuard(const void* page, size_t bytes, const char* what) {
  std::call_once(g_handler_once, InstallHandler);
  std::lock_guard lock(g_guard_mutex);
  for (size_t i = 0; i < kMaxGuards; ++i) {
    if (g_guards[i].start.load() != 0) continue;
    g_guards[i].end = reinterpret_cast<uintptr_t>(page) + bytes;
    std::snprintf(g_guards[i].what, sizeof(g_guards[i].what), "%s", what);
    g_guards[i].start.store(reinterpret_cast<uintptr_t>(page));
    return;
  }
}

void UnregisterGuard(const void* page) {
  std::lock_guard lock(g_guard_mutex);
  for (size_t i = 0; i < kMaxGuards; ++i) {
    if (g_guards[i].start.load() == reinterpret_cast<uintptr_t>(page)) g_guards[i].start.store(0);
  }
}

GuardedBuffers::GuardedBuffers(const std::vector<tier_segment_info>& layout, uint64_t alignment)
    : layout_(layout) {
  const size_t page = PageBytes();
  alignment = std::max<uint64_t>(1, alignment);
  for (size_t i = 0; i < layout.size(); ++i) {
    Region r;
    r.length_bytes = layout[i].length_bytes;
    const size_t room = (r.length_bytes + alignment + page - 1) / page * page;
    r.mapped_bytes = room + page;
    r.base =
        ::mmap(nullptr, r.mapped_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    TIER_CHECK(r.base != MAP_FAILED);
    std::byte* guard = static_cast<std::byte*>(r.base) + room;
    TIER_CHECK(::mprotect(guard, page, PROT_NONE) == 0);
    auto start = reinterpret_cast<uintptr_t>(guard) - r.length_bytes;
    start -= start % alignment;
    r.data = reinterpret_cast<std::byte*>(start);
    r.canary_bytes =
        static_cast<size_t>(reinterpret_cast<uintptr_t>(guard) - start - r.length_bytes);
    std::fill(r.data + r.length_bytes, guard, std::byte{0xA5});
    const std::string what =
        "segment " + std::to_string(i) + " (kind " + std::to_string(layout[i].kind) + " index " +
        std::to_string(layout[i].index) + ", " + std::to_string(r.length_bytes) + " bytes)";
    RegisterGuard(guard, page, what.c_str());
    regions_.push_back(r);
  }
}

GuardedBuffers::~GuardedBuffers() {
  Unmap();
}

std::vector<tier_segment> GuardedBuffers::Segments() const {
  std::vector<tier_segment> out;
  for (size_t i = 0; i < layout_.size(); ++i) {
    out.push_back({layout_[i].kind, layout_[i].index, layout_[i].length_bytes, regions_[i].data});
  }
  return out;
}

std::span<std::byte> GuardedBuffers::data(size_t i) const {
  return {regions_[i].data, regions_[i].length_bytes};
}

void GuardedBuffers::MakeReadOnly() {
  const size_t page = PageBytes();
  for (Region& r : regions_) {
    TIER_CHECK(::mprotect(r.base, r.mapped_bytes - page, PROT_READ) == 0);
  }
}

bool GuardedBuffers::CanariesIntact() const {
  for (const Region& r : regions_) {
    for (size_t i = 0; i < r.canary_bytes; ++i) {
      if (r.data[r.length_bytes + i] != std::byte{0xA5}) return false;
    }
  }
  return true;
}

void GuardedBuffers::Unmap() {
  const size_t page = PageBytes();
  for (Region& r : regions_) {
    if (r.base == nullptr) continue;
    // The data pages go first (a late write faults unregistered: a crash, not a silent write);
    // the guard is unregistered with them.
    UnregisterGuard(static_cast<std::byte*>(r.base) + r.mapped_bytes - page);
    ::munmap(r.base, r.mapped_bytes);
    r.base = nullptr;
  }
}

// ---- process memory -----------------------------------------------------------------------------

namespace {

// Damages every copy of `needle` in [start, end) outside the spare range. Reads memory the
// sanitizers do not know as ours (redzones, other allocators' pages): uninstrumented, and by hand
// rather than through memmem, which they intercept.
#if defined(__clang__)
__attribute__((no_sanitize("address", "thread", "memory")))
#elif defined(__GNUC__)
__attribute__((no_sanitize_address, no_sanitize_thread))
#endif
size_t
DamageRegion(uintptr_t start, uintptr_t end, const std::byte* needle, size_t needle_bytes,
             uintptr_t spare_start, uintptr_t spare_end) {
  size_t damaged = 0;
  const auto first = static_cast<unsigned char>(needle[0]);
  for (uintptr_t at = start; at + needle_bytes <= end; ++at) {
    const auto* p = reinterpret_cast<const unsigned char*>(at);
    if (*p != first) continue;
    size_t i = 1;
    while (i < needle_bytes && p[i] == static_cast<unsigned char>(needle[i])) ++i;
    if (i < needle_bytes || (at >= spare_start && at < spare_end)) continue;
    auto* byte = reinterpret_cast<unsigned char*>(at) + needle_bytes / 2;
    *byte = static_cast<unsigned char>(*byte ^ 0x5A);
    ++damaged;
  }
  return damaged;
}

}  // namespace

size_t DamageCopiesInProcessMemory(std::span<const std::byte> needle,
                                   std::span<const std::byte> spare) {
  std::call_once(g_handler_once, InstallHandler);
  std::ifstream maps("/proc/self/maps");
  std::vector<std::pair<uintptr_t, uintptr_t>> regions;
  for (std::string line; std::getline(maps, line);) {
    std::istringstream in(line);
    std::string range, perms, offset, device, inode, path;
    in >> range >> perms >> offset >> device >> inode;
    std::getline(in, path);
    path.erase(0, std::min(path.size(), path.find_first_not_of(' ')));
    if (perms != "rw-p" || inode != "0" || !(path.empty() || path == "[heap]")) continue;
    const size_t dash = range.find('-');
    const uintptr_t start = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (end - start > (uintptr_t{4} << 30)) continue;  // sanitizer shadow and the like
    regions.push_back({start, end});
  }
  const auto spare_start = reinterpret_cast<uintptr_t>(spare.data());
  const uintptr_t spare_end = spare_start + spare.size();
  size_t damaged = 0;
  for (auto [start, end] : regions) {
    sigjmp_buf jump;
    if (sigsetjmp(jump, 1) == 0) {
      t_scan_jump = &jump;
      damaged += DamageRegion(start, end, needle.data(), needle.size(), spare_start, spare_end);
    }
    t_scan_jump = nullptr;
  }
  return damaged;
}

uint64_t WallNowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

std::vector<tier_key> CollidingKeys(const std::string& label, size_t count) {
  const tier_key base = KeyFromText("conformance:colliding:" + label);
  std::set<std::string> seen;
  std::vector<tier_key> keys;
  for (size_t i = 0; keys.size() < count; ++i) {
    tier_key k = base;
    const auto j = static_cast<uint32_t>(i / 4);
    switch (i % 4) {
      case 0:  // 31 bytes shared, the last ones differ
        k.bytes[31] = static_cast<uint8_t>(j);
        k.bytes[30] = static_cast<uint8_t>((j >> 8) ^ 0x11);
        break;
      case 1:  // the first bytes differ, the other 30 shared
        k.bytes[0] = static_cast<uint8_t>(j);
        k.bytes[1] = static_cast<uint8_t>((j >> 8) ^ 0x22);
        break;
      case 2: {  // the first and last 8 bytes shared, the middle differs
        const uint64_t mid = (j + 1) * 0x9E3779B97F4A7C15ull;
        std::memcpy(k.bytes + 16, &mid, 8);
        k.bytes[12] ^= 0x33;
        break;
      }
      default: {  // the first 8 bytes shared, the rest unrelated
        k = KeyFromText("conformance:colliding:" + label + ":" + std::to_string(j));
        std::memcpy(k.bytes, base.bytes, 8);
      }
    }
    const std::string text(reinterpret_cast<const char*>(k.bytes), TIER_KEY_BYTES);
    if (seen.insert(text).second) keys.push_back(k);
  }
  return keys;
}

}  // namespace tier::conformance
