#!/usr/bin/env bash
# Style.ClangFormatClean: every C/C++/CUDA source of the project is as clang-format (the
# repository's .clang-format) writes it. Skips (exit 77, saying so) where clang-format is absent.
set -euo pipefail
root=${1:?usage: check-format.sh SOURCE_DIR}
if ! command -v clang-format >/dev/null; then
  echo "SKIP: clang-format not installed (Debian package clang-format)"
  exit 77
fi
cd "$root"
mapfile -t files < <(find abi plugins host_shim cuda tests -type f \
  \( -name '*.c' -o -name '*.cc' -o -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
[ ${#files[@]} -gt 100 ] || { echo "only ${#files[@]} sources found under $root"; exit 1; }
if ! clang-format --dry-run --Werror "${files[@]}" 2>/tmp/tier-format.$$; then
  grep -E "clang-format-violations" /tmp/tier-format.$$ | cut -d: -f1 | sort -u | sed 's/^/not formatted: /'
  echo "fix with: clang-format -i FILE (clang-format $(clang-format --version | grep -o '[0-9.]*' | sed -n 1p))"
  rm -f /tmp/tier-format.$$
  exit 1
fi
rm -f /tmp/tier-format.$$
echo "${#files[@]} sources clang-format clean"
