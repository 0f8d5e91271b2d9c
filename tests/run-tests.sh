#!/usr/bin/env bash
# The test command: installs missing packages, configures, builds everything warning-free (CUDA
# included when nvcc is found; -Werror) and runs every ctest suite (the rados suites start and stop
# a single-node Ceph of their own). Usage: bash tests/run-tests.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
bash "$root/.ci/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIER_WERROR=ON
cmake --build "$build" -j "$(nproc)"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
