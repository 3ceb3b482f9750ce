#!/usr/bin/env bash
# Installs the speedscope viewer (npm package speedscope, pinned) under DIR, once: a second run
# finds it and does nothing (no network). Prints the directory of its built app (index.html).
# Usage: tests/viewers/setup-speedscope.sh DIR
set -euo pipefail
version=1.25.0
dir=${1:?usage: setup-speedscope.sh DIR}
app="$dir/node_modules/speedscope/dist/release"
installed() {
  [ -f "$app/index.html" ] &&
    grep -q "\"version\": \"$version\"" "$dir/node_modules/speedscope/package.json"
}
if ! installed; then
  command -v npm >/dev/null || { echo "npm is not installed" >&2; exit 1; }
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-audit --no-fund --no-save --silent "speedscope@$version" >&2
  installed || { echo "speedscope $version did not install into $dir" >&2; exit 1; }
fi
echo "$app"
