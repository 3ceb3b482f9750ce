#!/usr/bin/env bash
# Builds tracedb and runs every test: the unit, diff and multi-process tests under CTest, then
# the recorder's concurrency tests again under ThreadSanitizer. This is the README's test
# command and what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc 2>/dev/null || echo 2)

"$root/scripts/setup-deps.sh"

echo "== build (RelWithDebInfo)"
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build" -j "$jobs"

echo "== tests"
(cd "$root/build" && ctest -j "$jobs" --output-on-failure --timeout 600)

echo "== recorder tests under ThreadSanitizer"
cmake -S "$root" -B "$root/build-tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTRACEDB_SANITIZE=thread -DTRACEDB_BENCH=OFF >/dev/null
cmake --build "$root/build-tsan" -j "$jobs" --target recorder_stress_test recorder_test
# die_after_fork=0: the fork test starts a session in the child, which TSan otherwise refuses.
export TSAN_OPTIONS="halt_on_error=1 die_after_fork=0"
export TRACEDB_TEST_TMP="$root/build-tsan/test-tmp"
"$root/build-tsan/tests/recorder_stress_test"
"$root/build-tsan/tests/recorder_test"

echo "== all tests passed"
