#!/usr/bin/env bash
# Built-in views benchmark, side by side in one run: the same generated events (a Horovod-like
# 8-rank job with an MPI thread per rank: db_bench_gen --mpi) are compacted into JOB.tdb, and
# the database's own rows (events and the summary tables the views read) are loaded into DuckDB
# (npm @duckdb/node-api), where every built-in view is defined as the equivalent SQL over plain
# tables (bench/views_duckdb.mjs). Each view is timed in both (count(*) of row-level views, the
# full result of aggregates; bench/views_bench_list.h) and the ratio is printed against the
# target of issue 9: at most 2x DuckDB. Medians of REPS runs (default 3), wall and CPU
# (user + system of every thread); on a shared machine the CPU ratio is the one to read.
# The `rows` columns must agree: DuckDB is the independent reference for each view's row count.
# Usage: bench/run_views_bench.sh [EVENTS]   (default 10000000)
#   VIEWS="a b" times only those views; BUILD_DIR (default build-bench, a Release build) picks
#   the build to use; TRACEDB_BENCH_DIR (default /tmp/tracedb-views-bench) the scratch folder.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
n=${1:-10000000}
work=${TRACEDB_BENCH_DIR:-/tmp/tracedb-views-bench}
reps=${REPS:-3}
bin=${BUILD_DIR:-$root/build-bench}

if [ -z "${BUILD_DIR:-}" ]; then
  cmake -S "$root" -B "$bin" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRACEDB_TESTS=OFF >/dev/null
fi
cmake --build "$bin" --target tracedb_cli db_bench_gen views_bench >/dev/null
(cd "$root/bench" && npm install --no-audit --no-fund --silent >/dev/null 2>&1) ||
  { echo "DuckDB (npm @duckdb/node-api) could not be installed" >&2; exit 1; }

dir="$work/$n"
rm -rf "$dir"
mkdir -p "$dir"
"$bin/bench/db_bench_gen" "$dir" "$n" 8 --mpi >/dev/null
"$bin/tracedb" compact "$dir/trace" -o "$dir/job.tdb" -q
"$bin/bench/views_bench" export "$dir/job.tdb" "$dir" >/dev/null
"$bin/bench/views_bench" list > "$dir/list.tsv"
if [ -n "${VIEWS:-}" ]; then
  grep -wF -f <(tr ' ' '\n' <<< "$VIEWS") "$dir/list.tsv" > "$dir/list.sel" || true
  mv "$dir/list.sel" "$dir/list.tsv"
fi
# shellcheck disable=SC2046
ours=$("$bin/bench/views_bench" time "$dir/job.tdb" "$reps" $(cut -f1 "$dir/list.tsv"))
duck=$(cd "$root/bench" && node views_duckdb.mjs "$dir" "$dir/list.tsv" "$reps")
events=$(awk -F, 'NR > 1' "$dir/events.csv" | wc -l)

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"
echo "== $events events (8 ranks, db_bench_gen --mpi), medians of $reps runs; target: tracedb <= 2x DuckDB"
printf "  %-20s %9s %10s %10s %7s %10s %10s %7s  %s\n" view rows "tracedb ms" "DuckDB ms" ratio \
  "tracedb CPU" "DuckDB CPU" ratio "CPU target"
while IFS=$'\t' read -r view mode; do
  a=$(echo "$ours" | awk -v k="$view" '$1 == k')
  b=$(echo "$duck" | awk -v k="$view" '$1 == k')
  awk -v v="$view" -v a="$a" -v b="$b" 'BEGIN {
    split(a, x, " "); split(b, y, " ")
    rows = x[3] == y[3] ? x[3] : x[3] "!=" y[3]
    r = x[2] / (y[2] > 0 ? y[2] : 1e-9); rc = x[4] / (y[4] > 0 ? y[4] : 1e-9)
    printf "  %-20s %9s %10.1f %10.1f %6.2fx %10.1f %10.1f %6.2fx  %s\n", v, rows, x[2], y[2], r,
      x[4], y[4], rc, rc <= 2 ? "met" : "MISSED" }'
done < "$dir/list.tsv"
echo "  DuckDB load of the exported rows: $(echo "$duck" | awk '$1 == "duckdb_load_ms" {print $2}') ms (not in the ratios)"
rm -f "$dir/events.csv"
