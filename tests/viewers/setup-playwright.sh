#!/usr/bin/env bash
# Installs the npm package playwright-core (pinned; it never downloads a browser: the tests drive
# Debian's chromium) under DIR, once: a second run finds it and does nothing (no network).
# Prints DIR/node_modules/playwright-core.
# Usage: tests/viewers/setup-playwright.sh DIR
set -euo pipefail
version=1.49.1
dir=${1:?usage: setup-playwright.sh DIR}
pkg="$dir/node_modules/playwright-core"
installed() {
  [ -f "$pkg/package.json" ] && grep -q "\"version\": \"$version\"" "$pkg/package.json"
}
if ! installed; then
  command -v npm >/dev/null || { echo "npm is not installed" >&2; exit 1; }
  mkdir -p "$dir"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$dir" --no-audit --no-fund \
    --no-save --silent "playwright-core@$version" >&2
  installed || { echo "playwright-core $version did not install into $dir" >&2; exit 1; }
fi
echo "$pkg"
