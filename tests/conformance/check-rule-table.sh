#!/usr/bin/env bash
# ConformanceSuite.RuleTableMatchesTheReadme: the rule table in abi/README.md (between the
# rules:begin and rules:end markers) is what `tier-conformance --list-rules` prints.
#   check-rule-table.sh TIER_CONFORMANCE README
set -euo pipefail
tool=$1 readme=$2
want=$("$tool" --list-rules)
got=$(sed -n '/^<!-- rules:begin -->$/,/^<!-- rules:end -->$/p' "$readme" | sed '1d;$d')
if [ "$want" != "$got" ]; then
  diff <(printf '%s\n' "$want") <(printf '%s\n' "$got") | sed -n 1,20p
  echo "FAIL: abi/README.md's rule table differs from tier-conformance --list-rules (paste it in)"
  exit 1
fi
echo "OK: $(printf '%s\n' "$want" | tail -n +3 | wc -l) rules, README and tool agree"
