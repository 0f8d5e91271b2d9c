// DiskAbi: libtier_disk.so through dlopen and its one exported symbol, as a server loads it.
#include <dlfcn.h>

#include <cstring>

#include "disk_test_util.h"

namespace tier::disk::test {
namespace {

class DiskAbi : public ::testing::Test {
 protected:
  void SetUp() override {
    handle_ = dlopen(TIER_DISK_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    entry_ = reinterpret_cast<tier_provider_entry_fn>(dlsym(handle_, TIER_PROVIDER_ENTRY_SYMBOL));
    ASSERT_NE(entry_, nullptr);
    ASSERT_EQ(entry_(TIER_ABI_VERSION_MAJOR, TIER_ABI_VERSION_MINOR, host_.services(), &table_),
              TIER_OK);
  }
  void TearDown() override {
    if (handle_) dlclose(handle_);
  }
  tier_instance* OpenOk(const Options& o) {
    std::vector<tier_option> view = o.View();
    tier_instance* inst = nullptr;
    tier_error err{};
    EXPECT_EQ(table_->open(host_.services(), "abi-ns", view.data(), view.size(), &inst, &err),
              TIER_OK)
        << err.message;
    return inst;
  }

  FakeHost host_;
  void* handle_ = nullptr;
  tier_provider_entry_fn entry_ = nullptr;
  const tier_provider* table_ = nullptr;
};

TEST_F(DiskAbi, TableAndVersions) {
  EXPECT_EQ(table_->struct_size, sizeof(tier_provider));
  EXPECT_EQ(table_->abi_major, TIER_ABI_VERSION_MAJOR);
  EXPECT_STREQ(table_->name, "disk");
  const tier_provider* other = nullptr;
  EXPECT_EQ(entry_(TIER_ABI_VERSION_MAJOR + 1, 0, host_.services(), &other), TIER_UNSUPPORTED);
  // Set on a major mismatch too, so that the host can name both versions in its error.
  ASSERT_EQ(other, table_);
  EXPECT_EQ(other->abi_major, TIER_ABI_VERSION_MAJOR);
  EXPECT_EQ(other->abi_minor, TIER_ABI_VERSION_MINOR);
  EXPECT_EQ(entry_(TIER_ABI_VERSION_MAJOR, TIER_ABI_VERSION_MINOR + 5, host_.services(), &other),
            TIER_OK);
}

TEST_F(DiskAbi, BadOptionsAreRefusedWithAMessage) {
  TempDir tmp;
  Options o = BaseOptions(tmp.Sub("tier")).Set("queue_depth", "abc");
  std::vector<tier_option> view = o.View();
  tier_instance* inst = reinterpret_cast<tier_instance*>(0x1);
  tier_error err{};
  EXPECT_EQ(table_->open(host_.services(), "ns", view.data(), view.size(), &inst, &err),
            TIER_INVALID_ARGUMENT);
  EXPECT_EQ(inst, nullptr);
  EXPECT_EQ(err.status, TIER_INVALID_ARGUMENT);
  EXPECT_STREQ(err.message,
               "disk: option 'queue_depth': expected an integer in [1, 1024], got 'abc'");
  EXPECT_EQ(table_->open(host_.services(), "ns", view.data(), view.size(), nullptr, nullptr),
            TIER_INVALID_ARGUMENT);
}

struct Reentrant {
  const tier_provider* table;
  tier_instance* inst;
  Waiter waiter;
  uint64_t entries_seen = 0;
};

TEST_F(DiskAbi, RoundTripThroughTheTableAndReentrantCallback) {
  TempDir tmp;
  tier_instance* inst = OpenOk(BaseOptions(tmp.Sub("tier")));
  ASSERT_NE(inst, nullptr);
  // info with a short struct_size: only fields inside it are written.
  struct {
    tier_info info;
    uint8_t guard[16];
  } small;
  std::memset(&small, 0xEE, sizeof(small));
  small.info.struct_size = offsetof(tier_info, name) + sizeof(const char*);
  ASSERT_EQ(table_->info(inst, &small.info, nullptr), TIER_OK);
  EXPECT_STREQ(small.info.name, "disk");
  const uint8_t* after = reinterpret_cast<const uint8_t*>(&small.info) + small.info.struct_size;
  for (size_t i = 0; i < sizeof(tier_info) - small.info.struct_size; ++i) EXPECT_EQ(after[i], 0xEE);

  Checkpoint cp = StandardCheckpoint(3, 1);
  std::vector<tier_segment> segs = cp.Segments();
  const tier_key key = MakeKey(3);
  Reentrant r{table_, inst, {}, 0};
  // The completion calls back into the provider (stats) before signalling.
  auto cb = [](void* u, const tier_completion* c) {
    auto* self = static_cast<Reentrant*>(u);
    tier_stats s{};
    s.struct_size = sizeof(s);
    self->table->stats(self->inst, &s, nullptr);
    self->entries_seen = s.entries;
    Waiter::Callback(&self->waiter, c);
  };
  tier_error err{};
  ASSERT_EQ(table_->spill(inst, &key, segs.data(), segs.size(), cb, &r, &err), TIER_OK)
      << err.message;
  Done d = r.waiter.Wait();
  ASSERT_EQ(d.status, TIER_OK) << d.message;
  EXPECT_EQ(r.entries_seen, 1u);
  EXPECT_EQ(table_->spill(inst, &key, segs.data(), segs.size(), cb, &r, &err), TIER_ALREADY_EXISTS);
  EXPECT_EQ(err.status, TIER_ALREADY_EXISTS);
  EXPECT_NE(std::strlen(err.message), 0u);

  RestoreTarget t = MakeTarget(cp, 5);
  Waiter w;
  ASSERT_EQ(
      table_->restore(inst, &key, t.segments.data(), t.segments.size(), Waiter::Callback, &w, &err),
      TIER_OK);
  ASSERT_EQ(w.Wait().status, TIER_OK);
  EXPECT_TRUE(t.Equals(cp));
  tier_plan plan{};
  plan.struct_size = sizeof(plan);
  ASSERT_EQ(table_->plan_restore(inst, &key, UINT64_MAX, &plan, nullptr), TIER_OK);
  EXPECT_EQ(plan.decision, static_cast<tier_decision>(TIER_DECISION_RESTORE));
  EXPECT_EQ(table_->remove(inst, &key, nullptr), TIER_OK);
  EXPECT_EQ(table_->remove(inst, &key, &err), TIER_NOT_FOUND);
  EXPECT_EQ(table_->spill(inst, nullptr, segs.data(), segs.size(), cb, &r, &err),
            TIER_INVALID_ARGUMENT);
  table_->close(inst);
}

}  // namespace
}  // namespace tier::disk::test

namespace tier::disk::test {
namespace {

TEST_F(DiskAbi, ProbeFindsVisibleCheckpointsInOneCall) {
  ASSERT_TRUE(TIER_HAS_SLOT(table_, tier_provider, probe));
  TempDir tmp;
  tier_instance* inst = OpenOk(BaseOptions(tmp.Sub("tier")));
  ASSERT_NE(inst, nullptr);
  Checkpoint cp = StandardCheckpoint(20, 1);
  std::vector<tier_segment> segs = cp.Segments();
  const tier_key stored = MakeKey(20);
  Waiter w;
  tier_error err{};
  ASSERT_EQ(table_->spill(inst, &stored, segs.data(), segs.size(), Waiter::Callback, &w, &err),
            TIER_OK)
      << err.message;
  ASSERT_EQ(w.Wait().status, TIER_OK);
  const tier_key keys[3] = {MakeKey(21), stored, MakeKey(22)};
  uint8_t found[3] = {7, 7, 7};
  ASSERT_EQ(table_->probe(inst, keys, 3, found, &err), TIER_OK) << err.message;
  EXPECT_EQ(found[0], 0);
  EXPECT_EQ(found[1], 1);
  EXPECT_EQ(found[2], 0);
  EXPECT_EQ(table_->remove(inst, &stored, nullptr), TIER_OK);
  ASSERT_EQ(table_->probe(inst, &stored, 1, found, nullptr), TIER_OK);
  EXPECT_EQ(found[0], 0) << "removed";
  EXPECT_EQ(table_->probe(inst, keys, 0, found, &err), TIER_INVALID_ARGUMENT);
  EXPECT_NE(std::strlen(err.message), 0u);
  std::vector<tier_key> too_many(TIER_PROBE_MAX_KEYS + 1, stored);
  std::vector<uint8_t> out(too_many.size());
  EXPECT_EQ(table_->probe(inst, too_many.data(), too_many.size(), out.data(), &err),
            TIER_INVALID_ARGUMENT);
  EXPECT_EQ(table_->probe(inst, keys, 1, nullptr, &err), TIER_INVALID_ARGUMENT);
  table_->close(inst);
}

TEST_F(DiskAbi, EnumerateFillsTheTimesOfAbiOneOne) {
  TempDir tmp;
  tier_instance* inst = OpenOk(BaseOptions(tmp.Sub("tier")));
  ASSERT_NE(inst, nullptr);
  Checkpoint cp = StandardCheckpoint(23, 1);
  std::vector<tier_segment> segs = cp.Segments();
  const tier_key key = MakeKey(23);
  Waiter w;
  ASSERT_EQ(table_->spill(inst, &key, segs.data(), segs.size(), Waiter::Callback, &w, nullptr),
            TIER_OK);
  ASSERT_EQ(w.Wait().status, TIER_OK);
  struct Seen {
    uint32_t struct_size = 0;
    uint64_t created_unix_ns = 0, last_used_unix_ns = 0;
  } seen;
  ASSERT_EQ(table_->enumerate(
                inst,
                [](void* u, const tier_entry* e) -> int32_t {
                  auto* s = static_cast<Seen*>(u);
                  s->struct_size = e->struct_size;
                  s->created_unix_ns = e->created_unix_ns;
                  s->last_used_unix_ns = e->last_used_unix_ns;
                  return 0;
                },
                &seen, nullptr),
            TIER_OK);
  EXPECT_GE(seen.struct_size, offsetof(tier_entry, last_used_unix_ns) + sizeof(uint64_t));
  EXPECT_GT(seen.created_unix_ns, 1'600'000'000ull * 1'000'000'000ull) << "Unix ns, after 2020";
  EXPECT_GT(seen.last_used_unix_ns, 1'600'000'000ull * 1'000'000'000ull);
  table_->close(inst);
}

}  // namespace
}  // namespace tier::disk::test
