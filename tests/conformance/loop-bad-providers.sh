#!/usr/bin/env bash
# ConformanceSuite.EveryBadProviderIsCaughtEveryRun: runs each of the suite's own bad providers
# against the tests of its rule, each run a fresh process with op_delay_ms=0, and fails unless every
# run fails naming the defect. How many runs is a matter of CI's budget only, never of the verdict:
# 50 when the first run took under 0.1 s, 5 under 1 s, else 2 (a deadlock or a last_used that never
# moves is found at a 1 s deadline; 128 MiB written and read); TIER_CONFORMANCE_LOOP_RUNS=N runs
# every case N times (abi/README.md's figures: N=50).
#   loop-bad-providers.sh TIER_CONFORMANCE CASES_FILE   (lines: plugin, filter, regex, options;
#   tab-separated)
set -uo pipefail
tool=$1 cases=$2
fixed_runs=${TIER_CONFORMANCE_LOOP_RUNS:-}
status=0 total_caught=0 total_runs=0
while IFS=$'\t' read -r plugin filter regex options; do
  [ -n "$plugin" ] || continue
  timeout_s=10
  case "$plugin" in *tiny_inline_locked* | *last_used_not_moved*) timeout_s=1 ;; esac
  caught=0 started=$SECONDS n=${fixed_runs:-1}
  for ((i = 0; i < n; ++i)); do
    t0=$(date +%s%N)
    # shellcheck disable=SC2086
    out=$("$tool" --tier-op-timeout-s $timeout_s --tier-plugin "$plugin" $options --tier-opt op_delay_ms=0 \
      "--gtest_filter=*/AbiConformance.$filter/*" 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && grep -Eq -- "$regex" <<<"$out"; then caught=$((caught + 1)); fi
    if [ $i -eq 0 ] && [ -z "$fixed_runs" ]; then
      ms=$((($(date +%s%N) - t0) / 1000000))
      n=$((ms < 100 ? 50 : ms < 1000 ? 5 : 2))
    fi
  done
  name=$(basename "$plugin" .so)
  echo "${name#libtier_reference_}: caught in $caught of $n runs ($filter, $((SECONDS - started)) s)"
  total_caught=$((total_caught + caught)) total_runs=$((total_runs + n))
  [ $caught -eq $n ] || status=1
done <"$cases"
echo "bad providers caught in $total_caught of $total_runs runs"
[ $status -eq 0 ] && echo "OK: every bad provider caught in every run" || echo "FAIL: a bad provider escaped a run"
exit $status
