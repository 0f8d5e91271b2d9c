/* layout_fields.h -- the pinned ABI v1 layout: (struct, field, offset) and (struct, size), as
 * X-macros shared by the C and the C++ side of the layout test. Changing a number here is an ABI
 * break: it needs a new major version. */
#ifndef TIER_TEST_LAYOUT_FIELDS_H
#define TIER_TEST_LAYOUT_FIELDS_H

/* One entry a line, so a change to the ABI is a one-line diff. */
/* clang-format off */

#define TIER_LAYOUT_FIELDS(X) \
  X(tier_error, status, 0) \
  X(tier_error, message, 4) \
  X(tier_key, bytes, 0) \
  X(tier_segment, kind, 0) \
  X(tier_segment, index, 4) \
  X(tier_segment, length_bytes, 8) \
  X(tier_segment, data, 16) \
  X(tier_segment_info, kind, 0) \
  X(tier_segment_info, index, 4) \
  X(tier_segment_info, length_bytes, 8) \
  X(tier_completion, struct_size, 0) \
  X(tier_completion, status, 4) \
  X(tier_completion, message, 8) \
  X(tier_completion, logical_bytes, 16) \
  X(tier_completion, stored_bytes, 24) \
  X(tier_completion, duration_ns, 32) \
  X(tier_option, key, 0) \
  X(tier_option, value, 8) \
  X(tier_info, struct_size, 0) \
  X(tier_info, capabilities, 4) \
  X(tier_info, name, 8) \
  X(tier_info, version, 16) \
  X(tier_info, io_path, 24) \
  X(tier_info, buffer_alignment, 32) \
  X(tier_info, max_inflight_ops, 40) \
  X(tier_info, reserved, 44) \
  X(tier_stats, struct_size, 0) \
  X(tier_stats, reserved, 4) \
  X(tier_stats, capacity_bytes, 8) \
  X(tier_stats, used_bytes, 16) \
  X(tier_stats, entries, 24) \
  X(tier_stats, inflight_ops, 32) \
  X(tier_stat_result, struct_size, 0) \
  X(tier_stat_result, segment_count, 4) \
  X(tier_stat_result, logical_bytes, 8) \
  X(tier_stat_result, stored_bytes, 16) \
  X(tier_stat_result, estimated_restore_ns, 24) \
  X(tier_plan, struct_size, 0) \
  X(tier_plan, decision, 4) \
  X(tier_plan, reason, 8) \
  X(tier_plan, reserved, 12) \
  X(tier_plan, estimated_restore_ns, 16) \
  X(tier_plan, stored_bytes, 24) \
  X(tier_entry, struct_size, 0) \
  X(tier_entry, segment_count, 4) \
  X(tier_entry, key, 8) \
  X(tier_entry, logical_bytes, 40) \
  X(tier_entry, stored_bytes, 48) \
  X(tier_entry, segments, 56) \
  X(tier_entry, manifest, 64) \
  X(tier_entry, manifest_bytes, 72) \
  X(tier_entry, created_unix_ns, 80) \
  X(tier_entry, last_used_unix_ns, 88) \
  X(tier_host_services, struct_size, 0) \
  X(tier_host_services, abi_major, 4) \
  X(tier_host_services, abi_minor, 8) \
  X(tier_host_services, reserved, 12) \
  X(tier_host_services, host_context, 16) \
  X(tier_host_services, log, 24) \
  X(tier_host_services, metric_family, 32) \
  X(tier_host_services, metric, 40) \
  X(tier_host_services, metric_add, 48) \
  X(tier_host_services, metric_set, 56) \
  X(tier_host_services, metric_observe, 64) \
  X(tier_host_services, monotonic_ns, 72) \
  X(tier_provider, struct_size, 0) \
  X(tier_provider, abi_major, 4) \
  X(tier_provider, abi_minor, 8) \
  X(tier_provider, reserved, 12) \
  X(tier_provider, name, 16) \
  X(tier_provider, version, 24) \
  X(tier_provider, open, 32) \
  X(tier_provider, close, 40) \
  X(tier_provider, info, 48) \
  X(tier_provider, stats, 56) \
  X(tier_provider, stat, 64) \
  X(tier_provider, spill, 72) \
  X(tier_provider, restore, 80) \
  X(tier_provider, remove, 88) \
  X(tier_provider, enumerate, 96) \
  X(tier_provider, plan_restore, 104) \
  X(tier_provider, probe, 112)

#define TIER_LAYOUT_SIZES(X) \
  X(tier_error, 260) \
  X(tier_key, 32) \
  X(tier_segment, 24) \
  X(tier_segment_info, 16) \
  X(tier_completion, 40) \
  X(tier_option, 16) \
  X(tier_info, 48) \
  X(tier_stats, 40) \
  X(tier_stat_result, 32) \
  X(tier_plan, 32) \
  X(tier_entry, 96) \
  X(tier_host_services, 80) \
  X(tier_provider, 120)

/* Values of the enumerations: part of the ABI like the offsets. */
#define TIER_LAYOUT_VALUES(X) \
  X(TIER_OK, 0) \
  X(TIER_NOT_FOUND, 1) \
  X(TIER_ALREADY_EXISTS, 2) \
  X(TIER_INVALID_ARGUMENT, 3) \
  X(TIER_NO_SPACE, 4) \
  X(TIER_BUSY, 5) \
  X(TIER_DATA_LOSS, 6) \
  X(TIER_IO_ERROR, 7) \
  X(TIER_CANCELLED, 8) \
  X(TIER_UNSUPPORTED, 9) \
  X(TIER_INTERNAL, 10) \
  X(TIER_SEGMENT_MAIN_KV, 1) \
  X(TIER_SEGMENT_SPEC_KV, 2) \
  X(TIER_SEGMENT_STATE_IMAGE, 3) \
  X(TIER_SEGMENT_HIDDEN_STATE, 4) \
  X(TIER_SEGMENT_MANIFEST, 5) \
  X(TIER_SEGMENT_OTHER, 6) \
  X(TIER_CAP_PERSISTENT, 1) \
  X(TIER_CAP_COMPRESSION, 2) \
  X(TIER_CAP_CHECKSUMS, 4) \
  X(TIER_CAP_ZERO_CAPACITY, 8) \
  X(TIER_CAP_SHARED, 16) \
  X(TIER_DECISION_RESTORE, 1) \
  X(TIER_DECISION_SKIP_TO_ROOT, 2) \
  X(TIER_REASON_CHEAPER, 0) \
  X(TIER_REASON_MISS, 1) \
  X(TIER_REASON_COST, 2) \
  X(TIER_REASON_CORRUPT, 3) \
  X(TIER_REASON_BUSY, 4) \
  X(TIER_LOG_DEBUG, 0) \
  X(TIER_LOG_INFO, 1) \
  X(TIER_LOG_WARN, 2) \
  X(TIER_LOG_ERROR, 3) \
  X(TIER_METRIC_COUNTER, 1) \
  X(TIER_METRIC_GAUGE, 2) \
  X(TIER_METRIC_HISTOGRAM, 3) \
  X(TIER_KEY_BYTES, 32) \
  X(TIER_ERROR_MESSAGE_BYTES, 256) \
  X(TIER_MANIFEST_MAX_BYTES, 65536) \
  X(TIER_MAX_SEGMENTS, 4096) \
  X(TIER_PROBE_MAX_KEYS, 1024)

/* clang-format on */

#endif
