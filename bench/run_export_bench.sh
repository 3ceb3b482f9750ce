#!/usr/bin/env bash
# Chrome export benchmark: for each size, generates the database benchmark's Horovod-like
# events (bench/db_bench_gen, 8 ranks, no CSV), compacts them with `tracedb compact`, then times
# `tracedb export --chrome` under /usr/bin/time (wall, CPU, peak RSS), REPS runs each, medians:
#   plain     the whole job to FILE.json
#   gzip      the whole job to FILE.json.gz (zlib level 1)
#   split     the whole job in files of at most 256 MB
#   filtered  one rank, names COMM*, 1 s of the job (zone maps skip most blocks)
# and, in process (bench/export_bench), the decode-only time beside the whole export.
# The output goes to $TRACEDB_BENCH_DIR (default /tmp/tracedb-export-bench), deleted before each
# run so that no run pays for freeing the previous file. Results: docs/bench-export.md.
# Usage: bench/run_export_bench.sh [SIZES...]   (default: 2000000 10000000; REPS=5)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(2000000 10000000)
work=${TRACEDB_BENCH_DIR:-/tmp/tracedb-export-bench}
reps=${REPS:-5}
command -v /usr/bin/time >/dev/null || { echo "needs GNU time (apt-get install time)"; exit 1; }

cmake -S "$root" -B "$root/build-bench" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRACEDB_TESTS=OFF >/dev/null
cmake --build "$root/build-bench" --target tracedb_cli db_bench_gen export_bench >/dev/null
bin="$root/build-bench"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(free -g | awk '/Mem:/ {print $2}') GiB, $(date -u +%F)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# Runs `tracedb export --chrome ARGS` REPS times; prints median wall s (from date, in ns), user+sys
# s and peak RSS KB (from GNU time).
time_export() {
  local out=$1
  shift
  local rows=()
  for ((i = 0; i < reps; i++)); do
    rm -f "$out" "${out%.json*}".*.json*
    local t0 t1
    t0=$(date +%s%N)
    /usr/bin/time -f "%U %S %M" -o "$dir/time.txt" "$bin/tracedb" export --chrome -q "$@" -o "$out"
    t1=$(date +%s%N)
    rows+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }') $(cat "$dir/time.txt")")
  done
  printf '%s\n' "${rows[@]}" | awk '{ w[NR] = $1; c[NR] = $2 + $3; m[NR] = $4 }
    function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t } return a[int((n + 1) / 2)] }
    END { printf "%.3f %.3f %d\n", med(w, NR), med(c, NR), med(m, NR) }'
}

for n in "${sizes[@]}"; do
  dir="$work/$n"
  rm -rf "$dir"
  mkdir -p "$dir"
  "$bin/bench/db_bench_gen" "$dir" "$n" 8 --no-csv >/dev/null
  "$bin/tracedb" compact "$dir/trace" -o "$dir/job.tdb" -q
  rm -rf "$dir/trace"
  db="$dir/job.tdb"
  echo
  echo "== $n events (8 ranks), trace DB $(awk -v b="$(stat -c %s "$db")" 'BEGIN { printf "%.1f", b / 1e6 }') MB"
  printf "  %-10s %9s %9s %14s %10s %12s\n" "export" "wall s" "CPU s" "M events/s" "peak RSS" "output"
  report() {
    local name=$1 res=$2 events=$3 bytes=$4
    read -r wall cpu rss <<<"$res"
    awk -v name="$name" -v w="$wall" -v c="$cpu" -v r="$rss" -v n="$events" -v b="$bytes" 'BEGIN {
      rate = w > 0 ? sprintf("%.2f", n / w / 1e6) : "-"
      printf "  %-10s %9.3f %9.2f %14s %8.1f MB %9.1f MB\n", name, w, c, rate, r / 1024, b / 1e6 }'
  }
  res=$(time_export "$dir/out.json" "$db")
  report plain "$res" "$n" "$(stat -c %s "$dir/out.json")"
  res=$(time_export "$dir/out.json.gz" "$db")
  report gzip "$res" "$n" "$(stat -c %s "$dir/out.json.gz")"
  res=$(time_export "$dir/out.json" --max-mb 256 "$db")
  report split "$res" "$n" "$(cat "$dir"/out*.json | wc -c)"
  echo "             ($(ls "$dir"/out*.json | wc -l) files of at most 256 MB)"
  res=$(time_export "$dir/out.json" --ranks 0 --names 'COMM*' --from 1s --to +1s "$db")
  filtered=$("$bin/tracedb" query "$db" "SELECT count(*) FROM events WHERE rank = 0 AND name GLOB 'COMM*' AND ts < (SELECT min(ts) + 2000000000 FROM events) AND ts + dur > (SELECT min(ts) + 1000000000 FROM events)" --format csv | tail -1)
  report filtered "$res" "$filtered" "$(stat -c %s "$dir/out.json")"
  echo "             ($filtered events of rank 0 in the job's second second: the zone maps skip the rest)"
  rm -f "$dir"/out*
  inproc=$("$bin/bench/export_bench" "$db" "$dir/out.json" "$reps")
  get() { echo "$inproc" | awk -v k="$1" '$1 == k {print $2}'; }
  awk -v d="$(get decode_s)" -v e="$(get export_s)" -v n="$(get events)" -v bpe="$(get bytes_per_event)" 'BEGIN {
    printf "  in process: decode only %.2f s (%.1f M events/s); whole export %.2f s (%.1f M events/s); %.1f bytes of JSON per event\n", d, n / d / 1e6, e, n / e / 1e6, bpe }'
  rm -f "$dir"/out*
done
