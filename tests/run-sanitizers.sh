#!/usr/bin/env bash
# Sanitizer builds and runs (CUDA off: the device path cannot run under them and nvcc is slow):
#  - AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer included): the whole project and
#    every ctest suite, minus the exclusions listed below with their reasons;
#  - ThreadSanitizer: the concurrency tests (the disk provider's suites, Stress, CrashRecovery,
#    the AbiConformance suite against the disk provider, the Host library's suites).
# Usable by CI (.ci/run) and by developers.
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: tests/run-sanitizers.sh [--only asan|tsan] [--build-root DIR] [-j N] [--help]

  --only asan   only the AddressSanitizer+UndefinedBehaviorSanitizer build and its ctest run
  --only tsan   only the ThreadSanitizer build of the concurrency tests and their run
  --build-root  where build-asan/ and build-tsan/ go (default: the repository root)
  -j N          build and test parallelism (default: nproc)

Any sanitizer report fails the run (halt_on_error). Exit status 0 when everything is clean.
USAGE
}

root=$(cd "$(dirname "$0")/.." && pwd)
build_root=$root
only=""
jobs=$(nproc)
while [ $# -gt 0 ]; do
  case $1 in
    --only) only=${2:?}; shift 2 ;;
    --build-root) build_root=${2:?}; shift 2 ;;
    -j) jobs=${2:?}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run-sanitizers: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
case $only in ""|asan|tsan) ;; *) echo "run-sanitizers: --only asan|tsan" >&2; exit 2 ;; esac

# clang, -O1: a sanitizer build of everything on two cores must fit CI's budget. clang compiles
# the instrumented code 2.5-3x faster than g++ here; -O1 keeps it fast enough to run and the
# stacks readable. (CC/CXX in the environment override the compiler.)
cc=${CC:-clang}
cxx=${CXX:-clang++}
is_clang=0
grep -q clang <<<"$("$cxx" --version)" && is_clang=1
configure() {  # DIR SANITIZERS [extra cmake arguments]
  local dir=$1 sanitizers=$2
  shift 2
  CC=$cc CXX=$cxx cmake -S "$root" -B "$dir" -G Ninja -DTIER_SANITIZE="$sanitizers" \
    -DTIER_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" "$@" >/dev/null
}
# clang puts the sanitizer runtime in executables only, and the plugins (MODULEs linked with
# --no-undefined) reference it. ASan: link everything against the shared runtime (an rpath finds
# it). TSan: clang 14's shared TSan runtime crashes at start, so executables keep the static one
# (which they export) and the plugins leave its symbols to dlopen (-z undefs, placed after the
# plugins' --no-undefined).
asan_args=()
tsan_args=()
if [ $is_clang -eq 1 ]; then
  runtime_dir=$(dirname "$("$cxx" -print-file-name=libclang_rt.asan-x86_64.so)")
  shared="-shared-libsan -Wl,-rpath,$runtime_dir"
  asan_args=(-DCMAKE_EXE_LINKER_FLAGS="$shared" -DCMAKE_SHARED_LINKER_FLAGS="$shared"
             -DCMAKE_MODULE_LINKER_FLAGS="$shared")
  tsan_args=(-DCMAKE_C_STANDARD_LIBRARIES=-Wl,-z,undefs -DCMAKE_CXX_STANDARD_LIBRARIES=-Wl,-z,undefs)
fi

# What the ASan build builds: every directory's targets (all ctest needs) except cuda/'s two
# benchmarks; of those only tier-device-bench runs in ctest (a CPU smoke test). tier-shuffle-ratio
# is left out: clang 14 has no _Float16 on x86 (the normal g++ build compiles it).
asan_targets=(abi/all host_shim/all plugins/all tests/all tier-device-bench)

# Tests that cannot run under a sanitizer, with why (ctest -E regex).
#  OutOfTree.*: builds a plugin against the installed SDK without the sanitizer runtime and loads
#    it into the instrumented tier-host; mixing the two is not meaningful (it runs in the normal
#    build).
#  Replay.MooncakeTraceRestoresFromColdExactly: the 3,993-request trace replay runs in the normal
#    build; under ASan it takes ~2.5 minutes of CI's budget and reaches no code the agents replay
#    tests (which do run here) do not.
#  The rados suites (RadosCluster.*, Rados*.*, conformance.rados) do run here: LeakSanitizer is
#    quiet about librados (checked: connect, I/O, shutdown report nothing), and they start their
#    own single-node cluster in build-asan/tests/rados/cluster (~110 s in all, one at a time under
#    RESOURCE_LOCK ceph_cluster). Without the ceph binaries they skip, saying why.
#  SdkPackage.*, ProviderSymbols.*: build consumer projects against an installed SDK without the
#    sanitizer runtime, and read the providers' symbol tables (the instrumented ones carry the
#    sanitizer's): both check packaging, which the normal build checks.
#  HostAdmission.ProviderThatNeverCompletesCostsATimeoutNotAHang: abandons a provider that never
#    completes, by design: what the provider still holds (its instance, the host services it was
#    handed, each call's completion context) is leaked on purpose so it is never freed under it.
#    It runs after the others with ASan and UBSan on and LeakSanitizer off; so does
#    HostOpen.AnAbandonedProviderReturningLateFindsInertServices (an instance abandoned the same way)
#    and HostEngineContract.StuckRestoreCostsThePrefillItReplacesThenRestoresBackOff (the same).
asan_leaky='^(HostAdmission\.ProviderThatNeverCompletesCostsATimeoutNotAHang|HostOpen\.AnAbandonedProviderReturningLateFindsInertServices|HostEngineContract\.StuckRestoreCostsThePrefillItReplacesThenRestoresBackOff)$'
#  ConformanceSuite.EveryBadProviderIsCaughtEveryRun: runs each bad provider's case 50 times to
#    prove the kit's checks do not depend on timing; each case itself runs here once (its own
#    ConformanceSuite.Catches* test), the 50-run loop in the normal build (~1 min there, several
#    under ASan).
asan_exclude="^OutOfTree\.|^SdkPackage\.|^ProviderSymbols\.|^Replay\.MooncakeTraceRestoresFromColdExactly\$|^ConformanceSuite\.EveryBadProviderIsCaughtEveryRun\$|$asan_leaky"

# The concurrency tests (ctest -R regex): every suite of the disk provider (thread pools, io_uring
# completions, remove racing restore, close with operations in flight), the reliability suites
# that run threads or processes, and AbiConformance against the disk provider.
# And the Host library's suites: its provider-call threads, event queue and releaser against
# providers that complete late, never, or from their own threads.
tsan_targets=(tier_disk tier_disk_tests tier_reliability_tests tier-conformance tier_host_tests
              tier_testprov_scripted tier_null tier_testprov_wrong_major)
tsan_tests='^(DiskPlugin|DiskDirs|DiskAbi|FaultInjection|FaultSweep|FullFilesystem|Stress|CrashRecovery|Security|HostAdmission|HostPressure|HostOpen|HostEngineContract|HostCloseFlush)\.|^conformance\.disk'
# The seeded simulation of the Host (tests/simulation): the Host's call threads, the CPU engine's
# worker and completions on foreign threads, all at once, on a small budget.
tsan_targets+=(tier_simulation_tests tier_sim_bridge)
tsan_tests="$tsan_tests|^Simulation\."
# KV events (issue 23): the publisher thread against the scheduler thread's queue and the replay.
tsan_targets+=(tier_host_kv_events_tests tier_disk)
tsan_tests="$tsan_tests|^HostKvEvents\.|^KvEventsEncoding\."

start=$(date +%s)
status=0

if [ "$only" != tsan ]; then
  dir=$build_root/build-asan
  echo "== ASan+UBSan: configure and build everything in $dir"
  configure "$dir" "address,undefined" "${asan_args[@]}"
  cmake --build "$dir" -j "$jobs" --target "${asan_targets[@]}"
  echo "== ASan+UBSan: ctest (built in $(( $(date +%s) - start )) s)"
  # allocator_may_return_null: see TSan below (the Host's whole-arena pin at Open falls back).
  export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_odr_violation=1:allocator_may_return_null=1
  # The power-loss loop (tests/powerloss) runs 1,000 cuts in the normal build; under ASan every
  # worker start and provider open is several times slower, so 100 cuts here (the FUSE filesystem
  # is served by the instrumented test process itself: it is checked too).
  # The enumeration keeps every subset of up to 8 (not 10) pending calls, samples 256 beyond.
  export TIER_POWERLOSS_CUTS=100 TIER_POWERLOSS_EXHAUSTIVE=8 TIER_POWERLOSS_SAMPLED=256
  export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
  export LSAN_OPTIONS=suppressions=$root/tests/lsan-suppressions.txt
  # The Host simulation: 100 seeds of 500 steps (the normal build runs 400 of 1,000).
  export TIER_SIM_SEEDS=100 TIER_SIM_OPS=500
  ctest --test-dir "$dir" -E "$asan_exclude" -j "$jobs" --output-on-failure --timeout 900 ||
    status=1
  ASAN_OPTIONS=${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0} \
    ctest --test-dir "$dir" -R "$asan_leaky" --output-on-failure --timeout 900 || status=1
  unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS TIER_POWERLOSS_CUTS TIER_POWERLOSS_EXHAUSTIVE TIER_POWERLOSS_SAMPLED
  unset TIER_SIM_SEEDS TIER_SIM_OPS
  echo "== ASan+UBSan: done at $(( $(date +%s) - start )) s"
fi

if [ "$only" != asan ]; then
  t0=$(date +%s)
  dir=$build_root/build-tsan
  echo "== TSan: configure and build the concurrency tests in $dir"
  configure "$dir" "thread" "${tsan_args[@]}"
  cmake --build "$dir" -j "$jobs" --target "${tsan_targets[@]}"
  echo "== TSan: ctest (built in $(( $(date +%s) - t0 )) s)"
  # allocator_may_return_null: the Host pins its whole arena at Open (2 x host_capacity_bytes by
  # default, 32 GiB) and takes smaller chunks when that is refused; TSan's allocator would abort
  # instead of refusing.
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1:suppressions=$root/tests/tsan-suppressions.txt
  export TIER_SIM_SEEDS=30 TIER_SIM_OPS=500
  ctest --test-dir "$dir" -R "$tsan_tests" -j "$jobs" --output-on-failure --timeout 900 ||
    status=1
  unset TSAN_OPTIONS TIER_SIM_SEEDS TIER_SIM_OPS
  echo "== TSan: done in $(( $(date +%s) - t0 )) s"
fi

echo "run-sanitizers: $([ $status -eq 0 ] && echo clean || echo FAILED) in $(( $(date +%s) - start )) s"
exit $status
