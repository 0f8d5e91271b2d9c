#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang, ASan and UBSan, and runs each for a bounded
# time from the repository's seed corpus and regression inputs. Fails on any crash, leak, timeout,
# out-of-memory or violated property. Usable by CI (.ci/run) and by developers.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: tests/run-fuzz.sh [--seconds N] [--build DIR] [--target header|options|simulation]... [--help]

  --seconds N   fuzzing time per target (default 60)
  --build DIR   build directory (default <repo>/build-fuzz; configured with clang, TIER_FUZZ=ON)
  --target T    run only T (repeatable): header (on-disk header and segment-table parser),
                options (option parsing), or simulation (the Host simulation's operation
                interpreter, tests/simulation; it builds the Host library first); default header
                and options

Each target fuzzes into <build>/fuzz-corpus/<target> (new inputs persist between runs) starting from
tests/fuzz/corpus/<target> and tests/fuzz/regressions/<target>. A failure leaves the input in
<build>/fuzz-artifacts/<target>/; reproduce it with `<build>/tests/fuzz/tier_fuzz_<target> FILE`,
fix the bug, and commit the input under tests/fuzz/regressions/<target>/ (the FuzzRegression suite
then runs it in every build) with a named test in tests/fuzz/fuzz_regression_test.cc.
Exit status: 0 when every target ran clean, 1 when a target found something, 2 on usage or build
errors.
USAGE
}

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build-fuzz
seconds=60
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=${2:?}; shift 2 ;;
    --build) build=${2:?}; shift 2 ;;
    --target) targets+=("${2:?}"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run-fuzz: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(header options)
for t in "${targets[@]}"; do
  case $t in header|options|simulation) ;; *) echo "run-fuzz: unknown target '$t'" >&2; exit 2 ;; esac
done

command -v clang++ >/dev/null || { echo "run-fuzz: clang++ not found (apt-get install clang)" >&2; exit 2; }
if ! echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, long) { return 0; }' |
     clang++ -x c++ -fsanitize=fuzzer - -o /dev/null 2>/dev/null; then
  echo "run-fuzz: clang cannot link libFuzzer (apt-get install libclang-rt-14-dev)" >&2
  exit 2
fi

start=$(date +%s)
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DTIER_FUZZ=ON -DTIER_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 2
cmake --build "$build" --target $(printf 'tier_fuzz_%s ' "${targets[@]}") || exit 2
echo "run-fuzz: built in $(( $(date +%s) - start )) s"

failed=0
for t in "${targets[@]}"; do
  work=$build/fuzz-corpus/$t
  artifacts=$build/fuzz-artifacts/$t
  mkdir -p "$work" "$artifacts"
  rm -f "$artifacts"/*
  echo "== fuzzing $t for $seconds s"
  set +e
  "$build/tests/fuzz/tier_fuzz_$t" "$work" "$root/tests/fuzz/corpus/$t" \
    "$root/tests/fuzz/regressions/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 >"$build/fuzz-$t.log" 2>&1
  rc=$?
  set -e
  grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added)' "$build/fuzz-$t.log" || true
  found=$(find "$artifacts" -type f | sed -n 1,5p)
  if [ $rc -ne 0 ] || [ -n "$found" ]; then
    echo "run-fuzz: $t FAILED (exit $rc); log: $build/fuzz-$t.log" >&2
    grep -E 'ERROR|property violated|SUMMARY' "$build/fuzz-$t.log" | sed -n 1,5p >&2 || true
    for f in $found; do echo "  input: $f" >&2; done
    failed=1
  else
    echo "run-fuzz: $t clean"
  fi
done
echo "run-fuzz: done in $(( $(date +%s) - start )) s"
exit $failed
