#!/usr/bin/env bash
# SdkPackage tests: install the build tree into a scratch prefix and build tests/sdk/consumer
# against it, the way a third party would.
# Usage: run-sdk.sh MODE BUILD_DIR SOURCE_DIR
#   abi      COMPONENTS abi with every other package's CMake config hidden (only the prefix is
#            searched): a C and a C++ provider build with tier_add_provider, export only
#            tier_provider_entry and pass the installed tier-conformance; asking for host under the
#            same hiding fails on prometheus-cpp (the hiding is real)
#   shuffle  COMPONENTS abi shuffle, hidden the same way: a program links tier::shuffle and runs
#   host     COMPONENTS host (nothing hidden): a program links tier::host and loads the null provider;
#            then again without CUDA (-DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON, no nvcc on PATH):
#            a CPU-only machine configures, links and runs it too
#   default  no COMPONENTS: every target is defined, as before components existed
set -euo pipefail
mode=$1 build=$2 source=$3
scratch=$(mktemp -d "${TMPDIR:-/tmp}/tier-sdk-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
prefix="$scratch/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null

# Only the prefix is searched for packages: prometheus-cpp's and nlohmann_json's configs (and every
# other one on this machine) are out of sight.
hidden=(-DCMAKE_FIND_ROOT_PATH="$prefix" -DCMAKE_FIND_ROOT_PATH_MODE_PACKAGE=ONLY
        -DCMAKE_PREFIX_PATH=/ -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
        -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
visible=(-DCMAKE_PREFIX_PATH="$prefix")

configure() {  # configure DIR COMPONENTS FLAGS...
  local dir=$1 components=$2
  shift 2
  cmake -S "$source/tests/sdk/consumer" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DTIER_SOURCE="$source" -DTIER_COMPONENTS="$components" "$@"
}

only_entry_exported() {  # only_entry_exported LIB
  local exports
  exports=$(nm -D --defined-only "$1" | awk '{print $3}')
  if [ "$exports" != tier_provider_entry ]; then
    echo "FAIL: $1 exports: $exports" >&2
    exit 1
  fi
  echo "$1 exports tier_provider_entry only"
}

case "$mode" in
  abi)
    configure "$scratch/abi" abi "${hidden[@]}" > "$scratch/abi.log" 2>&1 || {
      cat "$scratch/abi.log"; echo "FAIL: COMPONENTS abi needs more than the SDK"; exit 1; }
    if grep -Eq '^(prometheus-cpp|nlohmann_json)_DIR:PATH=/' "$scratch/abi/CMakeCache.txt"; then
      echo "FAIL: COMPONENTS abi found prometheus-cpp or nlohmann_json"; exit 1
    fi
    cmake --build "$scratch/abi" >/dev/null
    only_entry_exported "$scratch/abi/libconsumer_c.so"
    only_entry_exported "$scratch/abi/libconsumer_cxx.so"
    "$prefix/bin/tier-conformance" --tier-plugin "$scratch/abi/libconsumer_c.so" \
        --tier-opt capacity_bytes=268435456 --gtest_brief=1
    "$prefix/bin/tier-conformance" --tier-plugin "$scratch/abi/libconsumer_cxx.so" \
        --tier-opt dir={tmpdir} --gtest_brief=1
    if configure "$scratch/host" host "${hidden[@]}" > "$scratch/host.log" 2>&1; then
      echo "FAIL: COMPONENTS host configured with prometheus-cpp hidden: the hiding hides nothing"
      exit 1
    fi
    grep -q 'prometheus-cpp' "$scratch/host.log" || {
      cat "$scratch/host.log"; echo "FAIL: host failed, but not on prometheus-cpp"; exit 1; }
    echo "COMPONENTS host under the same hiding fails on prometheus-cpp, as it must"
    ;;
  shuffle)
    configure "$scratch/shuffle" "abi;shuffle" "${hidden[@]}" > "$scratch/shuffle.log" 2>&1 || {
      cat "$scratch/shuffle.log"; echo "FAIL: COMPONENTS abi shuffle needs more than the SDK"; exit 1; }
    cmake --build "$scratch/shuffle" --target consumer_shuffle >/dev/null
    "$scratch/shuffle/consumer_shuffle"
    ;;
  host)
    configure "$scratch/host" host "${visible[@]}" >/dev/null
    cmake --build "$scratch/host" --target consumer_host consumer_example_server >/dev/null
    "$scratch/host/consumer_host" "$prefix/lib/tier/libtier_null.so"
    # A CPU-only machine: no CUDAToolkit to find, no nvcc on PATH.
    cpu_path=$(printf '%s' "$PATH" | tr ':' '\n' | while read -r d; do
      [ -n "$d" ] && [ ! -x "$d/nvcc" ] && printf '%s:' "$d"; done)
    cpu_path=${cpu_path%:}
    if PATH="$cpu_path" command -v nvcc >/dev/null; then
      echo "FAIL: nvcc still on PATH"; exit 1
    fi
    PATH="$cpu_path" configure "$scratch/host-cpu" host "${visible[@]}" \
        -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON > "$scratch/host-cpu.log" 2>&1 || {
      cat "$scratch/host-cpu.log"; echo "FAIL: COMPONENTS host needs CUDA to configure"; exit 1; }
    PATH="$cpu_path" cmake --build "$scratch/host-cpu" --target consumer_host \
        consumer_example_server >/dev/null
    "$scratch/host-cpu/consumer_host" "$prefix/lib/tier/libtier_null.so"
    TIER_PLUGIN_PATH="$prefix/lib/tier" TIER_PROFILE_PATH="$prefix/share/tier/profiles" \
      "$scratch/host-cpu/consumer_example_server" "$scratch/example-cold-cpu" > "$scratch/example.cpu" 2>&1 || {
      cat "$scratch/example.cpu"; echo "FAIL: the example server without CUDA"; exit 1; }
    grep -q 'turn 2: cold_restore, 256 tokens reused' "$scratch/example.cpu" || {
      cat "$scratch/example.cpu"; echo "FAIL: the example without CUDA did not restore from cold"; exit 1; }
    echo "COMPONENTS host configures, links and runs without CUDA"
    # The example server on the installed disk provider, twice: the second run re-adopts.
    for run in 1 2; do
      TIER_PLUGIN_PATH="$prefix/lib/tier" TIER_PROFILE_PATH="$prefix/share/tier/profiles" \
        "$scratch/host/consumer_example_server" "$scratch/example-cold" > "$scratch/example.$run" 2>&1 || {
        cat "$scratch/example.$run"; echo "FAIL: the example server (run $run)"; exit 1; }
    done
    grep -q 'turn 2: cold_restore, 256 tokens reused' "$scratch/example.1" || {
      cat "$scratch/example.1"; echo "FAIL: the example did not restore from cold"; exit 1; }
    grep -q 'turn 0: cold_restore, 256 tokens reused' "$scratch/example.2" || {
      cat "$scratch/example.2"; echo "FAIL: the restarted example did not re-adopt"; exit 1; }
    ;;
  default)
    configure "$scratch/default" "" "${visible[@]}" | grep 'every component loaded'
    ;;
  *)
    echo "run-sdk.sh: unknown mode '$mode'" >&2
    exit 2
    ;;
esac
echo "OK: $mode"
