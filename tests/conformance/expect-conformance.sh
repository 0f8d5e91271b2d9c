#!/usr/bin/env bash
# Runs a check (tier-conformance for the ConformanceSuite tests, check-provider-symbols.sh for the
# ProviderSymbols self-tests) and judges its outcome.
#   expect-conformance.sh pass REGEX CMD...   CMD exits 0 and its output matches REGEX
#   expect-conformance.sh fail REGEX CMD...   CMD's tests fail (exit 1) and a failure matches REGEX
set -uo pipefail
mode=$1 regex=$2
shift 2
out=$("$@" 2>&1)
rc=$?
show() { printf '%s\n' "$out" | grep -E '^\[  (FAILED|SKIPPED) |^\[  PASSED|Failure|never completed' | head -40; }
if [ "$mode" = pass ]; then
  if [ $rc -ne 0 ]; then show; echo "FAIL: exit $rc, expected the suite to pass"; exit 1; fi
else
  if [ $rc -eq 0 ]; then show; echo "FAIL: the suite passed a provider with this defect ('$regex')"; exit 1; fi
  if [ $rc -ne 1 ]; then printf '%s\n' "$out" | tail -20; echo "FAIL: exit $rc (not a test failure)"; exit 1; fi
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
  show
  echo "FAIL: exit $rc but nothing in the output matches '$regex'"
  exit 1
fi
printf '%s\n' "$out" | grep -E -- "$regex" | head -3
printf '%s\n' "$out" | grep -E '^\[  FAILED  \]' | sort -u | head -20
echo "OK: exit $rc, as expected ($mode)"
