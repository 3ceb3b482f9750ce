#!/usr/bin/env bash
# LZ4-HC recompression (`tracedb archive --recompress`) against the blocks as compaction writes
# them (LZ4_compress_default), in one run: block bytes, the archive run's CPU time, and the CPU
# time of a full decode of `events` (median of REPS) before and after, on two databases:
#   workload: tests/workload_program (4 threads x 200,000 nested spans with args and lanes)
#   soak:     tests/soak_program (20,000 steps x 200 spans: regular, highly compressible)
# CPU times (user+sys, /usr/bin/time) rather than wall times: the machine is shared.
# Usage: bench/run_archive_bench.sh [REPS]   (binaries from build/: tracedb, tests/*_program)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
reps=${1:-5}
bin=${TRACEDB_BIN:-$root/build/tracedb}
work=$(mktemp -d /tmp/tracedb-archive-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (shared)"
"$root/build/tests/workload_program" "$work/w" 4 200000 >/dev/null
"$root/build/tests/soak_program" "$work/s" 20000 200 0 >/dev/null
"$bin" compact -q "$work/w" -o "$work/workload.tdb"
"$bin" compact -q "$work/s" -o "$work/soak.tdb"

cpu() {  # CPU seconds (user+sys) of one command
  /usr/bin/time -f "%U %S" -o "$work/t" "$@" >/dev/null
  awk '{printf "%.3f", $1 + $2}' "$work/t"
}
scan() {  # median CPU of a full decode of every column over REPS runs
  for _ in $(seq "$reps"); do
    cpu "$bin" query "$1" "SELECT count(*), sum(dur), sum(bytes), count(DISTINCT name) FROM events"
    echo
  done | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'
}
blob() { "$bin" query "$1" -f csv "SELECT sum(length(data)), sum(count) FROM blocks" | tail -1; }

printf '%-9s %-6s %12s %10s %14s %16s %12s\n' db codec "block bytes" "bytes/ev" "vs LZ4" "archive CPU s" "scan CPU s"
for db in workload soak; do
  IFS=, read -r lz4_bytes events < <(blob "$work/$db.tdb")
  lz4_scan=$(scan "$work/$db.tdb")
  printf '%-9s %-6s %12s %10.3f %14s %16s %12s\n' "$db" LZ4 "$lz4_bytes" \
    "$(echo "$lz4_bytes / $events" | bc -l)" "1.00" "-" "$lz4_scan"
  for level in 9 12; do
    cp "$work/$db.tdb" "$work/$db-hc$level.tdb"
    arch=$(cpu "$bin" archive "$work/$db-hc$level.tdb" --recompress --level "$level" -q)
    IFS=, read -r hc_bytes _ < <(blob "$work/$db-hc$level.tdb")
    printf '%-9s %-6s %12s %10.3f %14.2f %16s %12s\n' "$db" "HC$level" "$hc_bytes" \
      "$(echo "$hc_bytes / $events" | bc -l)" "$(echo "$hc_bytes / $lz4_bytes" | bc -l)" \
      "$arch" "$(scan "$work/$db-hc$level.tdb")"
  done
done
