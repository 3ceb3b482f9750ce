#!/usr/bin/env bash
# The `tracedb view` benchmark (docs/bench-view.md): for each size, a Horovod-like job from
# bench/db_bench_gen compacted into a DB, served by `tracedb view`, opened in headless Chromium
# (first paint, zoom/pan latency, browser memory); beside it the same trace exported as Chrome
# JSON and loaded in speedscope, the viewer of tests/viewers, and in the Chrome-JSON loader of
# Chrome DevTools (npm @paulirish/trace_engine). Prints one JSON line per viewer and size.
# Usage: bench/run_view_bench.sh [BUILD_DIR] [WORK_DIR] [SIZES...]   (default sizes: 2M 10M)
#        PEER=0 skips the peers; SPEEDSCOPE=0 skips speedscope alone; ONLY_PEER=1 skips
#        tracedb view. RANKS=N generates N ranks (default 8; 4096 for the scale job).
#        FLAGS=lean and PROFILE=FILE are passed to bench/view_bench.mjs. NICE=-10 runs the server
#        and the browser at that priority (root only): on a machine loaded by others, the viewer
#        first in line for the CPU.
#        A DB already in WORK_DIR (job-SIZE.tdb, job-SIZE-rRANKS.tdb) is reused as it is, so a
#        second run on the same WORK_DIR only measures: GEN_ONLY=1 generates the DBs and stops;
#        DB=FILE measures that one DB (no SIZES, nothing generated). PERF=PREFIX records the
#        server's CPU profile over the browser's run into PREFIX-SIZE.data (perf record -g);
#        PERF_BROWSER=PREFIX the browser's and node's, by thread, into PREFIX-SIZE.data.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
work=${2:-/tmp/tracedb-view-bench}
mkdir -p "$work"
work=$(cd "$work" && pwd)
shift 2 || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(2000000 10000000)
[ -z "${DB:-}" ] || sizes=(db)
chromium=${CHROMIUM:-/usr/bin/chromium}
mkdir -p "$work"
pw=$("$root/tests/viewers/setup-playwright.sh" "$build/viewers/playwright" | tail -n1)
ss=$("$root/tests/viewers/setup-speedscope.sh" "$build/viewers" | tail -n1)
te=$("$root/bench/view_setup_trace_engine.sh" "$build/viewers/trace_engine" | tail -n1)
ranks=${RANKS:-8}
prio=(nice -n "${NICE:-0}")
for n in "${sizes[@]}"; do
  tag=$n
  [ "$ranks" = 8 ] || tag=$n-r$ranks
  db="$work/job-$tag.tdb"
  if [ -n "${DB:-}" ]; then
    db=$(cd "$(dirname "$DB")" && pwd)/$(basename "$DB")
    tag=$(basename "$db" .tdb)
  elif [ ! -f "$db" ]; then
    rm -rf "$work/gen-$tag"
    "$build/bench/db_bench_gen" "$work/gen-$tag" "$n" "$ranks" --no-csv >&2
    "$build/tracedb" compact "$work/gen-$tag/trace" -o "$db" -q
    rm -rf "$work/gen-$tag"
  fi
  [ "${GEN_ONLY:-0}" = 1 ] && { echo "$db: $(du -h "$db" | cut -f1)" >&2; continue; }
  json="$work/job-$tag.json"
  if [ "${PEER:-1}" = 1 ] && [ ! -f "$json" ]; then
    "$build/tracedb" export --chrome "$db" -o "$json" -q
  fi
  log="$work/view-$tag.log"
  rm -f "$log"  # else the loop below may read the URL of the previous run's server
  "${prio[@]}" "$build/tracedb" view "$db" --exit-after 900 > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do grep -qs token= "$log" && break; sleep 0.1; done
  url=$(grep -o 'http://[^ ]*token=[0-9a-f]*' "$log")
  echo "== $db ($n events, $ranks ranks): $(du -h "$db" | cut -f1) DB, $(du -h "$json" | cut -f1) JSON;" \
    "load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, nice ${NICE:-0}" >&2
  perf_pid=
  if [ -n "${PERF:-}" ]; then
    perf record -F 999 -g -p "$pid" -o "$PERF-$tag.data" 2> "$PERF-$tag.log" &
    perf_pid=$!
  fi
  wrap=("${prio[@]}")
  [ -z "${PERF_BROWSER:-}" ] || wrap+=(perf record -F 999 -o "$PERF_BROWSER-$tag.data" --)
  if [ "${PEER:-1}" = 1 ]; then  # PEER=0: tracedb view alone
    VIEW_PID=$pid TRACE_ENGINE=$te "${wrap[@]}" node "$root/bench/view_bench.mjs" "$pw" "$chromium" "$url" "$ss" "$json" |
      tee "$work/result-$tag.jsonl"
  else
    VIEW_PID=$pid "${wrap[@]}" node "$root/bench/view_bench.mjs" "$pw" "$chromium" "$url" | tee "$work/result-$tag.jsonl"
  fi
  if [ -n "$perf_pid" ]; then
    kill -INT "$perf_pid"
    wait "$perf_pid" 2>/dev/null || true
  fi
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
