#!/usr/bin/env bash
# `tracedb explain` (wait states, root causes, critical path: docs/why.md) over a generated job,
# beside one full scan of `events` in the same run: the target of issue 22 is explain in at most
# 2x one full scan. The job is db_bench_gen --mpi (an 8-rank Horovod-like job with an MPI thread
# per rank: sends, receives and collectives matched across ranks, steps), compacted. Each is run
# REPS times (default 3) in a fresh process; the medians of wall and CPU (user + system) time
# are printed, and the ratios. On a shared machine the CPU ratio is the one to read.
# Three yardsticks: one full scan of `events` that decodes every column (an aggregate of each
# of its 24 columns: the target's "one full scan"), a scan of the 9 columns the analysis
# decodes, and the cheapest scan (count(*), sum(dur)).
# Usage: bench/run_explain_bench.sh [EVENTS]   (default 10000000)
#   BUILD_DIR (default build) the build to use (targets tracedb_cli, db_bench_gen);
#   TRACEDB_BENCH_DIR (default /tmp/tracedb-explain-bench) the scratch folder;
#   BEFORE (optional) another tracedb binary (e.g. main's) whose explain is timed in the same
#   run, for before/after figures side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
n=${1:-10000000}
reps=${REPS:-3}
bin=${BUILD_DIR:-$root/build}
work=${TRACEDB_BENCH_DIR:-/tmp/tracedb-explain-bench}
cmake --build "$bin" --target tracedb_cli db_bench_gen >/dev/null
dir="$work/$n"
if [ ! -f "$dir/job.tdb" ]; then
  rm -rf "$dir"
  mkdir -p "$dir"
  "$bin/bench/db_bench_gen" "$dir" "$n" 8 --mpi --no-csv >/dev/null
  "$bin/tracedb" compact "$dir/trace" -o "$dir/job.tdb" -q
fi
events=$("$bin/tracedb" query "$dir/job.tdb" "SELECT sum(count) FROM main.blocks" -f csv | tail -1)

# Median of REPS runs of a command: "wall_s cpu_s".
measure() {
  local i out
  for ((i = 0; i < reps; i++)); do
    /usr/bin/time -o "$dir/time.txt" -f "%e %U %S" "$@" >/dev/null 2>&1
    awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }' "$dir/time.txt"
  done | sort -n -k2 | awk -v r="$reps" 'NR == int((r + 1) / 2)'
}
scan=$(measure "$bin/tracedb" query "$dir/job.tdb" "SELECT count(*), sum(dur) FROM events" -f csv)
# A second yardstick, like for like: a scan of the columns the analysis decodes (times, names,
# nesting, tracks and the communication arguments), through SQL.
cols_sql="SELECT total(ts), total(dur), total(depth), total(rank), total(track), count(name),"
cols_sql+=" total(peer), total(comm), total(seq) FROM events"
cols=$(measure "$bin/tracedb" query "$dir/job.tdb" "$cols_sql" -f csv)
# The target's yardstick: one full scan decoding every column of events.
all_sql="SELECT total(id), total(rank), total(tid), total(track), count(track_name), count(lane),"
all_sql+=" count(name), count(cat), count(kind), total(ts), total(dur), total(end_ts),"
all_sql+=" total(depth), total(parent), total(bytes), total(peer), total(tag), total(comm),"
all_sql+=" total(seq), total(flow), total(value), total(step), count(args), total(open) FROM events"
full=$(measure "$bin/tracedb" query "$dir/job.tdb" "$all_sql" -f csv)
explain=$(measure "$bin/tracedb" explain "$dir/job.tdb" -f json)
before=""
if [ -n "${BEFORE:-}" ]; then
  before=$(measure "$BEFORE" explain "$dir/job.tdb" -f json)
  "$BEFORE" explain "$dir/job.tdb" -f json >"$dir/before.json"
  "$bin/tracedb" explain "$dir/job.tdb" -f json >"$dir/after.json"
fi
echo "events: $events (db_bench_gen --mpi, 8 ranks), medians of $reps runs, $(nproc) cores"
printf "%-52s %8s %8s\n" "what" "wall_s" "cpu_s"
printf "%-52s %8s %8s\n" "full scan of every column of events (24 aggregates)" $full
printf "%-52s %8s %8s\n" "scan of the 9 columns explain reads" $cols
printf "%-52s %8s %8s\n" "cheapest scan: SELECT count(*), sum(dur) FROM events" $scan
printf "%-52s %8s %8s\n" "tracedb explain -f json" $explain
read -r fw fc <<< "$full"
read -r sw sc <<< "$scan"
read -r cw cc <<< "$cols"
read -r ew ec <<< "$explain"
awk -v fw="$fw" -v fc="$fc" -v sw="$sw" -v sc="$sc" -v cw="$cw" -v cc="$cc" -v ew="$ew" \
  -v ec="$ec" 'BEGIN {
  printf "explain / full scan of every column: wall %.2fx, cpu %.2fx (target <= 2x)\n", ew / fw, ec / fc
  printf "explain / scan of its 9 columns: wall %.2fx, cpu %.2fx\n", ew / cw, ec / cc
  printf "explain / count(*), sum(dur): wall %.2fx, cpu %.2fx\n", ew / sw, ec / sc }'
if [ -n "$before" ]; then
  read -r bw bc <<< "$before"
  printf "%-52s %8s %8s\n" "before: $BEFORE explain -f json" $bw $bc
  awk -v bw="$bw" -v bc="$bc" -v fw="$fw" -v fc="$fc" -v ew="$ew" -v ec="$ec" 'BEGIN {
  printf "before / full scan of every column: wall %.2fx, cpu %.2fx\n", bw / fw, bc / fc
  printf "after / before: wall %.2fx, cpu %.2fx\n", ew / bw, ec / bc }'
  if cmp -s "$dir/before.json" "$dir/after.json"; then
    echo "explain -f json: the same output before and after"
  else
    echo "explain -f json: the output DIFFERS before and after ($dir/before.json, $dir/after.json)"
  fi
fi
