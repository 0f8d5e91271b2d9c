#include "disk_test_util.h"

#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace tier::disk::test {

std::string TempDir::DefaultRoot() {
#ifdef TIER_DISK_TEST_ROOT
  const std::string root = TIER_DISK_TEST_ROOT;
#else
  const std::string root = "/var/tmp";
#endif
  ::mkdir(root.c_str(), 0700);
  return root;
}

TempDir::TempDir(const std::string& root) {
  std::string templ = root + "/disk-test-XXXXXX";
  char* p = ::mkdtemp(templ.data());
  if (p == nullptr) throw std::runtime_error("mkdtemp under " + root + " failed");
  path_ = p;
}

TempDir::~TempDir() {
  ::nftw(
      path_.c_str(),
      [](const char* fpath, const struct stat*, int, struct FTW*) { return ::remove(fpath); }, 16,
      FTW_DEPTH | FTW_PHYS);
}

tier_key MakeKey(uint64_t seed) {
  tier_key key{};
  std::mt19937_64 rng(seed * 7919 + 1);
  for (size_t i = 0; i < TIER_KEY_BYTES; i += 8) {
    const uint64_t v = rng();
    std::memcpy(key.bytes + i, &v, 8);
  }
  return key;
}

KeyBytes KeyOf(const tier_key& key) {
  KeyBytes out;
  std::memcpy(out.data(), key.bytes, TIER_KEY_BYTES);
  return out;
}

std::vector<uint8_t> RandomBytes(uint64_t bytes, uint64_t seed) {
  std::vector<uint8_t> out(bytes);
  std::mt19937_64 rng(seed);
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const uint64_t v = rng();
    std::memcpy(out.data() + i, &v, 8);
  }
  for (; i < bytes; ++i) out[i] = static_cast<uint8_t>(rng());
  return out;
}

std::vector<uint8_t> Bf16Like(uint64_t bytes, uint64_t seed) {
  std::vector<uint8_t> out(bytes);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  for (size_t i = 0; i + 1 < bytes; i += 2) {
    const float f = dist(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    const uint16_t b = static_cast<uint16_t>(u >> 16);
    std::memcpy(out.data() + i, &b, 2);
  }
  return out;
}

std::vector<uint8_t> Fp32StateLike(uint64_t bytes, uint64_t seed) {
  std::vector<uint8_t> out(bytes);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.01f);
  for (size_t i = 0; i + 3 < bytes; i += 4) {
    float f = (rng() % 4 == 0) ? 0.0f : dist(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u &= 0xFFFFF000u;  // recurrent state after a few decay steps: low mantissa bits mostly settle
    std::memcpy(out.data() + i, &u, 4);
  }
  return out;
}

void Checkpoint::Add(uint32_t kind, uint32_t index, std::vector<uint8_t> bytes) {
  infos.push_back({kind, index, bytes.size()});
  data.push_back(std::move(bytes));
}

std::vector<tier_segment> Checkpoint::Segments() {
  std::vector<tier_segment> out;
  for (size_t i = 0; i < data.size(); ++i) {
    out.push_back({infos[i].kind, infos[i].index, infos[i].length_bytes,
                   data[i].empty() ? nullptr : data[i].data()});
  }
  return out;
}

uint64_t Checkpoint::logical_bytes() const {
  uint64_t n = 0;
  for (const auto& d : data) n += d.size();
  return n;
}

Checkpoint StandardCheckpoint(uint64_t seed, uint64_t scale_mib) {
  Checkpoint cp;
  const uint64_t mib = 1u << 20;
  cp.Add(TIER_SEGMENT_MANIFEST, 0, RandomBytes(1000 + seed % 100, seed + 1));
  cp.Add(TIER_SEGMENT_MAIN_KV, 0, RandomBytes(scale_mib * mib / 2, seed + 2));
  cp.Add(TIER_SEGMENT_MAIN_KV, 1, Bf16Like(scale_mib * mib / 4 + 12346, seed + 3));
  cp.Add(TIER_SEGMENT_STATE_IMAGE, 0, Fp32StateLike(scale_mib * mib / 4 + 4, seed + 4));
  cp.Add(TIER_SEGMENT_HIDDEN_STATE, 0, RandomBytes(10240, seed + 5));
  return cp;
}

RestoreTarget MakeTarget(const Checkpoint& cp, uint64_t misalign) {
  RestoreTarget t;
  for (size_t i = 0; i < cp.data.size(); ++i) {
    const uint64_t len = cp.data[i].size();
    t.storage.emplace_back(new uint8_t[len + 8192]);
    uint8_t* raw = t.storage.back().get();
    uint8_t* base =
        reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 4095) & ~uintptr_t{4095}) +
        misalign;
    std::memset(base, 0xA5, len);
    t.segments.push_back({cp.infos[i].kind, cp.infos[i].index, len, len ? base : nullptr});
  }
  return t;
}

bool RestoreTarget::Equals(const Checkpoint& cp) const {
  for (size_t i = 0; i < cp.data.size(); ++i) {
    if (segments[i].length_bytes != cp.data[i].size()) return false;
    if (cp.data[i].size() && std::memcmp(segments[i].data, cp.data[i].data(), cp.data[i].size()))
      return false;
  }
  return true;
}

void Waiter::Callback(void* user, const tier_completion* c) {
  auto* w = static_cast<Waiter*>(user);
  std::lock_guard lock(w->mu_);
  w->done_.status = c->status;
  w->done_.message = c->message ? c->message : "(null message)";
  w->done_.logical_bytes = c->logical_bytes;
  w->done_.stored_bytes = c->stored_bytes;
  ++w->done_.calls;
  w->cv_.notify_all();
}

Done Waiter::Wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return done_.calls > 0; });
  return done_;
}

int Waiter::calls() {
  std::lock_guard lock(mu_);
  return done_.calls;
}

Options& Options::Set(const std::string& k, const std::string& v) {
  for (auto& [key, value] : kv) {
    if (key == k) {
      value = v;
      return *this;
    }
  }
  kv.emplace_back(k, v);
  return *this;
}

std::vector<tier_option> Options::View() const {
  std::vector<tier_option> out;
  for (const auto& [k, v] : kv) out.push_back({k.c_str(), v.c_str()});
  return out;
}

Options BaseOptions(const std::string& dir, uint64_t capacity_bytes) {
  Options o;
  o.Set("dir", dir).Set("capacity_bytes", std::to_string(capacity_bytes));
  o.Set("durability", "none");  // fast tests; durability has its own tests
  o.Set("staging_mib", "8");
  return o;
}

Result<std::unique_ptr<DiskProvider>> OpenDisk(FakeHost& host, const std::string& ns,
                                               const Options& options, Seams seams) {
  const std::vector<tier_option> view = options.View();
  return DiskProvider::Open(host.services(), ns, view, std::move(seams));
}

Done SpillSync(DiskProvider& p, const tier_key& key, Checkpoint& cp, Status* sync) {
  Waiter w;
  std::vector<tier_segment> segs = cp.Segments();
  Status s = p.Spill(&key, segs.data(), static_cast<uint32_t>(segs.size()), Waiter::Callback, &w);
  if (sync) *sync = s;
  if (!s.ok()) {
    Done d;
    d.status = s.code();
    d.message = s.message();
    return d;
  }
  Done d = w.Wait();
  EXPECT_EQ(d.calls, 1);
  return d;
}

Done RestoreSync(DiskProvider& p, const tier_key& key, RestoreTarget& target, Status* sync) {
  Waiter w;
  Status s = p.Restore(&key, target.segments.data(), static_cast<uint32_t>(target.segments.size()),
                       Waiter::Callback, &w);
  if (sync) *sync = s;
  if (!s.ok()) {
    Done d;
    d.status = s.code();
    d.message = s.message();
    return d;
  }
  Done d = w.Wait();
  EXPECT_EQ(d.calls, 1);
  return d;
}

uint64_t FileBytes(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return static_cast<uint64_t>(-1);
  return static_cast<uint64_t>(st.st_size);
}

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> names;
  DIR* d = ::opendir(path.c_str());
  if (!d) return names;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

uint64_t SumCheckpointFileBytes(const std::string& dir) {
  uint64_t total = 0;
  for (const std::string& n : ListDir(dir)) {
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".ckpt") == 0) total += FileBytes(dir + "/" + n);
  }
  return total;
}

}  // namespace tier::disk::test
