#!/usr/bin/env bash
# Compaction as an MPI job, side by side in one run on the same generated job (bench/db_bench_gen:
# the docs/bench-db.md workload, 8 ranks):
#   tracedb compact DIR -o one.tdb                          (one process: the reference)
#   mpirun -np K tracedb compact --mpi DIR -o mpiK.tdb      (K = 1, 2 by default)
# Each run starts from nothing (no shards, no database). Prints per run the wall time and the
# CPU time (user + system of the whole command, mpirun and its processes included), and for the
# MPI runs the phases tracedb-mpi-compact reports: the busiest process's shard CPU time and the
# merge's (process 0, serial). Medians of REPS runs (default 3). Checks that every output holds
# the same number of events and the same sum of durations as the reference.
# Usage: bench/run_mpi_compact_bench.sh [EVENTS] [K...]   (default: 10000000 1 2)
# Build first: ninja -C build tracedb_cli tracedb_mpi_compact db_bench_gen
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
events=${1:-10000000}
shift || true
procs=("$@")
[ ${#procs[@]} -gt 0 ] || procs=(1 2)
work=${TRACEDB_BENCH_DIR:-/tmp/tracedb-mpi-bench}
reps=${REPS:-3}
bin=${TRACEDB_BUILD:-$root/build}
mpirun_cmd=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpirun_cmd+=(--allow-run-as-root)

rm -rf "$work"
mkdir -p "$work"
"$bin/bench/db_bench_gen" "$work" "$events" 8 --no-csv >/dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%F %H:%M') UTC"
echo "job: $events events, 8 ranks, $(du -sb "$work/trace" | cut -f1) bytes of segments; $reps runs each"

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
check() {  # events and sum(dur) of a database
  "$bin/tracedb" query "$1" "SELECT count(*) || ' ' || sum(dur) FROM events" --format csv 2>/dev/null | tail -1
}

for r in $(seq "$reps"); do
  rm -f "$work/one.tdb"
  /usr/bin/time -f "%e %U %S" -o "$work/t.txt" "$bin/tracedb" compact "$work/trace" -o "$work/one.tdb" -q
  read -r w u s < "$work/t.txt"
  echo "$w" >> "$work/one.wall"
  echo "$u + $s" | bc >> "$work/one.cpu"
  for k in "${procs[@]}"; do
    rm -rf "$work/mpi$k.tdb" "$work/mpi$k.tdb.shards"
    /usr/bin/time -f "%e %U %S" -o "$work/t.txt" "${mpirun_cmd[@]}" -np "$k" \
      "$bin/tracedb" compact --mpi "$work/trace" -o "$work/mpi$k.tdb" 2> "$work/mpi$k.log"
    read -r w u s < "$work/t.txt"
    echo "$w" >> "$work/mpi$k.wall"
    echo "$u + $s" | bc >> "$work/mpi$k.cpu"
    line=$(grep 'segment events in' "$work/mpi$k.log")
    # "... shards W s wall (slowest process), B s CPU (busiest process), A s CPU (all); merge of
    #  N blocks (M with ids mapped) MW s wall, MC s CPU"
    echo "$line" | sed -E 's/.*, ([0-9.]+) s CPU \(busiest.*/\1/' >> "$work/mpi$k.busiest"
    echo "$line" | sed -E 's/.*\) ([0-9.]+) s wall, ([0-9.]+) s CPU$/\1/' >> "$work/mpi$k.mwall"
    echo "$line" | sed -E 's/.*\) ([0-9.]+) s wall, ([0-9.]+) s CPU$/\2/' >> "$work/mpi$k.mcpu"
  done
done

ref=$(check "$work/one.tdb")
one_cpu=$(median < "$work/one.cpu")
one_wall=$(median < "$work/one.wall")
printf "%-34s %9s %9s %14s %11s %11s %s\n" run "wall s" "CPU s" "busiest CPU s" "merge CPU s" "merge wall" "events, sum(dur)"
printf "%-34s %9.2f %9.2f %14s %11s %11s %s\n" "tracedb compact (1 process)" "$one_wall" "$one_cpu" - - - "$ref"
for k in "${procs[@]}"; do
  got=$(check "$work/mpi$k.tdb")
  [ "$got" = "$ref" ] || { echo "MISMATCH: mpi$k.tdb has $got, the reference $ref"; exit 1; }
  printf "%-34s %9.2f %9.2f %14.2f %11.2f %11.2f %s\n" "mpirun -np $k tracedb compact --mpi" \
    "$(median < "$work/mpi$k.wall")" "$(median < "$work/mpi$k.cpu")" \
    "$(median < "$work/mpi$k.busiest")" "$(median < "$work/mpi$k.mcpu")" \
    "$(median < "$work/mpi$k.mwall")" "$got"
done
# The speedup an idle machine with K free cores would give, from CPU times: the reference's CPU
# over the critical path (the busiest process's shard, then the serial merge).
for k in "${procs[@]}"; do
  b=$(median < "$work/mpi$k.busiest")
  m=$(median < "$work/mpi$k.mcpu")
  echo "np $k: CPU-time speedup over one process = $one_cpu / ($b + $m) = $(echo "scale=2; $one_cpu / ($b + $m)" | bc);" \
    "wall speedup (loaded machine) = $(echo "scale=2; $one_wall / $(median < "$work/mpi$k.wall")" | bc)"
done
