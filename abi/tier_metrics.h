/*
 * tier_metrics.h -- the metric families every tier provider registers through the host services.
 *
 * Part of the SDK so that any provider (ours or a third party's) feeds the same dashboards. All
 * carry the label `provider` (the provider table's `name`). Label values come from small fixed
 * sets: tier_status_name(), tier_decision_name(), tier_reason_name() and the lists below.
 * Units are base units (seconds, bytes); counters end in _total.
 */
#ifndef TIER_METRICS_H
#define TIER_METRICS_H

/* counter {provider, result=tier_status_name()}: spills by outcome, refusals at submit included. */
#define TIER_METRIC_COLD_SPILLS "tier_cold_spills_total"
/* counter {provider, result=tier_status_name()}: restores by outcome, refusals at submit included.
 */
#define TIER_METRIC_COLD_RESTORES "tier_cold_restores_total"
/* counter {provider, result=tier_status_name()}: removes by outcome. */
#define TIER_METRIC_COLD_REMOVES "tier_cold_removes_total"
/* counter {provider, decision=tier_decision_name(), reason=tier_reason_name()}: plan_restore. */
#define TIER_METRIC_COLD_DECISIONS "tier_cold_restore_decisions_total"
/* counter {provider, kind=logical|stored}: bytes of completed spills. */
#define TIER_METRIC_COLD_SPILL_BYTES "tier_cold_spill_bytes_total"
/* counter {provider, kind=logical|stored}: bytes of completed restores. */
#define TIER_METRIC_COLD_RESTORE_BYTES "tier_cold_restore_bytes_total"
/* histogram {provider}: seconds from acceptance to completion of successful spills. */
#define TIER_METRIC_COLD_SPILL_SECONDS "tier_cold_spill_duration_seconds"
/* histogram {provider}: seconds from acceptance to completion of successful restores. */
#define TIER_METRIC_COLD_RESTORE_SECONDS "tier_cold_restore_duration_seconds"
/* gauge {provider}: bytes used in the tier, headers and alignment included. */
#define TIER_METRIC_COLD_USED_BYTES "tier_cold_used_bytes"
/* gauge {provider}: the byte budget (0 = no cold tier). */
#define TIER_METRIC_COLD_CAPACITY_BYTES "tier_cold_capacity_bytes"
/* gauge {provider}: complete, visible checkpoints. */
#define TIER_METRIC_COLD_ENTRIES "tier_cold_entries"
/* counter {provider, where=restore|open}: checkpoints that failed verification (never served). */
#define TIER_METRIC_COLD_DATA_LOSS "tier_cold_data_loss_total"
/* counter {provider, reason}: files a provider moved aside and never served (the disk provider's
 * quarantine/: reason corrupt, stuck_name, not_owned). */
#define TIER_METRIC_COLD_QUARANTINED "tier_cold_quarantined_total"
/* counter {provider, decision}: spilled segments by why they got their codec (the disk
 * provider's compression: compressed, or raw and why). */
#define TIER_METRIC_COLD_CODEC_DECISIONS "tier_cold_codec_decisions_total"
/* counter {provider, why}: cold-tier directories of a provider that spans several (the disk
 * provider's dirs=): missing or unusable at open, or set aside while failing. */
#define TIER_METRIC_COLD_DIRS_UNAVAILABLE "tier_cold_dirs_unavailable_total"
/* gauge {provider, path=TIER_IO_PATHS}: 1 for the I/O path in use, 0 for the others. */
#define TIER_METRIC_COLD_IO_PATH "tier_cold_io_path"

/* Values of the `path` label of TIER_METRIC_COLD_IO_PATH. */
#define TIER_IO_PATH_IO_URING_DIRECT "io_uring_direct"
#define TIER_IO_PATH_IO_URING_BUFFERED "io_uring_buffered"
#define TIER_IO_PATH_THREADS_DIRECT "threads_direct"
#define TIER_IO_PATH_THREADS_BUFFERED "threads_buffered"
#define TIER_IO_PATH_NONE "none"
#define TIER_IO_PATH_LIBRADOS "librados" /* a RADOS client (the rados provider) */

/* Histogram bucket upper bounds (seconds) for the duration families: 1 ms to 60 s. */
#define TIER_DURATION_BUCKETS_SECONDS \
  { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0 }
#define TIER_DURATION_BUCKET_COUNT 15u

#endif /* TIER_METRICS_H */
