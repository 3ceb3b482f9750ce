#!/usr/bin/env bash
# Builds tracedb and runs every test: the unit, diff and multi-process tests under CTest; the
# recorder's concurrency tests again under ThreadSanitizer; the core (non-MPI) tests again in a
# clang 14 ASan+UBSan build (every report fatal); and every libFuzzer target for a few seconds
# on its seed corpus (fixtures/fuzz/). This is the README's test command and what CI runs
# (.ci/run, with CI=true: tests on ../shared/fixtures then fail instead of skipping). It
# depends on no compiler cache. On an idle 2-core machine from a fresh clone it took 34 min on
# 2026-11-25 with full debug info (-g), over the 20-minute target: the three builds are about
# three quarters of it. The builds now keep line tables only (-g1: file and line in sanitizer
# reports and profiles, no variable info), which compiles a translation unit 26-34% faster:
# the same run then took 30 min (1,825 s), still over the target. Since then: the tests' shared
# helpers are compiled once, not once per test binary; the CLI (whose every file includes the
# header-only CLI11, ~8 s of each ~11 s compile) is compiled as one unity file
# (-DTRACEDB_UNITY_CLI=ON); the ThreadSanitizer stage runs the main build's tracedb instead of
# building the whole CLI under TSan; the sanitizer stages run their test binaries side by side,
# one per core (each one's output is printed when it fails). The same fresh-clone run (CI=true,
# idle 2-core machine, commit ac421d0) then took 21 min (1,265 s: main build 429 s, ctest 181 s,
# TSan stage 85 s, ASan stage 545 s of which its tests 153 s, fuzz 25 s): still over the
# 20-minute target, by about a minute. Since then the ASan stage's tests do the same checks
# with less CPU: the trace writer and the text-profile importers compile each SQL statement
# once per connection instead of once per batch (Db::PrepareCached; the every-prefix tests
# import each prefix as a batch of its own, and under ASan compiling SQL was most of their
# time), the JSON reader no longer zeroes its 2 MB buffer per file, the import sorter no
# longer reserves its whole 64 MB budget per import (under ASan: mapped and poisoned each
# time), the mutant tests compile their table checks once. Measured with this stage's
# ASAN_OPTIONS/UBSAN_OPTIONS, one binary at a time on the shared 2-core machine (load about
# 1), CPU seconds (user+sys) and wall: mpi_profile_import_test 150.5 -> 32.4 CPU-s (151 ->
# 33 s), import_test 63.5 -> 45.9 CPU-s (62 -> 45 s). The stage's ten binaries side by side
# (run_side_by_side, load 1.4-1.9) then took 84 s wall, 147 CPU-s (about 160 s and 300 CPU-s
# in the last CI log). The fuzz targets run one per core at a time, each for the same
# FUZZ_SECONDS: that stage took 12.5 s, not 25 s. The fresh-clone run (CI=true, idle 2-core
# machine, commit 6542090) then took 18.6 min (1,114 s: main build 418 s, ctest 176 s, TSan
# stage 82 s, ASan stage 424 s, fuzz 13 s): under the 20-minute target.
# FUZZ_SECONDS (default 5) sets each fuzz target's run.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc 2>/dev/null || echo 2)
start=$(date +%s)
stage() { echo "== $* ($(($(date +%s) - start)) s)"; }
# RelWithDebInfo with line tables only (see above).
flags=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG")

"$root/scripts/setup-deps.sh"

stage "build (RelWithDebInfo)"
# (TESTS ON again after a demo without GoogleTest.)
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${flags[@]}" \
  -DTRACEDB_UNITY_CLI=ON -DTRACEDB_TESTS=ON -DTRACEDB_BENCH=ON >/dev/null
cmake --build "$root/build" -j "$jobs"

# Runs test binaries DIR/NAME... side by side, at most $jobs at a time, each one's output in
# LOGS/NAME.log; prints a line per binary, the whole output of any that failed, and fails then.
run_side_by_side() {
  local dir=$1 logs=$2 t rc failed=0
  shift 2
  rm -rf "$logs" && mkdir -p "$logs"
  for t in "$@"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    ( rc=0; "$dir/$t" --gtest_brief=1 >"$logs/$t.log" 2>&1 || rc=$?; echo "$rc" >"$logs/$t.rc" ) &
  done
  wait
  for t in "$@"; do
    rc=$(cat "$logs/$t.rc")
    echo "-- $t: exit $rc, $(grep -E '^\[==========\].*ran' "$logs/$t.log" | tail -1)"
    if [ "$rc" != 0 ]; then cat "$logs/$t.log"; failed=1; fi
  done
  [ "$failed" = 0 ] || { echo "test binaries failed in $dir" >&2; exit 1; }
}

stage "tests"
(cd "$root/build" && ctest -j "$jobs" --output-on-failure --timeout 600)

stage "recorder tests under ThreadSanitizer"
# The tests run the main build's tracedb (the CLI is not what this stage checks).
cmake -S "$root" -B "$root/build-tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${flags[@]}" \
  -DTRACEDB_SANITIZE=thread -DTRACEDB_BENCH=OFF -DTRACEDB_TEST_BIN="$root/build/tracedb" >/dev/null
cmake --build "$root/build-tsan" -j "$jobs" --target recorder_stress_test recorder_test
# die_after_fork=0: the fork test starts a session in the child, which TSan otherwise refuses.
export TSAN_OPTIONS="halt_on_error=1 die_after_fork=0"
export TRACEDB_TEST_TMP="$root/build-tsan/test-tmp"
run_side_by_side "$root/build-tsan/tests" "$root/build-tsan/test-logs" recorder_stress_test recorder_test

unset TSAN_OPTIONS

stage "core tests under AddressSanitizer + UndefinedBehaviorSanitizer (clang 14)"
# The engine, compaction (with its kill campaign), diff, import, export, round-trip and CLI
# tests: everything but the MPI and recorder tests (TSan above covers the recorder, and the
# recording programs these tests run come from the main build).
# The longest first, so that the two cores stay busy to the end.
asan_tests=(import_test mpi_profile_import_test export_test compaction_test kill_test
  roundtrip_test engine_test cli_test diff_test output_file_test hostile_db_test)
fuzzers=(segment_file_fuzz segment_block_payload_fuzz event_block_payload_fuzz json_fuzz
  hostile_db_fuzz)
cmake -S "$root" -B "$root/build-asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${flags[@]}" \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DTRACEDB_SANITIZE=address,undefined -DTRACEDB_BENCH=OFF -DTRACEDB_UNITY_CLI=ON \
  -DTRACEDB_RECORDING_PROGRAMS_DIR="$root/build/tests" >/dev/null
cmake --build "$root/build-asan" -j "$jobs" --target "${asan_tests[@]}" "${fuzzers[@]}"
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TRACEDB_TEST_TMP="$root/build-asan/test-tmp"
run_side_by_side "$root/build-asan/tests" "$root/build-asan/test-logs" "${asan_tests[@]}"

stage "fuzz smoke runs (libFuzzer, ${FUZZ_SECONDS:-5} s each)"
# One target per core at a time (each is one process on one thread, for the same time each).
logs="$root/build-asan/fuzz-logs"
rm -rf "$logs" && mkdir -p "$logs"
for f in "${fuzzers[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  # New inputs go to a scratch corpus; the checked-in seeds are only read.
  corpus="$root/build-asan/fuzz-corpus/$f"
  mkdir -p "$corpus"
  ( rc=0
    "$root/build-asan/$f" -max_total_time="${FUZZ_SECONDS:-5}" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 "$corpus" "$root/fixtures/fuzz/$f" >"$logs/$f.log" 2>&1 || rc=$?
    echo "$rc" >"$logs/$f.rc" ) &
done
wait
fuzz_failed=0
for f in "${fuzzers[@]}"; do
  echo "-- $f: exit $(cat "$logs/$f.rc")"
  if [ "$(cat "$logs/$f.rc")" != 0 ]; then
    cat "$logs/$f.log"
    echo "fuzz target $f failed" >&2
    fuzz_failed=1
  else
    grep -E "^stat::number_of_executed_units|^INFO: seed corpus|ERROR|SUMMARY|unclean" \
      "$logs/$f.log" || true
  fi
done
[ "$fuzz_failed" = 0 ] || exit 1

stage "all tests passed"
