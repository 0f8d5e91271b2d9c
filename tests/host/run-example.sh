#!/usr/bin/env bash
# Runs the example server twice over a fresh cold directory and checks what each turn reused.
set -euo pipefail
example=$1 dir=$2
rm -rf "$dir"
first=$("$example" "$dir" 2>/dev/null)
echo "$first"
grep -qx 'turn 0: root_prefill, 0 tokens reused, reason no_checkpoint' <<<"$first"
grep -qx 'turn 2: cold_restore, 256 tokens reused' <<<"$first"
second=$("$example" "$dir" 2>/dev/null)
echo "$second"
grep -qx 'turn 0: cold_restore, 256 tokens reused' <<<"$second"  # re-adopted after the restart
echo "OK"
