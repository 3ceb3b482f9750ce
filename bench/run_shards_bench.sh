#!/usr/bin/env bash
# Shards read in place (engine/compact/shard_catalog.h) against the single database, on the
# docs/bench-db.md workload (bench/db_bench_gen, 8 ranks): the same job compacted
#   - into one database (the reference, one.tdb),
#   - with --shard-by node (one host: one shard, whose ids are the catalog's: no rewrite),
#   - by `mpirun -np K tracedb compact --mpi` (K shards; the merged mpiK.tdb is what an older
#     tracedb's merged.tdb was), its shards then listed by `tracedb shards create` (K-1 of K
#     shards' blocks get their ids rewritten when read).
# For each: the query's wall and CPU time (user + system) on the first open (the catalog built
# from nothing), on later opens (nothing new), and on the single database; the catalog's size
# against the merged copy's. Medians of REPS runs (default 3). Checks every answer against the
# single database's.
# Usage: bench/run_shards_bench.sh [EVENTS] [K...]   (default: 10000000 2 8)
# Build first: ninja -C build tracedb_cli tracedb_mpi_compact db_bench_gen
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
events=${1:-10000000}
shift || true
procs=("$@")
[ ${#procs[@]} -gt 0 ] || procs=(2 8)
work=${TRACEDB_BENCH_DIR:-/tmp/tracedb-shards-bench}
reps=${REPS:-3}
bin=${TRACEDB_BUILD:-$root/build}
sql=${SQL:-SELECT count(*), sum(dur), max(end_ts) FROM events}
mpirun_cmd=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun_cmd+=(--allow-run-as-root)

rm -rf "$work"
mkdir -p "$work"
"$bin/bench/db_bench_gen" "$work" "$events" 8 --no-csv >/dev/null
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%F %H:%M') UTC"
echo "job: $events events, 8 ranks; query: $sql; $reps runs each"
"$bin/tracedb" compact -q "$work/trace" -o "$work/one.tdb"
"$bin/tracedb" compact -q --shard-by node "$work/trace" -o "$work/nodes.tdb"
manifests=(nodes.tdb)
for k in "${procs[@]}"; do
  "${mpirun_cmd[@]}" -np "$k" "$bin/tracedb" compact -q --mpi "$work/trace" -o "$work/mpi$k.tdb"
  "$bin/tracedb" shards create -q "$work/mpi$k.tdb.shards/"mpi-*-of-"$k".tdb -o "$work/shards$k.tdb"
  manifests+=("shards$k.tdb")
done

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
want=$("$bin/tracedb" query -f csv "$work/one.tdb" "$sql" | tail -1)
run() {  # label db [rm-catalog]: prints "label wall cpu" (medians)
  local label=$1 db=$2 fresh=${3:-} walls=() cpus=() got
  for _ in $(seq "$reps"); do
    [ -z "$fresh" ] || rm -f "$work/$db.shards/catalog.tdb"
    /usr/bin/time -f "%e %U %S" -o "$work/t.txt" "$bin/tracedb" query -f csv "$work/$db" "$sql" >"$work/out.txt"
    got=$(tail -1 "$work/out.txt")
    [ "$got" = "$want" ] || { echo "MISMATCH $label: $got != $want" >&2; exit 1; }
    read -r w u s <"$work/t.txt"
    walls+=("$w")
    cpus+=("$(echo "$u + $s" | bc)")
  done
  printf '%-44s wall %6.2f s  CPU %6.2f s\n' "$label" \
    "$(printf '%s\n' "${walls[@]}" | median)" "$(printf '%s\n' "${cpus[@]}" | median)"
}
run "single database (one.tdb)" one.tdb
for m in "${manifests[@]}"; do
  run "$m: first open (catalog built)" "$m" fresh
  run "$m: later open (nothing new)" "$m"
done
for k in "${procs[@]}"; do run "mpi$k.tdb (merged copy, as merged.tdb was)" "mpi$k.tdb"; done
echo "sizes (bytes):"
for m in "${manifests[@]}"; do
  shards=$("$bin/tracedb" shards list "$work/$m" | xargs stat -c %s | paste -sd+ | bc)
  printf '  %-12s shards %10d  catalog %8d\n' "$m" "$shards" "$(stat -c %s "$work/$m.shards/catalog.tdb")"
done
for k in "${procs[@]}"; do printf '  mpi%d.tdb (merged copy) %10d\n' "$k" "$(stat -c %s "$work/mpi$k.tdb")"; done
