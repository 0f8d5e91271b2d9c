/* layout_c.h -- what layout_c.c (compiled as C) reports to the C++ layout test. */
#ifndef TIER_TEST_LAYOUT_C_H
#define TIER_TEST_LAYOUT_C_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
struct tier_c_layout_entry {
  const char* name;
  size_t value;
};
size_t tier_c_layout(const struct tier_c_layout_entry** entries);
int tier_c_helpers_work(void);
#ifdef __cplusplus
}
#endif
#endif
