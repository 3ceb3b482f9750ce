#!/usr/bin/env bash
# Builds tracedb and runs every test; the README's test command and what CI runs (.ci/run, with
# CI=true: tests on ../shared/fixtures then fail instead of skipping). Stages, in order: the
# format check (clang-format 14); the main build (warnings are errors) and every test under CTest,
# the two sanitizer builds beside it at the lowest priority; the recorder's concurrency tests
# again under ThreadSanitizer; the core (non-MPI) tests again in
# a clang 14 ASan+UBSan build (every report fatal); every libFuzzer target for FUZZ_SECONDS
# (default 5) on its seed corpus (fixtures/fuzz/). It depends on no compiler cache. Target: under
# 20 minutes from a fresh clone on an idle 2-core machine; the measured stage times and how the
# suite got there are in docs/testing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc 2>/dev/null || echo 2)
start=$(date +%s)
stage() { echo "== $* ($(($(date +%s) - start)) s)"; }
# RelWithDebInfo with line tables only (see above).
# Unity batches (TRACEDB_UNITY, root CMakeLists.txt) in all three builds: the headers a batch of
# files shares are parsed once (docs/testing.md has the compile times with and without).
flags=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DTRACEDB_UNITY=ON)

"$root/scripts/setup-deps.sh"

stage "format check (clang-format 14)"
"$root/scripts/format-check.sh"

stage "build (RelWithDebInfo, warnings are errors)"
# (TESTS ON again after a demo without GoogleTest.)
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${flags[@]}" \
  -DTRACEDB_UNITY_CLI=ON -DTRACEDB_TESTS=ON -DTRACEDB_BENCH=ON -DTRACEDB_WERROR=ON >/dev/null
cmake --build "$root/build" -j "$jobs"

# Runs test binaries BUILD/tests/NAME (BUILD/NAME given as one argument) side by side, at most
# $jobs at a time, each one's output in BUILD/test-logs/NAME.log and its scratch folders under
# BUILD/test-tmp; prints a line per binary with its time, the whole output of any that failed,
# and fails then.
run_side_by_side() {
  local spec t dir name rc failed=0 t0
  for spec in "$@"; do
    dir=${spec%/*}
    rm -rf "$dir/test-logs" && mkdir -p "$dir/test-logs"
  done
  for spec in "$@"; do
    dir=${spec%/*} name=${spec##*/}
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    ( rc=0; t0=$(date +%s)
      TRACEDB_TEST_TMP="$dir/test-tmp" "$dir/tests/$name" --gtest_brief=1 \
        >"$dir/test-logs/$name.log" 2>&1 || rc=$?
      echo "$rc $(($(date +%s) - t0))" >"$dir/test-logs/$name.rc" ) &
  done
  wait
  for spec in "$@"; do
    dir=${spec%/*} name=${spec##*/}
    read -r rc t <"$dir/test-logs/$name.rc"
    echo "-- ${dir##*/}/$name: exit $rc in $t s, $(grep -E '^\[==========\].*ran' "$dir/test-logs/$name.log" | tail -1)"
    if [ "$rc" != 0 ]; then cat "$dir/test-logs/$name.log"; failed=1; fi
  done
  [ "$failed" = 0 ] || { echo "test binaries failed" >&2; exit 1; }
}

# The sanitizer stages' test binaries (ASan+UBSan: the engine, compaction with its kill campaign,
# diff, import, export, round-trip and CLI tests, the hostile databases, the report's data (its
# overflow known answers) and the view's server (a hostile client): the readers of bytes from
# outside; the longest first, so that the two cores stay busy to the end) and fuzz targets.
asan_tests=(import_test mpi_profile_import_test export_test compaction_test kill_test
  roundtrip_test engine_test hostile_db_test view_test cli_test diff_test report_data_test
  output_file_test)
fuzzers=(segment_file_fuzz segment_block_payload_fuzz event_block_payload_fuzz json_fuzz
  hostile_db_fuzz)

# The sanitizer builds compile the tests' own code at the build's -O2 (TRACEDB_TEST_OPT_FLAGS
# empty; the main build's default is -O1, tests/CMakeLists.txt): under ASan the test bodies do
# much of the work, and clang saves little by -O1 (docs/testing.md).
# The two sanitizer builds run beside CTest, at the lowest CPU priority (nice 19): the tests wait
# on processes, sockets and timers for about a third of their time, and the compilers take what
# the tests leave (docs/testing.md has the stage times with and without). The builds' output goes
# to build/sanitizer-builds.log, printed when one fails. They need only the main build's programs.
sanitizer_builds() {
  cmake -S "$root" -B "$root/build-tsan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${flags[@]}" \
    -DTRACEDB_SANITIZE=thread -DTRACEDB_BENCH=OFF -DTRACEDB_TEST_BIN="$root/build/tracedb" \
    -DTRACEDB_TEST_OPT_FLAGS=
  cmake --build "$root/build-tsan" -j "$jobs" --target recorder_stress_test recorder_test
  cmake -S "$root" -B "$root/build-asan" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${flags[@]}" \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DTRACEDB_SANITIZE=address,undefined -DTRACEDB_BENCH=OFF -DTRACEDB_UNITY_CLI=ON \
    -DTRACEDB_RECORDING_PROGRAMS_DIR="$root/build/tests" -DTRACEDB_TEST_OPT_FLAGS=
  cmake --build "$root/build-asan" -j "$jobs" --target "${asan_tests[@]}" "${fuzzers[@]}"
}
san_log="$root/build/sanitizer-builds.log"
# In a session of its own, so that a failed run stops the whole build (compilers included).
setsid -w nice -n 19 bash -c "$(declare -p root flags jobs asan_tests fuzzers); $(declare -f sanitizer_builds); set -euo pipefail; sanitizer_builds" \
  >"$san_log" 2>&1 &
san_pid=$!
trap 'kill -- -"$san_pid" 2>/dev/null || true' EXIT

stage "tests (the sanitizer builds beside them)"
(cd "$root/build" && ctest -j "$jobs" --output-on-failure --timeout 600)

stage "the sanitizer builds' end"
if ! wait "$san_pid"; then
  cat "$san_log"
  echo "a sanitizer build failed (log above: $san_log)" >&2
  exit 1
fi
trap - EXIT
tail -n 2 "$san_log"

stage "recorder tests under ThreadSanitizer, core tests under ASan+UBSan (clang 14)"
# One pool for both, so that neither stage's last binary leaves a core idle. The recorder's
# tests run the main build's tracedb (the CLI is not what TSan checks here); die_after_fork=0:
# the fork test starts a session in the child, which TSan otherwise refuses. The ASan tests
# (asan_tests above) leave out the MPI and recorder tests: TSan covers the recorder, and the
# recording programs these tests run come from the main build. Each sanitizer reads only its
# own options.
export TSAN_OPTIONS="halt_on_error=1 die_after_fork=0"
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
run_side_by_side "$root/build-tsan/recorder_stress_test" "$root/build-tsan/recorder_test" \
  "${asan_tests[@]/#/$root/build-asan/}"

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
