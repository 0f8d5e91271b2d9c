// check.h -- invariant checks that stay on in release builds (RelWithDebInfo defines NDEBUG):
// a broken invariant in a storage engine must stop the process, not corrupt data.
#pragma once

#include <cstdio>
#include <cstdlib>

#define TIER_DISK_CHECK(cond)                                                                \
  do {                                                                                       \
    if (__builtin_expect(!(cond), 0)) {                                                      \
      std::fprintf(stderr, "tier disk: invariant failed at %s:%d: %s\n", __FILE__, __LINE__, \
                   #cond);                                                                   \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)
