#!/usr/bin/env bash
# The read paths of two builds side by side on one database (docs/bench-db.md, "The block
# store"): for each round, before then after, the CPU (user + system) of
#   bench/db_bench queries DB 3              (medians of 3 in-process runs per query)
#   tracedb export --chrome                  (the whole job, then 1 rank, COMM*, 1 s)
#   python_read_bench --numpy-only           (db.events(rank, ts, dur) -> NumPy, 2 threads)
#   tracedb view                             (a fresh server, 40 GET /api/window: 5 zoom levels
#                                             from 1/16 to 1/4096 of the job, 8 positions each)
# Usage: bench/run_read_side_by_side.sh BEFORE_BUILD AFTER_BUILD DB [ROUNDS] [AFTER_DB]
#   A build directory holds tracedb, bench/db_bench (or db_bench) and python/ (the package).
#   AFTER_DB: the after side reads this database instead (the same events written in another
#   block format, e.g. a format 2 build against a format 3 one); default DB.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 3 ] || { echo "usage: $0 BEFORE_BUILD AFTER_BUILD DB [ROUNDS] [AFTER_DB]" >&2; exit 2; }
before=$1 after=$2 before_db=$3 rounds=${4:-3} after_db=${5:-$3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpu() {
  /usr/bin/time -f "%U %S" -o "$tmp/t.txt" "$@" >/dev/null 2>&1
  awk '{printf "%.2f", $1 + $2}' "$tmp/t.txt"
}
view_cpu() {  # the view server's CPU over 40 windows
  "$1" view "$db" --port 0 >"$tmp/view.out" 2>&1 &
  local vpid=$! i url base tok hi t0 t1 k j a b
  for i in $(seq 100); do grep -q token= "$tmp/view.out" && break; sleep 0.1; done
  url=$(grep -o 'http://[^ ]*token=[a-zA-Z0-9]*' "$tmp/view.out" | head -1)
  base=${url%%/?token=*} tok=${url##*token=}
  hi=$(curl -s -H "X-Tracedb-Token: $tok" "$base/api/meta" | grep -o '"duration":[0-9]*' | cut -d: -f2)
  t0=$(awk '{print $14 + $15}' "/proc/$vpid/stat")
  for k in 16 64 256 1024 4096; do
    for j in 0 1 2 3 4 5 6 7; do
      a=$((hi / 8 * j + hi / 97 * j)) b=$((a + hi / k))
      curl -s -o /dev/null -H "X-Tracedb-Token: $tok" \
        "$base/api/window?t0=$a&t1=$b&px=1600&seq=$((k + j))"
    done
  done
  t1=$(awk '{print $14 + $15}' "/proc/$vpid/stat")
  kill "$vpid"
  wait "$vpid" 2>/dev/null || true
  awk -v a="$t0" -v b="$t1" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (b - a) / hz }'
}
for r in $(seq "$rounds"); do
  for side in before after; do
    build=$before db=$before_db
    [ $side = after ] && build=$after db=$after_db
    bench=$build/bench/db_bench
    [ -x "$bench" ] || bench=$build/db_bench
    echo "== round $r $side"
    "$bench" queries "$db" 3 | awk '{print "  db_bench " $1 " cpu_ms " $4}'
    echo "  export_all_cpu_s $(cpu "$build/tracedb" export --chrome -q "$db" -o "$tmp/out.json")"
    echo "  export_filtered_cpu_s $(cpu "$build/tracedb" export --chrome -q --ranks 0 \
      --names 'COMM*' --from 1s --to +1s "$db" -o "$tmp/out.json")"
    rm -f "$tmp/out.json"
    PYTHONPATH=$build/python TRACEDB_READ_THREADS=2 /usr/bin/python3 \
      "$root/bench/python_read_bench.py" --build "$build" --db "$db" --numpy-only --repeat 3 |
      tail -1 | awk '{print "  python_numpy_cpu_s " $(NF-1)}'
    echo "  view_40_windows_cpu_s $(view_cpu "$build/tracedb")"
  done
done
