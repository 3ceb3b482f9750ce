#!/usr/bin/env bash
# Installs the Debian packages tracedb needs. Idempotent: when every package of the chosen set is
# already installed it does nothing (and needs no network).
#
#   scripts/setup-deps.sh          everything: build, every test, the sanitizer and fuzz builds,
#                                  the benchmarks (scripts/test.sh runs this)
#   scripts/setup-deps.sh --demo   only what scripts/demo.sh needs: build and run tracedb, the
#                                  MPI job, and the PyTorch DDP part (scripts/demo.sh runs this);
#                                  no test framework, browser, Node.js, clang or tmux
set -euo pipefail

set_name=full
case "${1:-}" in
  "") ;;
  --demo) set_name=demo ;;
  *) echo "setup-deps: unknown option '$1' (--demo, or nothing for everything)" >&2; exit 2 ;;
esac

# The demo's set: the build (the `tracedb view` server's cpp-httplib included, the program links
# it), sqlite3 (the demo opens its database in the stock shell), MPI for the recorded job, and
# Python with PyTorch and pandas for its DDP part.
packages=(
  build-essential cmake ninja-build pkg-config python3
  liblz4-dev libsqlite3-dev sqlite3 libcli11-dev zlib1g-dev libedit-dev
  libcpp-httplib-dev
  openmpi-bin libopenmpi-dev
  python3-dev python3-numpy python3-pandas python3-torch libtorch-dev pybind11-dev
)
if [ "$set_name" = full ]; then
  packages+=(
    libgtest-dev libgmock-dev
    chromium time tmux zsh groff-base
    clang-14 libclang-rt-14-dev clang-format-14 clang-tidy-14
  )
fi
# The rest is for the tests:
# libgtest-dev, libgmock-dev: the C++ tests (the demo configures with -DTRACEDB_TESTS=OFF).
# chromium: headless, loads exported traces in the speedscope viewer (tests/export_viewer_test)
# and renders `tracedb report html` (tests/report_html_test.py).
# python3-*/libtorch-dev: the Python package and the PyTorch capture, built for Debian's
# /usr/bin/python3, the Python python3-torch installs into (python/, docs/python.md);
# libcpp-httplib-dev: the HTTP server of `tracedb view` (view/).
# tmux: drives `tracedb shell` on a terminal (tab completion, pager) in tests/shell_test.sh;
# groff-base: checks the manual page (tracedb --help-man) there too; zsh: the zsh completion.
# time: GNU time, peak RSS of exports (tests, bench/run_export_bench.sh). The speedscope npm
# package itself is installed by tests/viewers/setup-speedscope.sh when the test runs, with npm
# (Debian packages nodejs and npm, unless a node with npm is already on the PATH, e.g. from
# NodeSource, whose nodejs bundles npm and conflicts with Debian's npm package).
# clang-14, libclang-rt-14-dev: the ASan+UBSan build and the libFuzzer targets (scripts/test.sh);
# clang-format-14: the format check scripts/test.sh runs first; clang-tidy-14: scripts/tidy.sh.
if [ "$set_name" = full ] && { ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; }; then
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

echo "setup-deps ($set_name): installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
