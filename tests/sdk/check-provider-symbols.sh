#!/usr/bin/env bash
# A provider holds no project symbol outside the ABI and the leaves: `nm -C` over all its symbols
# (the static table too, not only the dynamic one) may name tier::<own>, tier::shuffle,
# tier::provider (plugins/kit), tier::Status and tier::Result, and nothing else in namespace tier
# (tier::device, tier::sim, tier::host, ...); `nm -D` shows exactly one defined dynamic symbol,
# tier_provider_entry.
# Usage: check-provider-symbols.sh LIB OWN_NAMESPACE      (OWN_NAMESPACE: "disk" for tier::disk)
set -euo pipefail
lib=$1 own=$2
[ -f "$lib" ] || { echo "FAIL: no such provider: $lib" >&2; exit 1; }

exports=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort -u)
if [ "$exports" != tier_provider_entry ]; then
  echo "FAIL: $lib exports more than tier_provider_entry:"
  printf '  %s\n' $exports
  exit 1
fi

symbols=$(nm -C "$lib" 2>&1) || { echo "FAIL: nm -C $lib: $symbols"; exit 1; }
if grep -q 'no symbols' <<<"$symbols"; then
  echo "FAIL: $lib is stripped: its project symbols cannot be checked"
  exit 1
fi
allowed="^tier::($own|shuffle|provider|Status|Result)$"
foreign=$(grep -oE '(^|[^A-Za-z0-9_:])tier::(\(anonymous namespace\)|[A-Za-z_][A-Za-z0-9_]*)' <<<"$symbols" |
          sed -E 's/^[^t]*//' | sort -u | grep -Ev "$allowed" || true)
if [ -n "$foreign" ]; then
  echo "FAIL: $lib carries project code outside the ABI and the leaves (allowed: tier::$own," \
       "tier::shuffle, tier::provider, tier::Status, tier::Result):"
  while IFS= read -r ns; do
    echo "  $ns, e.g.:"
    grep -F "$ns" <<<"$symbols" | sed -n 1,3p | sed 's/^/    /'
  done <<<"$foreign"
  exit 1
fi
count=$(grep -cE '(^|[^A-Za-z0-9_:])tier::' <<<"$symbols" || true)
echo "OK: $lib exports tier_provider_entry only; its $count tier:: symbols are all tier::$own," \
     "tier::shuffle, tier::provider or tier::Status/Result"
