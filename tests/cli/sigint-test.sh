#!/usr/bin/env bash
# TierHostSignals: Ctrl-C (SIGINT) stops a replay cleanly: pending admissions cancelled, what is
# in flight completed, exit 130 with a partial report saying so, and the cold tier consistent
# (the next start re-adopts, quarantines nothing). Usage: sigint-test.sh TIER_HOST DIR
set -euo pipefail
host=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
flags=(--cold-kv-dir "$dir/cold" --cold-kv-gib 200 --bytes-scale 1000 --device-kv-mib 256
       --host-kv-mib 256)
"$host" "${flags[@]}" replay --sessions 4 --clock wall --time-scale 10 --no-progress \
  --report-json "$dir/report.json" > "$dir/out" 2> "$dir/err" &
pid=$!
# Stop it once the replay runs (after the restore probe, whose own checkpoint files come and go)
# and checkpoints have reached the cold tier (bounded waits).
for _ in $(seq 300); do
  grep -q 'replay: agents' "$dir/err" 2>/dev/null && break
  sleep 0.2
done
for _ in $(seq 100); do
  [ -n "$(ls "$dir"/cold/*.ckpt 2>/dev/null)" ] && break
  sleep 0.2
done
sleep 1
kill -INT "$pid"
rc=0
timeout 60 tail --pid="$pid" -f /dev/null || { echo "FAIL: tier-host still running 60 s after SIGINT"; kill -9 "$pid"; exit 1; }
wait "$pid" || rc=$?
cat "$dir/out"
[ "$rc" -eq 130 ] || { echo "FAIL: exit $rc, expected 130"; cat "$dir/err"; exit 1; }
grep -q '^interrupted: ' "$dir/out" || { echo "FAIL: the report does not say it was interrupted"; exit 1; }
grep -q '"interrupted": true' "$dir/report.json" || { echo "FAIL: the JSON report does not say so"; exit 1; }
"$host" "${flags[@]}" replay --sessions 1 --no-progress > "$dir/out2" 2> "$dir/err2"
grep -q 'quarantined 0 corrupt files' "$dir/err2" || { cat "$dir/err2"; echo "FAIL: the restart found damage"; exit 1; }
files=$(ls "$dir"/cold/*.ckpt 2>/dev/null | wc -l)
[ "$files" -ge 1 ] || { echo "FAIL: nothing reached the cold tier before the signal"; exit 1; }
grep -q 'temporary files' "$dir/err2"
grep -q "re-adopted [0-9]* cold" "$dir/err2" || { cat "$dir/err2"; echo "FAIL: no re-adoption line"; exit 1; }
adopted=$(grep -o 're-adopted [0-9]*' "$dir/err2" | sed -n 1p | awk '{print $2}')
[ "$adopted" -ge 1 ] || { cat "$dir/err2"; echo "FAIL: nothing re-adopted"; exit 1; }
echo OK
