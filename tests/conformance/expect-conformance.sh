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
# Here-strings, not `printf | grep -q`: under pipefail a reader that stops at the first match can
# kill the writer with SIGPIPE and turn a match into a failure (it did once in CI, under load).
show() { grep -E '^\[  (FAILED|SKIPPED) |^\[  PASSED|Failure|never completed' <<<"$out" | sed -n 1,40p; }
if [ "$mode" = pass ]; then
  if [ $rc -ne 0 ]; then show; echo "FAIL: exit $rc, expected the suite to pass"; exit 1; fi
else
  if [ $rc -eq 0 ]; then show; echo "FAIL: the suite passed a provider with this defect ('$regex')"; exit 1; fi
  if [ $rc -ne 1 ]; then printf '%s\n' "$out" | tail -20; echo "FAIL: exit $rc (not a test failure)"; exit 1; fi
fi
if ! grep -Eq -- "$regex" <<<"$out"; then
  show
  echo "FAIL: exit $rc but nothing in the output matches '$regex'"
  exit 1
fi
grep -E -- "$regex" <<<"$out" | sed -n 1,3p
grep -E '^\[  FAILED  \]' <<<"$out" | sort -u | sed -n 1,20p
echo "OK: exit $rc, as expected ($mode)"
