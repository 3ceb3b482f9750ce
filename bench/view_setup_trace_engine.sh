#!/usr/bin/env bash
# Installs npm @paulirish/trace_engine (pinned: the trace model of Chrome DevTools' Performance
# panel, the Chrome-JSON loader the view benchmark uses as its Perfetto-compatible peer) under
# DIR, once: a second run finds it and does nothing (no network). Prints DIR/node_modules.
# Usage: bench/view_setup_trace_engine.sh DIR
set -euo pipefail
version=0.0.65
dir=${1:?usage: view_setup_trace_engine.sh DIR}
pkg="$dir/node_modules/@paulirish/trace_engine"
installed() {
  [ -f "$pkg/models/trace/trace.js" ] && grep -q "\"version\": \"$version\"" "$pkg/package.json"
}
if ! installed; then
  command -v npm >/dev/null || { echo "npm is not installed" >&2; exit 1; }
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-audit --no-fund --no-save --silent \
    "@paulirish/trace_engine@$version" >&2
  installed || { echo "@paulirish/trace_engine $version did not install into $dir" >&2; exit 1; }
fi
echo "$dir/node_modules"
