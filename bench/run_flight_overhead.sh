#!/usr/bin/env bash
# Flight-recorder mode's cost (issue 23 item 5; docs/flight.md "Cost"): the MPI demo
# (examples/logreg_mpi, 2 ranks) run three ways, interleaved, REPS times each:
#   off      no recording (the interposer not loaded)
#   flight   the recorder and the MPI interposer preloaded, TRACEDB_FLIGHT=30s: everything
#            recorded into the ring, nothing written without a trigger (the slow-step trigger
#            off: on a loaded machine a 3 ms step stalled by 50 ms is a slow step, whose ring
#            would be written; the step summaries are written all the same)
#   full     the same without TRACEDB_FLIGHT: everything recorded and written
# (as `tracedb record` sets them up, without its compaction, which is not the job's time), and
# prints the median wall time of each (mpirun's, launch included), flight's and full's slowdown
# against off, and the bytes each wrote per step and rank (segment files).
#
#   bench/run_flight_overhead.sh [BUILD_DIR] [REPS] [STEPS]      (defaults: build 5 100)
set -euo pipefail
build=${1:-build}
reps=${2:-5}
steps=${3:-100}
demo="$build/examples/logreg_mpi"
lib="$build/recorder/mpi/libtracedb_mpi.so"
if [ ! -x "$demo" ] || [ ! -f "$lib" ]; then
  echo "build first: ninja -C $build logreg_mpi tracedb_mpi" >&2
  exit 1
fi
lib="$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")"
mpirun_cmd=(mpirun --oversubscribe -np 2)
if [ "$(id -u)" -eq 0 ]; then mpirun_cmd+=(--allow-run-as-root); fi
args=(--steps "$steps" --samples 2000 --features 1024)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

now() { date +%s.%N; }
declare -A times
for rep in $(seq 1 "$reps"); do
  for mode in off flight full; do
    t0=$(now)
    rm -rf "$tmp/$mode"
    case $mode in
      off) "${mpirun_cmd[@]}" "$demo" "${args[@]}" > /dev/null ;;
      flight) "${mpirun_cmd[@]}" -x TRACEDB_DIR="$tmp/$mode" -x LD_PRELOAD="$lib" \
                -x TRACEDB_FLIGHT=30s -x TRACEDB_SLOW_STEP=0 "$demo" "${args[@]}" > /dev/null ;;
      full) "${mpirun_cmd[@]}" -x TRACEDB_DIR="$tmp/$mode" -x LD_PRELOAD="$lib" \
              "$demo" "${args[@]}" > /dev/null ;;
    esac
    t1=$(now)
    times[$mode]+="$(echo "$t1 - $t0" | bc) "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
off=$(echo "${times[off]}" | median)
flight=$(echo "${times[flight]}" | median)
full=$(echo "${times[full]}" | median)
bytes() { du -sb "$1" | cut -f1; }
# The STEPSTATS blocks' bytes (frame header + stored payload, docs/segment-format.md), file by
# file: the per-step summaries (docs/flight.md "step_stats").
stepstats_bytes() {
  python3 - "$1" <<'PY'
import os, struct, sys
total = 0
for root, _, files in os.walk(sys.argv[1]):
    for f in files:
        if f.endswith(".tds"):
            data = open(os.path.join(root, f), "rb").read()
            pos = 32
            while pos + 20 <= len(data):
                magic, btype, _, _, stored = struct.unpack_from("<4sBBHI", data, pos)
                if magic != b"TDBK":
                    break
                total += 20 + stored if btype == 11 else 0
                pos += 20 + stored
print(total)
PY
}
fb=$(bytes "$tmp/flight")
ub=$(bytes "$tmp/full")
echo "logreg_mpi, 2 ranks, $steps steps, median of $reps interleaved runs (wall, launch included)"
printf "  off     %.3f s\n" "$off"
printf "  flight  %.3f s  (%+.2f%% vs off)  %.0f bytes written per step per rank\n" "$flight" \
  "$(echo "($flight - $off) * 100 / $off" | bc -l)" "$(echo "$fb / ($steps * 2)" | bc -l)"
printf "  full    %.3f s  (%+.2f%% vs off)  %.0f bytes written per step per rank\n" "$full" \
  "$(echo "($full - $off) * 100 / $off" | bc -l)" "$(echo "$ub / ($steps * 2)" | bc -l)"
printf "  (du -sb of the segment directory, 3 directories included; of which step_stats: flight %.1f, full %.1f bytes per step per rank)\n" \
  "$(echo "$(stepstats_bytes "$tmp/flight") / ($steps * 2)" | bc -l)" \
  "$(echo "$(stepstats_bytes "$tmp/full") / ($steps * 2)" | bc -l)"
