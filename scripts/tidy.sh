#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy's checks) on the C++ sources changed since a base revision:
#   scripts/tidy.sh [BASE] [BUILD_DIR]     BASE defaults to origin/main, else main's merge base,
#                                          else HEAD~1; BUILD_DIR (default build) must hold the
#                                          compile_commands.json of a configured build.
# Prints clang-tidy's findings and exits 1 when there are any, 0 when there are none. Only files
# with an entry in compile_commands.json are checked (headers through the sources including them).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:-}
build=${2:-build}
if [ -z "$base" ]; then
  for b in origin/main main HEAD~1; do
    if git rev-parse -q --verify "$b" >/dev/null; then base=$(git merge-base HEAD "$b"); break; fi
  done
fi
tidy=$(command -v clang-tidy-14 || command -v clang-tidy || true)
[ -n "$tidy" ] || { echo "tidy: clang-tidy is not installed (scripts/setup-deps.sh installs it)" >&2; exit 2; }
[ -f "$build/compile_commands.json" ] ||
  { echo "tidy: $build/compile_commands.json not found: configure a build first" >&2; exit 2; }
mapfile -t files < <(git diff --name-only --diff-filter=ACMR "$base" -- '*.cc' '*.cpp' |
  while read -r f; do grep -q "\"file\": \"$(pwd)/$f\"" "$build/compile_commands.json" && echo "$f"; done)
if [ ${#files[@]} -eq 0 ]; then echo "tidy: no changed C++ source since $base"; exit 0; fi
echo "tidy: ${#files[@]} changed source(s) since $base"
out=$("$tidy" -p "$build" --quiet "${files[@]}" 2>/dev/null || true)
if printf '%s\n' "$out" | grep -qE ': (warning|error):'; then
  printf '%s\n' "$out"
  exit 1
fi
echo "tidy: no findings"
