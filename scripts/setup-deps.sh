#!/usr/bin/env bash
# Installs the Debian packages tracedb needs to build, test and run its demo. Idempotent: when
# every package is already installed it does nothing (and needs no network).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config python3
  liblz4-dev libsqlite3-dev sqlite3 libcli11-dev zlib1g-dev libedit-dev
  libgtest-dev libgmock-dev
  openmpi-bin libopenmpi-dev
  chromium time tmux
  libcpp-httplib-dev
  python3-dev python3-numpy python3-pandas python3-torch libtorch-dev pybind11-dev
  clang-14 libclang-rt-14-dev
)
# chromium: headless, loads exported traces in the speedscope viewer (tests/export_viewer_test);
# python3-*/libtorch-dev: the Python package and the PyTorch capture, built for Debian's
# /usr/bin/python3, the Python python3-torch installs into (python/, docs/python.md);
# libcpp-httplib-dev: the HTTP server of `tracedb view` (view/).
# tmux: drives `tracedb shell` on a terminal (tab completion, pager) in tests/shell_test.sh.
# time: GNU time, peak RSS of exports (tests, bench/run_export_bench.sh). The speedscope npm
# package itself is installed by tests/viewers/setup-speedscope.sh when the test runs, with npm
# (Debian packages nodejs and npm, unless a node with npm is already on the PATH, e.g. from
# NodeSource, whose nodejs bundles npm and conflicts with Debian's npm package).
# clang-14, libclang-rt-14-dev: the ASan+UBSan build and the libFuzzer targets (scripts/test.sh).
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
