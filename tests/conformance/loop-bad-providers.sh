#!/usr/bin/env bash
# ConformanceSuite.EveryBadProviderIsCaughtEveryRun: runs each of the suite's own bad providers
# against the tests of its rule TIER_CONFORMANCE_LOOP_RUNS times (CI default 10; 50 for the
# figures in abi/README.md), and TIER_CONFORMANCE_LOOP_SLOW_RUNS times (default 3) those that cost a
# second a run (a deadlock or a last_used that never moves, found at a 1 s deadline; 128 MiB
# written and read), each run a fresh process with op_delay_ms=0, and fails unless every run fails
# naming the defect.
#   loop-bad-providers.sh TIER_CONFORMANCE CASES_FILE   (lines: plugin, filter, regex, options; tab-separated)
set -uo pipefail
tool=$1 cases=$2
runs=${TIER_CONFORMANCE_LOOP_RUNS:-10}
slow_runs=${TIER_CONFORMANCE_LOOP_SLOW_RUNS:-3}
status=0 total_caught=0 total_runs=0
while IFS=$'\t' read -r plugin filter regex options; do
  [ -n "$plugin" ] || continue
  n=$runs timeout_s=10
  case "$plugin" in
    *tiny_inline_locked* | *last_used_not_moved*) n=$slow_runs timeout_s=1 ;;
    *restore_wrong_past_32mib*) n=$slow_runs ;;
  esac
  caught=0 started=$SECONDS
  for ((i = 0; i < n; ++i)); do
    # shellcheck disable=SC2086
    out=$("$tool" --tier-op-timeout-s $timeout_s --tier-plugin "$plugin" $options --tier-opt op_delay_ms=0 \
      "--gtest_filter=*/AbiConformance.$filter/*" 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && grep -Eq -- "$regex" <<<"$out"; then caught=$((caught + 1)); fi
  done
  name=$(basename "$plugin" .so)
  echo "${name#libtier_reference_}: caught in $caught of $n runs ($filter, $((SECONDS - started)) s)"
  total_caught=$((total_caught + caught)) total_runs=$((total_runs + n))
  [ $caught -eq $n ] || status=1
done <"$cases"
echo "bad providers caught in $total_caught of $total_runs runs"
[ $status -eq 0 ] && echo "OK: every bad provider caught in every run" || echo "FAIL: a bad provider escaped a run"
exit $status
