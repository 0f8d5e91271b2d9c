#!/usr/bin/env bash
# TierHostSignals (issue 26): what tier-host does with the signals a server meets.
#   sigpipe:       SIGPIPE is ignored (a peer that hangs up costs an EPIPE, not the process): the
#                  SigIgn mask of a running tier-host has it.
#   second-sigint: a second SIGINT while the first one's shutdown waits for spills in flight (the
#                  scripted provider completes each 20 s late): the partial report is still
#                  printed and written, then exit 130 (the second stops the waiting, not the
#                  report).
# Usage: signals-test.sh sigpipe TIER_HOST DIR | second-sigint TIER_HOST DIR SCRIPTED_PLUGIN
set -euo pipefail
mode=$1 host=$2 dir=$3 scripted=${4:-}
rm -rf "$dir" && mkdir -p "$dir"
flags=(--cold-kv-dir "$dir/cold" --cold-kv-gib 200 --bytes-scale 1000 --device-kv-mib 256
       --host-kv-mib 256)
# Waits (bounded) until FILE has a line matching RE.
wait_for_line() {
  local file=$1 re=$2
  for _ in $(seq 300); do
    grep -Eq "$re" "$file" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "FAIL: no line matching '$re' in $file within 30 s"; cat "$file"; return 1
}
case $mode in
  sigpipe)
    "$host" "${flags[@]}" --metrics-addr 127.0.0.1:0 replay --sessions 1 --no-progress --linger \
      > "$dir/out" 2> "$dir/err" &
    pid=$!
    trap 'kill -9 $pid 2>/dev/null || true' EXIT
    wait_for_line "$dir/err" 'serving /metrics until SIGINT'
    mask=$(sed -n 's/^SigIgn:[[:space:]]*//p' "/proc/$pid/status")
    kill -INT "$pid"
    wait "$pid" || true
    trap - EXIT
    # SIGPIPE is signal 13: bit 12 of the mask.
    (( (16#$mask >> 12) & 1 )) || { echo "FAIL: SIGPIPE not ignored (SigIgn $mask)"; exit 1; }
    echo "OK: SigIgn $mask"
    ;;
  second-sigint)
    "$host" --tier-plugin "$scripted" --tier-opt spill_delay_ms=20000 --bytes-scale 1000 \
      --device-kv-mib 256 --host-kv-mib 256 replay --sessions 4 --start-spread-s 0 \
      --clock wall --time-scale 10 --no-progress --restore-probe-mib 0 --report-json "$dir/report.json" \
      > "$dir/out" 2> "$dir/err" &
    pid=$!
    trap 'kill -9 $pid 2>/dev/null || true' EXIT
    wait_for_line "$dir/err" 'replay: '
    sleep 2  # parked sessions spill at once (tiny budgets); each spill completes 20 s later
    kill -INT "$pid"
    # Two signals sent back to back would merge into one: the second goes once the first was
    # delivered (no longer pending: bit 1 of SigPnd and ShdPnd is SIGINT).
    for _ in $(seq 200); do
      pending=$(sed -n 's/^\(SigPnd\|ShdPnd\):[[:space:]]*//p' "/proc/$pid/status" 2>/dev/null | tr '\n' ' ')
      busy=0
      for m in $pending; do (( (16#$m >> 1) & 1 )) && busy=1; done
      [ "$busy" -eq 0 ] && break
      sleep 0.05
    done
    kill -INT "$pid" || { echo "FAIL: the first SIGINT's shutdown did not wait for the spills"; cat "$dir/err"; exit 1; }
    rc=0
    timeout 15 tail --pid="$pid" -f /dev/null || { echo "FAIL: still running 15 s after the second SIGINT (it waited for the spills)"; exit 1; }
    wait "$pid" || rc=$?
    trap - EXIT
    cat "$dir/out"
    [ "$rc" -eq 130 ] || { echo "FAIL: exit $rc, expected 130"; cat "$dir/err"; exit 1; }
    grep -q '^interrupted: ' "$dir/out" || { echo "FAIL: no partial report on stdout"; cat "$dir/err"; exit 1; }
    grep -q '"interrupted": true' "$dir/report.json" || { echo "FAIL: no partial JSON report"; exit 1; }
    echo OK
    ;;
  *) echo "usage: signals-test.sh sigpipe TIER_HOST DIR | second-sigint TIER_HOST DIR PLUGIN" >&2; exit 2 ;;
esac
