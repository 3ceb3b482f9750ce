#!/usr/bin/env bash
# Measures what the MPI interposer adds per MPI call (target: <= 300 ns; docs/bench-mpi.md).
# Runs bench/mpi_overhead on 2 ranks three ways, interleaved, REPS times each:
#   plain        no interposer
#   passthrough  LD_PRELOAD=libtracedb_mpi.so, TRACEDB_DIR unset
#   recording    LD_PRELOAD=libtracedb_mpi.so, TRACEDB_DIR set
# and prints the median ns per call of each and the ns added per call:
#   MPI_Allreduce 8 B        one call per rank per iteration, 2 ranks in lockstep
#   Send/Recv 0 B ping-pong  half a round trip, which holds one MPI_Send and one MPI_Recv on its
#                            critical path: the added ns per call is half the difference
#                            (both: median of 1000-iteration batches, robust to occasional
#                            preemption; "mean of all batches" counts every stall)
#   Allreduce on COMM_SELF, Send and Isend+Wait to MPI_PROC_NULL
#                            calls that wait for no other rank, timed in bursts that the
#                            recorder's buffers hold: the per-call cost without the lockstep,
#                            which amplifies any preemption on a busy machine (Isend+Wait: 2
#                            calls, a request remembered and completed)
# Events the recorder dropped in the recording runs (full buffers) are reported: dropped events
# cost less than recorded ones, so a run with drops understates the cost.
#
#   bench/run_mpi_overhead.sh [BUILD_DIR] [REPS] [ITERATIONS]      (defaults: build 7 100000)
set -euo pipefail
build=${1:-build}
reps=${2:-7}
iters=${3:-100000}
bin="$build/bench/mpi_overhead"
lib="$build/recorder/mpi/libtracedb_mpi.so"
cli="$build/tracedb"
if [ ! -x "$bin" ] || [ ! -f "$lib" ] || [ ! -x "$cli" ]; then
  echo "build first: ninja -C $build mpi_overhead tracedb_mpi tracedb_cli" >&2
  exit 1
fi
lib="$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")"
mpirun_flags=(--oversubscribe -np 2)
if [ "$(id -u)" -eq 0 ]; then mpirun_flags+=(--allow-run-as-root); fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

dropped=0
recorded=0
for ((rep = 1; rep <= reps; rep++)); do
  for variant in plain passthrough recording; do
    env_flags=()
    case $variant in
      passthrough) env_flags=(-x "LD_PRELOAD=$lib") ;;
      recording) env_flags=(-x "LD_PRELOAD=$lib" -x "TRACEDB_DIR=$tmp/trace") ;;
    esac
    env -u TRACEDB_DIR -u LD_PRELOAD mpirun "${mpirun_flags[@]}" "${env_flags[@]}" \
      "$bin" "$iters" 1 >>"$tmp/$variant"
    if [ "$variant" = recording ]; then
      read -r e d < <("$cli" info "$tmp/trace" --json |
        python3 -c 'import json,sys; i=json.load(sys.stdin); print(i["events"], i["dropped"])')
      recorded=$((recorded + e))
      dropped=$((dropped + d))
      rm -rf "$tmp/trace"
    fi
  done
done

python3 - "$tmp" "$reps" "$iters" "$recorded" "$dropped" <<'PY'
import re, statistics, sys
tmp, reps, iters, recorded, dropped = sys.argv[1:6]
variants = ("plain", "passthrough", "recording")
med = {}
for v in variants:
    rows = [dict(re.findall(r"(\w+)=([\d.]+)", line)) for line in open(f"{tmp}/{v}")]
    med[v] = {k: statistics.median(float(r[k]) for r in rows) for k in rows[0]}
print(f"MPI interposer cost: 2 ranks, {iters} calls of each kind per run, median of {reps} runs")
print(f"(ns per call; added = variant - plain)")
print(f"{'':34}{'plain':>9}{'passthrough':>13}{'recording':>11}{'added pass':>12}{'added rec':>11}")
rows = (("allreduce_ns", "MPI_Allreduce 8 B, 2 ranks", 1),
        ("allreduce_mean_ns", "  (mean of all batches)", 1),
        ("pingpong_ns", "Send/Recv 0 B ping-pong, 2 ranks", 2),
        ("pingpong_mean_ns", "  (mean of all batches)", 2),
        ("self_allreduce_ns", "MPI_Allreduce 8 B, MPI_COMM_SELF", 1),
        ("send_procnull_ns", "MPI_Send 0 B to MPI_PROC_NULL", 1),
        ("isend_wait_procnull_ns", "MPI_Isend+MPI_Wait, MPI_PROC_NULL", 2))
for key, label, calls in rows:
    p, t, r = (med[v][key] for v in variants)
    print(f"{label:34}{p:9.1f}{t:13.1f}{r:11.1f}{(t - p) / calls:12.1f}{(r - p) / calls:11.1f}")
print(f"recording runs: {int(recorded):,} events written, {int(dropped):,} dropped")
PY
