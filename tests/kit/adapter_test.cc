// ProviderAdapter: the C table plugins/kit generates from a C++ class keeps the rules of the
// boundary that tier/provider/adapter.h promises, whatever the class does.
#include "tier/provider/adapter.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

namespace {

using tier::Result;
using tier::Status;

// A provider whose every operation does what `mode` says.
struct Fake {
  enum class Mode { kOk, kNotFound, kLongMessage, kBadAlloc, kRuntimeError, kThrowsInt };
  static inline int live = 0;
  static inline std::string last_namespace;
  static inline bool destructor_throws = false;
  Mode mode = Mode::kOk;

  Fake() { ++live; }
  ~Fake() noexcept(false) {
    --live;
    if (destructor_throws) throw std::runtime_error("close failed");
  }

  static Result<std::unique_ptr<Fake>> Open(const tier_host_services*, std::string namespace_id,
                                            std::span<const tier_option> options) {
    last_namespace = namespace_id;
    if (!options.empty() && std::strcmp(options[0].key, "fail") == 0) {
      return Status::InvalidArgument("fake: option 'fail'");
    }
    if (!options.empty() && std::strcmp(options[0].key, "throw") == 0) throw std::bad_alloc();
    return std::make_unique<Fake>();
  }

  Status Do() {
    switch (mode) {
      case Mode::kOk:
        return Status::Ok();
      case Mode::kNotFound:
        return Status::NotFound("fake: not stored");
      case Mode::kLongMessage:
        return Status::IoError(std::string(4 * TIER_ERROR_MESSAGE_BYTES, 'x'));
      case Mode::kBadAlloc:
        throw std::bad_alloc();
      case Mode::kRuntimeError:
        throw std::runtime_error("boom");
      case Mode::kThrowsInt:
        throw 7;
    }
    return Status::Ok();
  }
  Status Info(tier_info*) { return Do(); }
  Status Stats(tier_stats*) { return Do(); }
  Status Stat(const tier_key*, tier_stat_result*, tier_segment_info*, uint32_t) { return Do(); }
  Status Spill(const tier_key*, const tier_segment*, uint32_t, tier_done_fn, void*) { return Do(); }
  Status Restore(const tier_key*, const tier_segment*, uint32_t, tier_done_fn, void*) {
    return Do();
  }
  Status Remove(const tier_key*) { return Do(); }
  Status Enumerate(tier_enumerate_fn, void*) { return Do(); }
  Status PlanRestore(const tier_key*, uint64_t, tier_plan*) { return Do(); }
  Status Probe(const tier_key*, uint32_t, uint8_t*) { return Do(); }
};

constexpr tier::provider::ProviderNames kFakeNames{"fake", "9.9.9"};
using FakeAdapter = tier::provider::ProviderAdapter<Fake, kFakeNames>;

// A provider that ends its own instances (Open hands out a raw pointer).
struct SelfClosing : Fake {
  static inline int closed = 0;
  static Result<SelfClosing*> Open(const tier_host_services*, const char*,
                                   std::span<const tier_option>) {
    return new SelfClosing;
  }
  static void CloseInstance(SelfClosing* self) {
    ++closed;
    delete self;
  }
};
constexpr tier::provider::ProviderNames kSelfClosingNames{"selfclosing", "1.0.0"};
using SelfClosingAdapter = tier::provider::ProviderAdapter<SelfClosing, kSelfClosingNames>;

class ProviderAdapter : public ::testing::Test {
 protected:
  void SetUp() override {
    Fake::destructor_throws = false;
    ASSERT_EQ(table_->open(nullptr, "ns", nullptr, 0, &instance_, &error_), TIER_OK);
    ASSERT_NE(instance_, nullptr);
  }
  void TearDown() override {
    table_->close(instance_);
    EXPECT_EQ(Fake::live, 0) << "close did not end the instance";
  }
  Fake* fake() { return reinterpret_cast<Fake*>(instance_); }

  const tier_provider* table_ = FakeAdapter::Table();
  tier_instance* instance_ = nullptr;
  tier_error error_{};
};

TEST_F(ProviderAdapter, TableCarriesItsNamesVersionsAndEveryOperation) {
  EXPECT_EQ(table_->struct_size, sizeof(tier_provider));
  EXPECT_EQ(table_->abi_major, TIER_ABI_VERSION_MAJOR);
  EXPECT_EQ(table_->abi_minor, TIER_ABI_VERSION_MINOR);
  EXPECT_STREQ(table_->name, "fake");
  EXPECT_STREQ(table_->version, "9.9.9");
  for (const void* slot :
       {(void*)table_->open, (void*)table_->close, (void*)table_->info, (void*)table_->stats,
        (void*)table_->stat, (void*)table_->spill, (void*)table_->restore, (void*)table_->remove,
        (void*)table_->enumerate, (void*)table_->plan_restore, (void*)table_->probe}) {
    EXPECT_NE(slot, nullptr);
  }
}

TEST_F(ProviderAdapter, EntryHandsOutTheTableEvenOnAMajorMismatch) {
  const tier_provider* out = nullptr;
  EXPECT_EQ(FakeAdapter::Entry(TIER_ABI_VERSION_MAJOR, &out), TIER_OK);
  EXPECT_EQ(out, table_);
  out = nullptr;
  EXPECT_EQ(FakeAdapter::Entry(TIER_ABI_VERSION_MAJOR + 1, &out), TIER_UNSUPPORTED);
  EXPECT_EQ(out, table_) << "the host reads the table's versions to name both";
  EXPECT_EQ(FakeAdapter::Entry(TIER_ABI_VERSION_MAJOR, nullptr), TIER_INVALID_ARGUMENT);
}

TEST_F(ProviderAdapter, AStatusCrossesAsCodeAndMessage) {
  fake()->mode = Fake::Mode::kNotFound;
  tier_key key{};
  EXPECT_EQ(table_->remove(instance_, &key, &error_), TIER_NOT_FOUND);
  EXPECT_EQ(error_.status, TIER_NOT_FOUND);
  EXPECT_STREQ(error_.message, "fake: not stored");
  EXPECT_EQ(table_->remove(instance_, &key, nullptr), TIER_NOT_FOUND) << "a NULL error is fine";

  fake()->mode = Fake::Mode::kLongMessage;
  EXPECT_EQ(table_->stats(instance_, nullptr, &error_), TIER_IO_ERROR);
  EXPECT_EQ(std::strlen(error_.message), TIER_ERROR_MESSAGE_BYTES - 1u) << "cut to the buffer";

  fake()->mode = Fake::Mode::kOk;
  error_.status = TIER_INTERNAL;
  EXPECT_EQ(table_->info(instance_, nullptr, &error_), TIER_OK);
  EXPECT_EQ(error_.status, TIER_OK) << "an ok call reports ok too";
}

TEST_F(ProviderAdapter, NoExceptionCrossesAndEachNamesItsOperation) {
  tier_key key{};
  tier_plan plan{};
  fake()->mode = Fake::Mode::kBadAlloc;
  EXPECT_EQ(table_->plan_restore(instance_, &key, 1, &plan, &error_), TIER_INTERNAL);
  EXPECT_STREQ(error_.message, "fake: plan_restore: out of memory");
  fake()->mode = Fake::Mode::kRuntimeError;
  EXPECT_EQ(table_->spill(instance_, &key, nullptr, 0, nullptr, nullptr, &error_), TIER_INTERNAL);
  EXPECT_STREQ(error_.message, "fake: spill: internal error: boom");
  fake()->mode = Fake::Mode::kThrowsInt;
  EXPECT_EQ(table_->probe(instance_, &key, 1, nullptr, &error_), TIER_INTERNAL);
  EXPECT_STREQ(error_.message, "fake: probe: internal error");
  EXPECT_EQ(table_->restore(instance_, &key, nullptr, 0, nullptr, nullptr, nullptr), TIER_INTERNAL);
}

TEST_F(ProviderAdapter, ANullInstanceIsRefusedBeforeTheClass) {
  tier_key key{};
  EXPECT_EQ(table_->stat(nullptr, &key, nullptr, nullptr, 0, &error_), TIER_INVALID_ARGUMENT);
  EXPECT_STREQ(error_.message, "fake: NULL instance");
  EXPECT_EQ(table_->enumerate(nullptr, nullptr, nullptr, nullptr), TIER_INVALID_ARGUMENT);
  table_->close(nullptr);  // a no-op
}

TEST_F(ProviderAdapter, OpenRefusesNullArgumentsAndHostServicesOfAnotherMajor) {
  tier_instance* other = reinterpret_cast<tier_instance*>(&error_);  // not NULL before the call
  EXPECT_EQ(table_->open(nullptr, "ns", nullptr, 0, nullptr, &error_), TIER_INVALID_ARGUMENT);
  EXPECT_EQ(table_->open(nullptr, nullptr, nullptr, 0, &other, &error_), TIER_INVALID_ARGUMENT);
  EXPECT_EQ(other, nullptr) << "instance_out is set to NULL before anything else is refused";
  EXPECT_STREQ(error_.message, "fake: open: NULL namespace");
  EXPECT_EQ(table_->open(nullptr, "ns", nullptr, 1, &other, &error_), TIER_INVALID_ARGUMENT);
  tier_host_services host{};
  host.struct_size = sizeof(host);
  host.abi_major = TIER_ABI_VERSION_MAJOR + 1;
  EXPECT_EQ(table_->open(&host, "ns", nullptr, 0, &other, &error_), TIER_UNSUPPORTED);
  EXPECT_EQ(Fake::live, 1) << "nothing was opened by the refused calls";
}

TEST_F(ProviderAdapter, OpenPassesItsArgumentsAndReportsTheClasssRefusal) {
  tier_instance* other = nullptr;
  const tier_option fail{"fail", "1"};
  EXPECT_EQ(table_->open(nullptr, "tenant-b", &fail, 1, &other, &error_), TIER_INVALID_ARGUMENT);
  EXPECT_EQ(Fake::last_namespace, "tenant-b");
  EXPECT_STREQ(error_.message, "fake: option 'fail'");
  EXPECT_EQ(other, nullptr);
  const tier_option throws{"throw", "1"};
  EXPECT_EQ(table_->open(nullptr, "ns", &throws, 1, &other, &error_), TIER_INTERNAL);
  EXPECT_STREQ(error_.message, "fake: open: out of memory");
}

TEST_F(ProviderAdapter, CloseSwallowsWhatTheDestructorThrows) {
  tier_instance* other = nullptr;
  ASSERT_EQ(table_->open(nullptr, "ns", nullptr, 0, &other, &error_), TIER_OK);
  Fake::destructor_throws = true;
  table_->close(other);  // must not terminate
  Fake::destructor_throws = false;
  EXPECT_EQ(Fake::live, 1);
}

TEST(ProviderAdapterSelfClosing, AnInstanceTheClassEndsIsClosedByItsCloseInstance) {
  const tier_provider* table = SelfClosingAdapter::Table();
  tier_instance* instance = nullptr;
  ASSERT_EQ(table->open(nullptr, "ns", nullptr, 0, &instance, nullptr), TIER_OK);
  EXPECT_EQ(Fake::live, 1);
  table->close(instance);
  EXPECT_EQ(SelfClosing::closed, 1);
  EXPECT_EQ(Fake::live, 0);
  EXPECT_STREQ(table->name, "selfclosing");
}

}  // namespace
