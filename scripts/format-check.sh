#!/usr/bin/env bash
# Checks that every tracked C/C++ source is formatted as .clang-format says (clang-format 14, the
# version CI installs); prints the files that are not and exits 1. `scripts/format-check.sh --fix`
# rewrites them in place instead. scripts/test.sh runs the check first.
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format-14 || true)
[ -n "$fmt" ] || { echo "format-check: clang-format-14 is not installed (scripts/setup-deps.sh)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.c' '*.cpp' '*.hpp')
if [ "${1:-}" = --fix ]; then "$fmt" -i "${files[@]}"; exit 0; fi
# One clang-format process for all files; --Werror makes every misformatted line an error that
# names its file.
out=$("$fmt" --dry-run --Werror "${files[@]}" 2>&1) || true
mapfile -t bad < <(printf '%s\n' "$out" | grep -oE '^[^:]+:[0-9]+:[0-9]+: error' | cut -d: -f1 | sort -u)
if [ ${#bad[@]} -ne 0 ]; then
  printf 'format-check: not formatted as .clang-format says (scripts/format-check.sh --fix):\n' >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "format-check: ${#files[@]} files formatted"
