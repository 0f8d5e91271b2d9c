#!/usr/bin/env bash
# The main job, from a fresh clone: install missing packages, build tier-host and the plugins,
# then replay built-in agent sessions through the disk cold tier and the same workload without a
# cold tier, and print what the cold tier saved.
#   bash host_shim/quickstart.sh [COLD_DIR]      (default COLD_DIR: ./build/quickstart-cold)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build"
cold=${1:-$build/quickstart-cold}
bash "$root/.ci/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target tier-host tier_disk tier_null
echo "== replay: 12 agent sessions (shared 8-30k system heads, histories to 80-120k tokens),"
echo "   Device 8 GiB + Host 16 GiB + Cold 200 GiB (logical), bytes stored at 1/1000 scale"
"$build/bin/tier-host" --cold-kv-dir "$cold" --cold-kv-gib 200 --bytes-scale 1000 \
  replay --workload agents --compare-null --report-json "$build/quickstart-report.json"
echo "report: $build/quickstart-report.json   cold tier: $cold (run again to see it re-adopted)"
