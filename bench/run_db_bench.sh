#!/usr/bin/env bash
# Database benchmark, side by side in one run: for each size, the same generated events go into
#   tracedb   segments -> tracedb compact -> JOB.tdb
#   DuckDB    CSV -> read_csv -> a .duckdb file (npm @duckdb/node-api)
#   SQLite    CSV -> one row per event with two indexes (sizes up to 10M); the median and
#             95th percentile by name are also timed over it (SQLite's own floor for them)
# and the same queries run on each: top-10 slowest COMMUNICATE, aggregates per rank x name and
# per track x name, median and 95th percentile by name, two full-scan counts; and SQLite's
# floor: the time the stock sqlite3 takes to count as many rows of generate_series. Prints
# compaction speed, bytes per event and query times (medians of REPS runs, default 5).
# Usage: bench/run_db_bench.sh [SIZES...]   (default: 2000000 10000000 100000000)
#   SQLITE_ROWS=0 skips the row-per-event SQLite baseline (its load takes minutes at 10M).
#   DUCKDB=0 skips DuckDB (its columns stay empty).
#   QUERIES="median_by_name p95_by_name" times only those of tracedb's queries (DuckDB runs all).
#   BUILD_DIR (default build-bench, a Release build made here) picks an existing build instead
#   (e.g. to compare two builds: each run's binaries in their own directory).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(2000000 10000000 100000000)
work=${TRACEDB_BENCH_DIR:-/tmp/tracedb-db-bench}
reps=${REPS:-5}

bin=${BUILD_DIR:-$root/build-bench}
if [ -z "${BUILD_DIR:-}" ]; then
  cmake -S "$root" -B "$bin" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRACEDB_TESTS=OFF >/dev/null
fi
cmake --build "$bin" --target tracedb_cli db_bench_gen db_bench >/dev/null
read -r -a only <<< "${QUERIES:-}"
have_duckdb=0
if [ "${DUCKDB:-1}" != 0 ] && command -v node >/dev/null; then
  (cd "$root/bench" && npm install --no-audit --no-fund --silent >/dev/null 2>&1) && have_duckdb=1
fi
[ $have_duckdb -eq 1 ] || echo "DuckDB (npm @duckdb/node-api) could not be installed: its column is empty"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%F)"
for n in "${sizes[@]}"; do
  dir="$work/$n"
  rm -rf "$dir"
  mkdir -p "$dir"
  csv_flag=""
  "$bin/bench/db_bench_gen" "$dir" "$n" 8 >/dev/null
  seg_bytes=$(du -sb "$dir/trace" | cut -f1)
  # Compaction: wall time and CPU time (user + system) of the whole command.
  /usr/bin/time -f "%e %U %S" -o "$dir/time.txt" "$bin/tracedb" compact "$dir/trace" -o "$dir/job.tdb" -q
  read -r wall user sys < "$dir/time.txt"
  db_bytes=$(stat -c %s "$dir/job.tdb")
  ours=$("$bin/bench/db_bench" queries "$dir/job.tdb" "$reps" ${only[@]+"${only[@]}"})
  duck=""
  if [ $have_duckdb -eq 1 ]; then
    duck=$(cd "$root/bench" && node duckdb_bench.mjs "$dir/events.csv" "$dir/job.duckdb" "$reps")
  fi
  rows=""
  if [ "$n" -le 10000000 ] && [ "${SQLITE_ROWS:-1}" != 0 ]; then
    rows=$("$bin/bench/db_bench" sqlite-rows "$dir/events.csv" "$dir/rows.sqlite" "$reps")
  fi
  get() { echo "$1" | awk -v k="$2" '$1 == k {print $2}'; }
  getcpu() { echo "$1" | awk -v k="$2" '$1 == k {print $4}'; }
  # SQLite's floor: counting n rows of generate_series in the stock sqlite3 (the statement's
  # wall and user+sys time from .timer), medians.
  floors=$(for r in $(seq "$reps"); do
             printf '.timer on\nSELECT count(*) FROM generate_series(1, %s);\n' "$n" |
               sqlite3 :memory: | awk '/Run Time/ {print $4 * 1000, ($6 + $8) * 1000}'
           done)
  floor=$(echo "$floors" | awk '{print $1}' | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
  floor_cpu=$(echo "$floors" | awk '{print $2}' | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
  echo
  echo "== $n events (8 ranks)"
  awk -v n="$n" -v w="$wall" -v u="$user" -v s="$sys" -v sb="$seg_bytes" -v db="$db_bytes" 'BEGIN {
    printf "  compaction: %.2f s wall, %.2f s CPU: %.1f M events/s wall, %.1f M events/s per core (CPU)\n", w, u + s, n / w / 1e6, n / (u + s) / 1e6
    printf "  segments: %.2f bytes/event; trace DB: %.2f bytes/event\n", sb / n, db / n }'
  [ -n "$duck" ] && echo "  DuckDB file: $(get "$duck" duckdb_bytes_per_event) bytes/event (load from CSV $(get "$duck" duckdb_load_ms) ms)"
  [ -n "$rows" ] && echo "  SQLite rows + 2 indexes: $(get "$rows" sqlite_rows_bytes_per_event) bytes/event"
  printf "  %-22s %12s %12s %8s %12s %12s %8s\n" "query (median ms)" "tracedb" "DuckDB" "ratio" \
    "tracedb CPU" "DuckDB CPU" "ratio"
  for q in top10 rank_name_agg track_name_agg median_by_name p95_by_name count_scan count_depth; do
    a=$(get "$ours" $q)
    [ -n "$a" ] || continue  # not in QUERIES
    b=$(get "$duck" $q)
    ac=$(getcpu "$ours" $q)
    bc=$(getcpu "$duck" $q)
    if [ -n "$b" ]; then
      awk -v q="$q" -v a="$a" -v b="$b" -v ac="$ac" -v bc="$bc" 'BEGIN {
        printf "  %-22s %12.2f %12.2f %7.2fx %12.2f %12.2f %7.2fx\n", q, a, b, a / b, ac, bc, ac / (bc > 0 ? bc : 1e-9) }'
    else
      printf "  %-22s %12.2f %12s %8s %12.2f\n" "$q" "$a" "-" "" "$ac"
    fi
  done
  if [ -n "$(get "$ours" count_scan)" ]; then
    awk -v f="$floor" -v fc="$floor_cpu" -v a="$(get "$ours" count_scan)" -v d="$(get "$ours" count_depth)" \
        -v ac="$(getcpu "$ours" count_scan)" -v dc="$(getcpu "$ours" count_depth)" 'BEGIN {
      printf "  SQLite floor (sqlite3, count(*) of generate_series): %.2f ms wall, %.2f ms CPU\n", f, fc
      printf "  count_scan / floor: %.2fx wall, %.2fx CPU; count_depth / floor: %.2fx wall, %.2fx CPU\n", a / f, ac / fc, d / f, dc / fc }'
  fi
  if [ -n "$(get "$ours" rank_name_summary)" ]; then
    printf "  %-22s %12.3f %12s   (same aggregate from the summary table)\n" rank_name_summary "$(get "$ours" rank_name_summary)" "-"
  fi
  # SQLite's own floor for the quantiles: its plain table, rows in group order from the index
  # on (name, dur), the same median/percentile functions (no virtual table).
  for q in median_by_name p95_by_name; do
    s=$(getcpu "$rows" "sqlite_rows_$q")
    [ -n "$s" ] || continue
    awk -v q="$q" -v s="$s" -v sw="$(get "$rows" "sqlite_rows_$q")" -v a="$(getcpu "$ours" $q)" \
        -v b="$(getcpu "$duck" $q)" 'BEGIN {
      printf "  SQLite table, %s: %.2f ms wall, %.2f ms CPU: %.2fx DuckDB CPU; tracedb / SQLite table %.2fx CPU\n", q, sw, s, (b > 0 ? s / b : 0), a / s }'
  done
  rm -f "$dir/events.csv" "$dir/job.duckdb" "$dir/rows.sqlite"
done
