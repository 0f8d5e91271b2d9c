// tier/check.h -- invariant checks that stay on in every build type (RelWithDebInfo and Release
// define NDEBUG, which turns `assert` off). A broken invariant in a cache that serves model state
// must stop the process with the place and the condition, never go on to serve wrong bytes.
//
// TIER_CHECK(cond) is for invariants of our own code, not for input validation: bad input is a
// Status. Header-only, usable from C++ plugins (it needs nothing but the C library). Any thread.
#pragma once

#include <cstdio>
#include <cstdlib>

#define TIER_CHECK(cond)                                                                        \
  do {                                                                                          \
    if (__builtin_expect(!(cond), 0)) {                                                         \
      std::fprintf(stderr, "tier: invariant failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)

// TIER_CHECK with a printf-style explanation of the values involved.
#define TIER_CHECK_MSG(cond, ...)                                                               \
  do {                                                                                          \
    if (__builtin_expect(!(cond), 0)) {                                                         \
      std::fprintf(stderr, "tier: invariant failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                        \
      std::fputc('\n', stderr);                                                                 \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)
