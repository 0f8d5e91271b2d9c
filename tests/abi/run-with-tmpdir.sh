#!/usr/bin/env bash
# Runs CMD ARGS... with "{tmpdir}" in any argument replaced by a fresh directory (on /var/tmp, a
# real disk, so O_DIRECT works), removed afterwards.
set -euo pipefail
dir=$(mktemp -d "${TIER_TEST_TMPDIR:-/var/tmp}/tier-abi-XXXXXX")
trap 'rm -rf "$dir"' EXIT
args=()
for arg in "$@"; do args+=("${arg//\{tmpdir\}/$dir}"); done
"${args[@]}"
