/*
 * tier_validate.h -- argument checks every provider needs, as static inline C (optional SDK
 * helper).
 *
 * tier_validate_segments() checks a spill's or restore's segment table the same way in every
 * provider: count in [1, TIER_MAX_SEGMENTS], known kinds, (kind, index) unique, data non-NULL when
 * length_bytes > 0, at most one manifest of at most TIER_MANIFEST_MAX_BYTES. It writes a message
 * into `error` (may be NULL) and returns TIER_OK or TIER_INVALID_ARGUMENT. Pure; any thread.
 */
#ifndef TIER_VALIDATE_H
#define TIER_VALIDATE_H

#include <stdarg.h>
#include <stdio.h>

#include "tier_provider.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
static inline tier_status
tier_set_error(tier_error* error, tier_status status, const char* format, ...) {
  if (error != NULL) {
    va_list args;
    va_start(args, format);
    error->status = status;
    vsnprintf(error->message, sizeof(error->message), format, args);
    va_end(args);
  }
  return status;
}

static inline tier_status tier_validate_segments(const char* provider, const tier_segment* segments,
                                                 uint32_t segment_count, tier_error* error) {
  uint32_t i, j, manifests = 0;
  if (segment_count == 0 || segment_count > TIER_MAX_SEGMENTS) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "%s: segment count %u not in [1, %u]",
                          provider, segment_count, TIER_MAX_SEGMENTS);
  }
  if (segments == NULL) {
    return tier_set_error(error, TIER_INVALID_ARGUMENT, "%s: segments is NULL", provider);
  }
  for (i = 0; i < segment_count; ++i) {
    const tier_segment* s = &segments[i];
    if (s->kind < TIER_SEGMENT_KIND_MIN || s->kind > TIER_SEGMENT_KIND_MAX) {
      return tier_set_error(error, TIER_INVALID_ARGUMENT, "%s: segment %u has unknown kind %u",
                            provider, i, s->kind);
    }
    if (s->length_bytes > 0 && s->data == NULL) {
      return tier_set_error(error, TIER_INVALID_ARGUMENT,
                            "%s: segment %u (kind %u index %u) has %llu bytes but NULL data",
                            provider, i, s->kind, s->index, (unsigned long long)s->length_bytes);
    }
    if (s->kind == TIER_SEGMENT_MANIFEST) {
      if (++manifests > 1) {
        return tier_set_error(error, TIER_INVALID_ARGUMENT, "%s: more than one manifest segment",
                              provider);
      }
      if (s->length_bytes > TIER_MANIFEST_MAX_BYTES) {
        return tier_set_error(error, TIER_INVALID_ARGUMENT, "%s: manifest of %llu bytes exceeds %u",
                              provider, (unsigned long long)s->length_bytes,
                              TIER_MANIFEST_MAX_BYTES);
      }
    }
    for (j = 0; j < i; ++j) {
      if (segments[j].kind == s->kind && segments[j].index == s->index) {
        return tier_set_error(error, TIER_INVALID_ARGUMENT,
                              "%s: segments %u and %u are both kind %u index %u", provider, j, i,
                              s->kind, s->index);
      }
    }
  }
  return TIER_OK;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TIER_VALIDATE_H */
