/* layout_c.c -- the ABI headers compiled as C11 (-Wall -Wextra -Werror -pedantic); reports the
 * layout the C compiler sees so the C++ test can compare it with the pinned numbers. */
#include <stddef.h>
#include <string.h>

#include "layout_c.h"
#include "layout_fields.h"
#include "tier_metrics.h"
#include "tier_provider.h"
#include "tier_validate.h"

#define FIELD_ENTRY(type, field, offset) {#type "." #field, offsetof(type, field)},
#define SIZE_ENTRY(type, size) {"sizeof(" #type ")", sizeof(type)},
#define VALUE_ENTRY(name, value) {#name, (size_t)(name)},

static const struct tier_c_layout_entry kEntries[] = {
    TIER_LAYOUT_FIELDS(FIELD_ENTRY) TIER_LAYOUT_SIZES(SIZE_ENTRY) TIER_LAYOUT_VALUES(VALUE_ENTRY)};

size_t tier_c_layout(const struct tier_c_layout_entry** entries) {
  *entries = kEntries;
  return sizeof(kEntries) / sizeof(kEntries[0]);
}

int tier_c_helpers_work(void) {
  /* The inline helpers compile and behave the same in C. */
  tier_error error;
  tier_segment bad = {99, 0, 0, NULL};
  memset(&error, 0, sizeof(error));
  return strcmp(tier_status_name(TIER_DATA_LOSS), "data_loss") == 0 &&
         strcmp(tier_reason_name(TIER_REASON_COST), "cost") == 0 &&
         tier_validate_segments("c", &bad, 1, &error) == TIER_INVALID_ARGUMENT &&
         error.message[0] != '\0';
}
