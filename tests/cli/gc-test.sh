#!/usr/bin/env bash
# TierHostGc: `tier-host gc --keep-gib N` removes the least recently used checkpoints of the
# namespace first, down to the size; --dry-run removes nothing. Usage: gc-test.sh TIER_HOST DIR
set -euo pipefail
host=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir"
cold="$dir/cold"
flags=(--cold-kv-dir "$cold" --cold-kv-gib 200 --bytes-scale 1000 --device-kv-mib 512
       --host-kv-mib 512)
"$host" "${flags[@]}" replay --sessions 2 --no-progress >/dev/null 2>&1
mapfile -t files < <(ls "$cold"/*.ckpt | sort)
[ "${#files[@]}" -ge 3 ] || { echo "FAIL: only ${#files[@]} checkpoints spilled"; exit 1; }
# A known last-use order: the first file is the oldest (the disk provider reports its mtime).
i=0
for f in "${files[@]}"; do touch -m -d "@$((1700000000 + i))" "$f"; i=$((i + 1)); done
oldest=$(basename "${files[0]}" .ckpt); oldest_key=${oldest#*-}
total=0; for f in "${files[@]}"; do total=$((total + $(stat -c %s "$f"))); done
size0=$(stat -c %s "${files[0]}")
# Keep everything but the oldest: exactly it must go.
keep=$(awk -v b=$((total - size0 + 65536)) 'BEGIN { printf "%.9f", b * 1000 / 1073741824 }')
dry=$("$host" "${flags[@]}" gc --keep-gib "$keep" --dry-run 2>/dev/null)
echo "$dry"
grep -q "^would remove ${oldest_key:0:16} " <<<"$dry" || { echo "FAIL: dry run did not pick the oldest"; exit 1; }
[ "$(ls "$cold"/*.ckpt | wc -l)" -eq "${#files[@]}" ] || { echo "FAIL: --dry-run removed"; exit 1; }
out=$("$host" "${flags[@]}" gc --keep-gib "$keep" 2>/dev/null)
echo "$out"
[ "$(grep -c '^removed ' <<<"$out")" -eq 1 ] || { echo "FAIL: expected exactly one removal"; exit 1; }
[ ! -e "${files[0]}" ] || { echo "FAIL: the oldest checkpoint is still there"; exit 1; }
for f in "${files[@]:1}"; do [ -e "$f" ] || { echo "FAIL: $f removed"; exit 1; }; done
"$host" "${flags[@]}" gc --keep-gib 0 >/dev/null 2>&1
[ -z "$(ls "$cold"/*.ckpt 2>/dev/null)" ] || { echo "FAIL: --keep-gib 0 left checkpoints"; exit 1; }
echo OK
