// layout_test.cc -- pins the ABI v1 layout: every field offset, struct size and enum value, as the
// C++ compiler and the C compiler see them. An accidental ABI break fails here.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "layout_c.h"
#include "layout_fields.h"
#include "tier_metrics.h"
#include "tier_provider.h"
#include "tier_validate.h"

namespace {

std::map<std::string, size_t> Pinned() {
  std::map<std::string, size_t> pinned;
#define FIELD_PIN(type, field, offset) pinned[#type "." #field] = offset;
#define SIZE_PIN(type, size) pinned["sizeof(" #type ")"] = size;
#define VALUE_PIN(name, value) pinned[#name] = value;
  TIER_LAYOUT_FIELDS(FIELD_PIN);
  TIER_LAYOUT_SIZES(SIZE_PIN);
  TIER_LAYOUT_VALUES(VALUE_PIN);
#undef FIELD_PIN
#undef SIZE_PIN
#undef VALUE_PIN
  return pinned;
}

TEST(AbiLayout, CxxMatchesPinnedLayout) {
#define FIELD_CHECK(type, field, offset) \
  EXPECT_EQ(offsetof(type, field), size_t{offset}) << #type "." #field;
#define SIZE_CHECK(type, size) EXPECT_EQ(sizeof(type), size_t{size}) << #type;
#define VALUE_CHECK(name, value) EXPECT_EQ(static_cast<size_t>(name), size_t{value}) << #name;
  TIER_LAYOUT_FIELDS(FIELD_CHECK) TIER_LAYOUT_SIZES(SIZE_CHECK) TIER_LAYOUT_VALUES(VALUE_CHECK)
#undef FIELD_CHECK
#undef SIZE_CHECK
#undef VALUE_CHECK
}

TEST(AbiLayout, CMatchesPinnedLayout) {
  const tier_c_layout_entry* entries = nullptr;
  const size_t count = tier_c_layout(&entries);
  const auto pinned = Pinned();
  ASSERT_EQ(count, pinned.size());
  for (size_t i = 0; i < count; ++i) {
    auto it = pinned.find(entries[i].name);
    ASSERT_NE(it, pinned.end()) << entries[i].name;
    EXPECT_EQ(entries[i].value, it->second) << entries[i].name << " as compiled by C";
  }
}

TEST(AbiLayout, V1TableSizesCoverEveryV1Slot) {
  EXPECT_EQ(TIER_PROVIDER_V1_0_SIZE, offsetof(tier_provider, probe));
  EXPECT_EQ(TIER_PROVIDER_V1_1_SIZE, sizeof(tier_provider));
  EXPECT_EQ(TIER_ENTRY_V1_0_SIZE, offsetof(tier_entry, created_unix_ns));
  EXPECT_EQ(TIER_HOST_SERVICES_V1_0_SIZE, sizeof(tier_host_services));
  EXPECT_EQ(TIER_ABI_VERSION_MAJOR, 1u);
}

TEST(AbiLayout, HasSlotHonoursStructSize) {
  tier_provider table{};
  table.struct_size = offsetof(tier_provider, spill);  // a table that ends before spill
  table.stat = [](tier_instance*, const tier_key*, tier_stat_result*, tier_segment_info*, uint32_t,
                  tier_error*) -> tier_status { return TIER_OK; };
  table.spill = [](tier_instance*, const tier_key*, const tier_segment*, uint32_t, tier_done_fn,
                   void*, tier_error*) -> tier_status { return TIER_OK; };
  EXPECT_TRUE(TIER_HAS_SLOT(&table, tier_provider, stat));
  EXPECT_FALSE(TIER_HAS_SLOT(&table, tier_provider, spill)) << "beyond struct_size";
  EXPECT_FALSE(TIER_HAS_SLOT(&table, tier_provider, info)) << "NULL slot";
  const tier_provider* none = nullptr;
  EXPECT_FALSE(TIER_HAS_SLOT(none, tier_provider, open));
}

TEST(AbiLayout, HelpersBehaveTheSameInC) {
  EXPECT_TRUE(tier_c_helpers_work());
  EXPECT_STREQ(tier_status_name(TIER_NO_SPACE), "no_space");
  EXPECT_STREQ(tier_status_name(42), "unknown");
  EXPECT_STREQ(tier_decision_name(TIER_DECISION_SKIP_TO_ROOT), "skip_to_root");
  EXPECT_STREQ(tier_reason_name(TIER_REASON_MISS), "miss");
}

TEST(AbiValidate, RefusesBadSegmentTables) {
  char byte = 0;
  tier_error error{};
  tier_segment ok[2] = {{TIER_SEGMENT_MAIN_KV, 0, 1, &byte}, {TIER_SEGMENT_MAIN_KV, 1, 0, nullptr}};
  EXPECT_EQ(tier_validate_segments("t", ok, 2, &error), TIER_OK) << error.message;
  EXPECT_EQ(tier_validate_segments("t", ok, 0, &error), TIER_INVALID_ARGUMENT);
  EXPECT_EQ(tier_validate_segments("t", nullptr, 1, &error), TIER_INVALID_ARGUMENT);
  tier_segment duplicate[2] = {ok[0], ok[0]};
  EXPECT_EQ(tier_validate_segments("t", duplicate, 2, &error), TIER_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(error.message, "both kind 1 index 0"), nullptr) << error.message;
  tier_segment no_data = {TIER_SEGMENT_STATE_IMAGE, 0, 8, nullptr};
  EXPECT_EQ(tier_validate_segments("t", &no_data, 1, &error), TIER_INVALID_ARGUMENT);
  tier_segment unknown_kind = {0, 0, 1, &byte};
  EXPECT_EQ(tier_validate_segments("t", &unknown_kind, 1, &error), TIER_INVALID_ARGUMENT);
  tier_segment big_manifest = {TIER_SEGMENT_MANIFEST, 0, TIER_MANIFEST_MAX_BYTES + 1, &byte};
  EXPECT_EQ(tier_validate_segments("t", &big_manifest, 1, &error), TIER_INVALID_ARGUMENT);
  tier_segment two_manifests[2] = {{TIER_SEGMENT_MANIFEST, 0, 1, &byte},
                                   {TIER_SEGMENT_MANIFEST, 1, 1, &byte}};
  EXPECT_EQ(tier_validate_segments("t", two_manifests, 2, &error), TIER_INVALID_ARGUMENT);
  EXPECT_EQ(tier_validate_segments("t", ok, 2, nullptr), TIER_OK) << "NULL error is allowed";
}

}  // namespace
