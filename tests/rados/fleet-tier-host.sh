#!/usr/bin/env bash
# RadosFleet.TwoTierHostsShareParkedSessions: two tier-host processes (two servers of a fleet) on
# one pool. B starts first, with an empty catalog; A then parks four sessions in the shared tier;
# when the sessions come back to B (wall clock), B finds them by probe and restores them exactly,
# without a restart. Then `gc --keep-gib 0` empties the namespace.
# Usage: fleet-tier-host.sh CLUSTER_DIR TIER_HOST PLUGIN WORK_DIR
set -euo pipefail
dir=$1 host=$2 plugin=$3 work=$4
if [ ! -f "$dir/ready" ]; then
  echo "SKIP: no test cluster in $dir (RadosCluster.Start brings one up when ceph is installed)"
  exit 77
fi
# shellcheck disable=SC1090
. <(grep -E '^(conf|pool|client|keyring)=' "$dir/ready")
rm -rf "$work" && mkdir -p "$work"
server=(--tier-plugin "$plugin" --tier-opt "conf=$conf" --tier-opt "pool=$pool"
        --tier-opt "client=$client" --tier-opt "keyring=$keyring" --tier-opt capacity_gib=1
        --tier-opt op_timeout_s=10 --tier-opt "namespace_prefix=fleet-$$-$RANDOM"
        --bytes-scale 1000 --device-kv-mib 1024 --host-kv-mib 1024)
# Four sessions of 160 blocks (82k tokens: a restore beats the prefill) parked by A at t=0, and
# their next turns of 161 blocks sent to B at t=25 s (A's run takes a few seconds; the margin is
# for a loaded machine).
for s in 0 1 2 3; do
  ids=$(seq -s, $((s * 1000)) $((s * 1000 + 159)))
  echo "{\"timestamp\": $((s * 10)), \"input_length\": 81920, \"output_length\": 8, \"hash_ids\": [$ids]}"
done > "$work/a.jsonl"
for s in 0 1 2 3; do
  ids=$(seq -s, $((s * 1000)) $((s * 1000 + 160)))
  echo "{\"timestamp\": $((25000 + s * 10)), \"input_length\": 82432, \"output_length\": 8, \"hash_ids\": [$ids]}"
done > "$work/b.jsonl"
"$host" "${server[@]}" replay --trace "$work/b.jsonl" --clock wall --no-progress \
  --report-json "$work/b.json" > "$work/b.out" 2> "$work/b.err" &
b=$!
# B is up (its catalog re-adopted, empty) before A parks anything: wait for its log line, bounded.
for _ in $(seq 300); do
  grep -q 're-adopted 0 cold' "$work/b.err" 2>/dev/null && break
  kill -0 "$b" 2>/dev/null || { cat "$work/b.err"; echo "FAIL: B exited at start"; exit 1; }
  sleep 0.2
done
grep -q 're-adopted 0 cold' "$work/b.err" || { cat "$work/b.err"; echo "FAIL: B not up within 60 s"; kill -9 "$b"; exit 1; }
"$host" "${server[@]}" replay --trace "$work/a.jsonl" --no-progress --report-json "$work/a.json" \
  > "$work/a.out" 2> "$work/a.err"
grep -q '"bytes_spilled_stored": [1-9]' "$work/a.json" || { cat "$work/a.out" "$work/a.err"; echo "FAIL: A parked nothing"; exit 1; }
timeout 120 tail --pid="$b" -f /dev/null || { kill -9 "$b"; echo "FAIL: B did not finish"; exit 1; }
wait "$b" || { cat "$work/b.out" "$work/b.err"; echo "FAIL: B failed"; exit 1; }
cat "$work/b.out"
grep -q '"readopted_checkpoints": 0' "$work/b.json" || { echo "FAIL: B re-adopted at start"; exit 1; }
grep -q '"cold_restores_of_other_servers": [1-9]' "$work/b.json" || { cat "$work/b.err"; echo "FAIL: B restored nothing A parked"; exit 1; }
grep -q '"restore_exact": true' "$work/b.json" || { echo "FAIL: B's restores were not exact"; exit 1; }
"$host" "${server[@]}" gc --keep-gib 0 > "$work/gc.out"
cat "$work/gc.out"
"$host" "${server[@]}" gc --keep-gib 0 --dry-run > "$work/gc-dry.out"
grep -q '^gc: nothing stored under namespace ' "$work/gc-dry.out" || { cat "$work/gc-dry.out"; echo "FAIL: gc left checkpoints"; exit 1; }
echo OK
