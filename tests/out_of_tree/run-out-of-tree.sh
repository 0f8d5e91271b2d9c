#!/usr/bin/env bash
# Out-of-tree plugin test: install the SDK from the build tree into a scratch prefix, build the
# example provider plugins/examples/memory against it alone, then load the result into the already-built
# tier-host (no rebuild) and run the installed tier-conformance against it. The plugin asks for the
# SDK's abi component only and is built with its tier_add_provider().
# Usage: run-out-of-tree.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source=$2
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tier-oot-XXXXXX")
trap 'rm -rf "$scratch"' EXIT

cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S "$source/plugins/examples/memory" -B "$scratch/build" \
      -DCMAKE_PREFIX_PATH="$scratch/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$scratch/build" >/dev/null
plugin="$scratch/build/libtier_memory.so"
[ -f "$plugin" ] || { echo "out-of-tree build produced no $plugin" >&2; exit 1; }
exports=$(nm -D --defined-only "$plugin" | awk '{print $3}')
[ "$exports" = tier_provider_entry ] || { echo "$plugin exports more than tier_provider_entry: $exports" >&2; exit 1; }

echo "== tier-host (built in tree, not rebuilt) loads the out-of-tree plugin"
"$build/bin/tier-host" --tier-plugin "$plugin" --check
echo "== installed tier-conformance against the out-of-tree plugin"
"$scratch/prefix/bin/tier-conformance" --tier-plugin "$plugin" --tier-opt capacity_bytes=268435456 \
    --gtest_brief=1
