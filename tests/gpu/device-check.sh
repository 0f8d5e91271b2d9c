#!/usr/bin/env bash
# tests/gpu/device-check.sh [RESULTS_DIR]
#
# On a machine with an NVIDIA GPU: builds tier_cuda (Release, CUDA on, sm_80/89/90/120 unless
# CMAKE_CUDA_ARCHITECTURES says otherwise), runs the GPU tests (the CUDA path's bytes against the
# CPU path's), runs tier-device-bench (pinned H2D/D2H GB/s, gather/scatter GB/s of a 100k-token
# INT8 checkpoint, device shuffle GB/s, byte-exact verification), and writes into RESULTS_DIR
# (default: $OUT, else build-device-check/results):
#   summary.txt      what is printed at the end: device, test counts, benchmark numbers, verdict
#   bench.json       the benchmark's numbers        gpu-tests.json  GoogleTest's report
#   device-check.log everything the steps printed
# Exit 0 only when the build worked, the GPU tests were built and ran (a missing GoogleTest is a
# failure, not a pass), no test failed, no GPU test was skipped on a GPU machine, the Host's own
# paths ran on CUDA (tier_host_gpu_path_tests from the main tree: HostOnEngine.*), and the
# benchmark verified its bytes. Budget: under five minutes (each step has a timeout).
#
# What the GPU tests prove (issue 27; tests/cuda/gpu_device_test.cc, tests/host/gpu_path_test.cc):
# ordering after a spinning producer kernel on the server's stream (and a negative control),
# submits from several threads, a 100k-token checkpoint with all layers queued before any wait
# against the CPU engine segment by segment, a plane above 4 GiB, HBM full (auto must not return
# the CPU engine; allocation says NO_SPACE), pinning cost at the server's size, and the Host's
# seal / Device hit / demotion / restore byte-exact against the CPU engine. The summary's table:
# H2D/D2H GB/s, gather/scatter GB/s of the checkpoint, restore latency Host -> Device, how long a
# Gather blocks its submitting thread while a compute kernel runs, pinning cost.
#
# Environment: CMAKE_CUDA_ARCHITECTURES (e.g. "90" to build faster), TIER_BENCH_TOKENS (100000),
# TIER_BENCH_COPY_MIB (1024), TIER_DEVICE_CHECK_BUILD (build dir, default build-device-check),
# TIER_DEVICE_CHECK_NO_CMAKE=1 (build the benchmark alone with nvcc, as on a machine without CMake),
# TIER_GTEST_SOURCE_DIR (GoogleTest sources to build when none is installed; default
# /usr/src/googletest), TIER_DEVICE_CHECK_HOST_BUILD (main-tree build dir for the Host tests,
# default build-device-check-host; an existing configured build is reused),
# TIER_DEVICE_CHECK_HOST_BIN (a tier_host_gpu_path_tests built elsewhere with CUDA, run instead of
# building the main tree, whose dependencies a bare GPU machine may lack), TIER_GPU_TEST_TOKENS
# (100000) and TIER_GPU_TEST_PIN_GIB (16) for the GPU tests.
# On a machine without a GPU it still builds and runs everything (the GPU tests skip, the
# benchmark takes the CPU path) and exits 3: the CUDA path was not exercised.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${TIER_DEVICE_CHECK_BUILD:-$root/build-device-check}
out=${1:-${OUT:-$build/results}}
mkdir -p "$out"
out=$(cd "$out" && pwd)
archs=${CMAKE_CUDA_ARCHITECTURES:-80;89;90;120}
tokens=${TIER_BENCH_TOKENS:-100000}
copy_mib=${TIER_BENCH_COPY_MIB:-1024}
log=$out/device-check.log
summary=$out/summary.txt
: >"$log"
start=$SECONDS
verdict=PASS
notes=()

say() { printf '%s\n' "$*" | tee -a "$log"; }
fail() {
  verdict=FAIL
  notes+=("$*")
  say "device-check: FAIL: $*"
}
# run TIMEOUT_S CMD...: runs with a timeout, output to the log and the terminal.
run() {
  local limit=$1
  shift
  say "+ $*"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$log"
  return "${PIPESTATUS[0]}"
}

say "device-check: $(date -u +%FT%TZ) in $root, results in $out"

# ---- 0. the machine ---------------------------------------------------------------------------
gpu_present=no
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >>"$log" 2>&1; then
  gpu_present=yes
  gpu_name=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed -n 1p)
else
  gpu_name="none (nvidia-smi found no GPU)"
fi
say "gpu: $gpu_name"
nvcc=${CUDACXX:-}
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
[ -z "$nvcc" ] && nvcc=$(command -v nvcc || true)
if [ -z "$nvcc" ]; then
  fail "no nvcc (set CUDACXX or install the CUDA toolkit)"
else
  say "nvcc: $nvcc ($("$nvcc" --version | tail -n 1))"
fi

# ---- 1. build ---------------------------------------------------------------------------------
tests_bin=$build/tests/cuda/tier_cuda_tests
bench_bin=$build/cuda/tier-device-bench
built=no
if [ -n "$nvcc" ]; then
  if [ -z "${TIER_DEVICE_CHECK_NO_CMAKE:-}" ] && command -v cmake >/dev/null 2>&1; then
    gen=()
    command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
    if run 120 cmake -S "$root/tests/gpu" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CUDA_COMPILER="$nvcc" "-DCMAKE_CUDA_ARCHITECTURES=$archs" \
      ${TIER_GTEST_SOURCE_DIR:+"-DTIER_GTEST_SOURCE_DIR=$TIER_GTEST_SOURCE_DIR"} &&
      run 240 cmake --build "$build" --parallel "$(nproc)"; then
      built=yes
    else
      fail "build failed (see device-check.log)"
    fi
  else
    # No CMake on the machine: build the benchmark alone with nvcc (it verifies its own bytes).
    say "cmake not found: building tier-device-bench directly with nvcc; GPU tests not built"
    mkdir -p "$build/cuda"
    gencode=()
    for a in ${archs//;/ }; do gencode+=("-gencode=arch=compute_$a,code=[sm_$a,compute_$a]"); done
    srcs=()
    for f in "$root"/cuda/src/*.cc "$root"/cuda/src/cuda/*.cc "$root"/cuda/src/cuda/*.cu \
      "$root/plugins/kit/shuffle/byte_shuffle.cc" "$root/cuda/bench/device_bench.cc"; do
      case $f in *cuda_unavailable.cc) ;; *) srcs+=("$f") ;; esac
    done
    if run 240 "$nvcc" -O2 -std=c++20 "${gencode[@]}" -I"$root/cuda/include" -I"$root/cuda/src" \
      -I"$root/abi" -I"$root/plugins/kit/shuffle/include" \
      -DTIER_DEVICE_HAVE_CUDA=1 "-DTIER_CUDA_ARCHITECTURES=\"${archs//;/ }\"" -cudart static \
      -Xcompiler=-Wall,-Wextra "${srcs[@]}" -o "$bench_bin"; then
      built=yes
    else
      fail "nvcc build of tier-device-bench failed"
    fi
  fi
fi

# ---- 2. GPU tests -----------------------------------------------------------------------------
passed=0 skipped=0 failed=0
if [ "$built" = yes ] && [ -x "$tests_bin" ]; then
  run 200 "$tests_bin" --gtest_output="json:$out/gpu-tests.json" >"$out/gpu-tests.log"
  rc=$?
  passed=$(grep -oE '^\[  PASSED  \] [0-9]+' "$out/gpu-tests.log" | grep -oE '[0-9]+$' || echo 0)
  skipped=$(grep -oE '^\[  SKIPPED \] [0-9]+ test' "$out/gpu-tests.log" | grep -oE '[0-9]+' || echo 0)
  failed=$(grep -oE '^\[  FAILED  \] [0-9]+ test' "$out/gpu-tests.log" | grep -oE '[0-9]+' || echo 0)
  [ "$rc" -ne 0 ] && fail "tier_cuda_tests exited $rc ($failed failed)"
  if [ "$gpu_present" = yes ] && [ "${skipped:-0}" -gt 0 ]; then
    fail "$skipped GPU tests skipped on a machine with a GPU: $(grep -m1 'no CUDA device present' "$out/gpu-tests.log")"
  fi
elif [ "$built" = yes ]; then
  fail "GPU tests not built (GoogleTest or CMake missing): only the benchmark would have run"
fi
if [ "$built" = yes ] && [ -x "$tests_bin" ] && [ $((passed + skipped + failed)) -eq 0 ]; then
  fail "tier_cuda_tests ran no test (see gpu-tests.log)"
fi

# ---- 2b. the Host's own paths on CUDA (the main tree: tier_host needs its dependencies) --------
host_build=${TIER_DEVICE_CHECK_HOST_BUILD:-$root/build-device-check-host}
host_bin=$host_build/tests/host/tier_host_gpu_path_tests
host_passed=0 host_skipped=0 host_failed=0
run_host_tests() {
  run 120 "$host_bin" --gtest_output="json:$out/host-tests.json" >"$out/host-tests.log"
  local rc=$?
  host_passed=$(grep -oE '^\[  PASSED  \] [0-9]+' "$out/host-tests.log" | grep -oE '[0-9]+$' || echo 0)
  host_skipped=$(grep -oE '^\[  SKIPPED \] [0-9]+ test' "$out/host-tests.log" | grep -oE '[0-9]+' || echo 0)
  host_failed=$(grep -oE '^\[  FAILED  \] [0-9]+ test' "$out/host-tests.log" | grep -oE '[0-9]+' || echo 0)
  [ "$rc" -ne 0 ] && fail "tier_host_gpu_path_tests exited $rc ($host_failed failed)"
  if [ "$gpu_present" = yes ] && [ "${host_skipped:-0}" -gt 0 ]; then
    fail "$host_skipped Host tests skipped on a machine with a GPU (the Host did not run on CUDA)"
  fi
  [ $((host_passed + host_skipped + host_failed)) -eq 0 ] && fail "tier_host_gpu_path_tests ran no test"
}
if [ -n "${TIER_DEVICE_CHECK_HOST_BIN:-}" ]; then
  # A tier_host_gpu_path_tests built elsewhere with CUDA (the main tree's dependencies missing here).
  host_bin=$TIER_DEVICE_CHECK_HOST_BIN
  if [ -x "$host_bin" ]; then run_host_tests; else fail "TIER_DEVICE_CHECK_HOST_BIN=$host_bin is not executable"; fi
elif [ -n "$nvcc" ] && command -v cmake >/dev/null 2>&1; then
  gen=()
  command -v ninja >/dev/null 2>&1 && [ ! -f "$host_build/Makefile" ] && gen=(-G Ninja)
  if { [ -f "$host_build/CMakeCache.txt" ] ||
    run 120 cmake -S "$root" -B "$host_build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DTIER_CUDA=ON \
      -DCMAKE_CUDA_COMPILER="$nvcc" "-DCMAKE_CUDA_ARCHITECTURES=$archs"; } &&
    run 240 cmake --build "$host_build" --parallel "$(nproc)" --target tier_host_gpu_path_tests; then
    run_host_tests
  else
    fail "Host tests on CUDA not built (the main tree needs its dependencies; see device-check.log)"
  fi
else
  fail "Host tests on CUDA not built (no cmake or no nvcc)"
fi

# ---- 3. benchmark -----------------------------------------------------------------------------
if [ "$built" = yes ]; then
  path=cuda
  [ "$gpu_present" = yes ] || path=auto
  if ! run 150 "$bench_bin" --path "$path" --tokens "$tokens" --copy-mib "$copy_mib" \
    --json "$out/bench.json" >"$out/bench.log"; then
    fail "tier-device-bench failed or did not verify its bytes"
  fi
fi

# ---- 4. summary -------------------------------------------------------------------------------
elapsed=$((SECONDS - start))
[ "$elapsed" -gt 300 ] && fail "took ${elapsed}s, over the five-minute budget"
if [ "$verdict" = PASS ] && [ "$gpu_present" = no ]; then
  verdict="NO GPU (everything else passed; the CUDA path was not exercised)"
  notes+=("no GPU on this machine: run this on one with an NVIDIA GPU")
fi
{
  echo "tier device check: $verdict"
  echo "gpu:        $gpu_name"
  echo "built:      $built (CUDA architectures: $archs)"
  echo "gpu tests:  $passed passed, $skipped skipped, $failed failed"
  echo "host tests: $host_passed passed, $host_skipped skipped, $host_failed failed (the Host on CUDA)"
  if [ -f "$out/bench.log" ]; then
    grep -E '^(path|reason|engine|host memory|h2d|d2h|shuffle|checkpoint|gather|scatter|verify):' \
      "$out/bench.log" | sed 's/^/bench:      /'
  fi
  # The table a user wants (n/a: the step did not run or did not report it).
  metric() { grep -hoE "^\[  METRIC  \] $1 [0-9.]+ [A-Za-z]+" "$out"/gpu-tests.log 2>/dev/null |
    awk '{print $4 " " $5}' | head -n 1; }
  bench() { grep -E "^$1:" "$out/bench.log" 2>/dev/null | head -n 1 | cut -d: -f2- | sed 's/^ *//'; }
  row() { printf '| %-50s | %-52s |\n' "$1" "${2:-n/a}"; }
  echo
  row "measure" "value"
  row "--------------------------------------------------" "----------------------------------------------------"
  row "H2D (GB/s; pinned on the CUDA path)" "$(bench h2d)"
  row "D2H (GB/s; pinned on the CUDA path)" "$(bench d2h)"
  row "gather of a 100k-token checkpoint" "$(bench gather)"
  row "scatter of a 100k-token checkpoint" "$(bench scatter)"
  row "restore latency Host -> Device (100k, all layers)" "$(metric restore_host_to_device_ms_100k)"
  row "Gather() blocks its submitter during compute" "$(metric gather_submit_blocks_ms_during_compute)"
  row "pinning at Open: GiB pinned" "$(metric pinned_gib)"
  row "pinning at Open: time" "$(metric pin_seconds)"
  echo
  echo "elapsed:    ${elapsed}s"
  for n in "${notes[@]}"; do echo "note:       $n"; done
  echo "results:    $out"
} >"$summary"
tee -a "$log" <"$summary"
case $verdict in
  PASS) exit 0 ;;
  NO\ GPU*) exit 3 ;;
  *) exit 1 ;;
esac
