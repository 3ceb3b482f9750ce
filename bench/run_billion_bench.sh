#!/usr/bin/env bash
# A billion events on one machine (issue 24 item 3; docs/bench-billion.md): RANKS processes
# (default 64) record N events in all (default 1,000,000,000) through the recorder's C ABI
# (bench/billion_gen.cc: real libtracedb, segment files written by its flusher), then
# `tracedb compact` builds the DB and each query runs from a fresh process:
#   top-10 slowest COMMUNICATE (docs/bench-db.md's query), span_stats, report stragglers,
#   report mpi, a one-step window export (`tracedb export --from Xms --to +400ms`), and
#   `tracedb view` first paint and zoom p95 (bench/run_view_bench.sh with DB=, PEER=0).
# Checks (any failure stops the script with exit 1):
#   - every rank recorded what it was asked, with nothing dropped (the recorder's counters);
#   - `SELECT count(*) FROM events` equals the events the generators emitted;
#   - the top-10 returns exactly the 10 COMMUNICATE spans the generators injected (rank and
#     duration), longest first, and equals plain SQL over the same rows without the top-n plan
#     (`ORDER BY dur + 0 DESC`, a full decode: only when N <= CHECK_FULL, default 2e8);
#   - the exported window holds events.
# Usage: bench/run_billion_bench.sh [N]
#   env: BUILD (build), RANKS (64), TMP (/tmp/tracedb-billion), REPS (5: runs of the top-10,
#        median), REPS_HEAVY (1: runs of each other query, median), VIEW (1: run the view bench; 0 skips it), KEEP (0: delete segments and DB at
#        the end; 1 keeps them), CHECK_FULL (200000000), TRACEDB (the tracedb binary to time)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
n=${1:-1000000000}
ranks=${RANKS:-64}
build=${BUILD:-build}
tmp=${TMP:-/tmp/tracedb-billion}
reps=${REPS:-5}
heavy=${REPS_HEAVY:-1}
check_full=${CHECK_FULL:-200000000}
tdb=${TRACEDB:-$build/tracedb}  # TRACEDB=FILE: another binary (a baseline)
ninja -C "$build" -j2 tracedb_cli billion_gen >/dev/null
rm -rf "$tmp/trace" "$tmp/job.tdb" "$tmp/gen" "$tmp/step.json"
mkdir -p "$tmp/trace" "$tmp/gen"
fail() { echo "FAILED: $*" >&2; exit 1; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
# Median of the numbers on stdin.
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
  "$(free -g | awk '/Mem:/ {print $2}') GB RAM; $(date -u '+%F %H:%M UTC'); load average $(loadavg)"
echo "N = $n events, $ranks ranks, commit $(git rev-parse --short HEAD)"

# ---- record: RANKS processes at once; steps share a virtual clock starting at BASE ----
base=$(python3 -c 'import time; print(time.monotonic_ns())')
export TRACEDB_WORLD_SIZE=$ranks TRACEDB_CLOCK=monotonic TRACEDB_ON_FULL=wait \
  TRACEDB_ON_FULL_WAIT_MS=600000 TRACEDB_BUFFER_MB=${BUFFER_MB:-8}
t0=$(date +%s.%N)
pids=()
for ((r = 0; r < ranks; r++)); do
  TRACEDB_RANK=$r "$build/bench/billion_gen" "$tmp/trace" "$n" "$ranks" "$base" \
    > "$tmp/gen/$r.json" 2> "$tmp/gen/$r.err" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a generator failed: $(cat "$tmp"/gen/*.err)"; done
t1=$(date +%s.%N)
unset TRACEDB_WORLD_SIZE TRACEDB_CLOCK TRACEDB_ON_FULL TRACEDB_ON_FULL_WAIT_MS TRACEDB_BUFFER_MB
read -r emitted dropped injected steps < <(python3 - "$tmp/gen" "$ranks" <<'EOF'
import json, sys, os
d, ranks = sys.argv[1], int(sys.argv[2])
rows = [json.loads(open(os.path.join(d, f"{r}.json")).read()) for r in range(ranks)]
emitted = sum(x["events"] for x in rows)
bad = [x["rank"] for x in rows if x["written"] != x["events"] or x["dropped"] or x["write_errors"]]
if bad:
    sys.exit(f"ranks {bad}: written != emitted, or dropped")
inj = sorted((i for x in rows for i in x["injected"]), key=lambda i: -i[2])
print(emitted, 0, ";".join(f"{r},{d}" for r, s, d in inj), min(x["steps"] for x in rows))
EOF
)
[ "$emitted" = "$n" ] || fail "the generators emitted $emitted events, not $n"
seg_bytes=$(du -sb "$tmp/trace" | cut -f1)
rec_wall=$(python3 -c "print(f'{$t1 - $t0:.1f}')")
echo "recorded: $emitted events by $ranks ranks in $rec_wall s wall, segments $seg_bytes bytes" \
  "($(python3 -c "print(f'{$seg_bytes / $n:.2f}')") B/event); load average $(loadavg)"

# ---- compact ----
read -r c_wall c_user c_sys c_rss < <(/usr/bin/time -f "%e %U %S %M" \
  "$tdb" compact "$tmp/trace" -o "$tmp/job.tdb" --finish -q 2>&1 >/dev/null | tail -n1)
db_bytes=$(stat -c %s "$tmp/job.tdb")
echo "compacted: wall $c_wall s, CPU $c_user + $c_sys s, peak RSS $((c_rss / 1024)) MiB;" \
  "DB $db_bytes bytes; load average $(loadavg)"
[ "${KEEP:-0}" = 1 ] || rm -rf "$tmp/trace"

# ---- checks ----
rows=$("$tdb" query "$tmp/job.tdb" "SELECT count(*) FROM events" --format csv | tail -n1)
[ "$rows" = "$n" ] || fail "events holds $rows rows, the generators emitted $n"
top_sql="SELECT rank, dur FROM events WHERE name = 'COMMUNICATE' ORDER BY dur DESC LIMIT 10"
got=$("$tdb" query "$tmp/job.tdb" "$top_sql" --format csv | tail -n +2 | tr '\n' ';' | sed 's/;$//')
# Ranks exactly, durations within 10 ppm: compaction maps the recorder's clock onto the job's
# common clock by the anchors' fitted rate, which moves a 34 ms span by a few ns.
python3 - "$got" "$injected" <<'EOF' || fail "top-10 returned $got; injected $injected"
import sys
got, want = ([tuple(map(int, x.split(","))) for x in a.split(";")] for a in sys.argv[1:3])
sys.exit(len(got) != 10 or len(want) != 10 or
         any(g[0] != w[0] or abs(g[1] - w[1]) > w[1] * 1e-5 for g, w in zip(got, want)))
EOF
if [ "$n" -le "$check_full" ]; then
  plain=$("$tdb" query "$tmp/job.tdb" \
    "SELECT rank, dur FROM events WHERE name = 'COMMUNICATE' ORDER BY dur + 0 DESC LIMIT 10" \
    --format csv | tail -n +2 | tr '\n' ';' | sed 's/;$//')
  [ "$plain" = "$got" ] || fail "top-10 $got; plain SQL (full decode) $plain"
  echo "checks: rows = emitted ($n); top-10 = the 10 injected spans = plain SQL"
else
  echo "checks: rows = emitted ($n); top-10 = the 10 injected spans"
fi

# ---- queries, each from a fresh process ----
# Times one command REPS times: "median_wall median_cpu max_rss_mib".
timed() {
  local n_reps=$1 w=() c=() m=0 line
  shift
  for ((i = 0; i < n_reps; i++)); do
    line=$(/usr/bin/time -f "%e %U %S %M" "$@" 2>&1 >/dev/null | tail -n1)
    read -r e u s k <<< "$line"
    w+=("$e")
    c+=("$(python3 -c "print(round($u + $s, 2))")")
    [ "$k" -gt "$m" ] && m=$k
  done
  echo "$(printf '%s\n' "${w[@]}" | median) $(printf '%s\n' "${c[@]}" | median) $((m / 1024))"
}
step=$((steps / 2))
from_ms=$((step * 400))
declare -A res
res[top10]=$(timed "$reps" "$tdb" query "$tmp/job.tdb" "$top_sql")
res[span_stats]=$(timed "$heavy" "$tdb" query "$tmp/job.tdb" "SELECT * FROM span_stats")
res[stragglers]=$(timed "$heavy" "$tdb" report stragglers "$tmp/job.tdb")
res[mpi]=$(timed "$heavy" "$tdb" report mpi "$tmp/job.tdb")
res[export]=$(timed "$heavy" "$tdb" export --chrome "$tmp/job.tdb" -o "$tmp/step.json" -q \
  --from "${from_ms}ms" --to +400ms)
res[export_nm]=$(timed "$heavy" "$tdb" export --chrome "$tmp/job.tdb" -o "$tmp/step.json" -q \
  --from "${from_ms}ms" --to +400ms --no-messages)
exported=$(python3 -c "import json,sys; print(sum(1 for e in json.load(open(sys.argv[1]))['traceEvents'] if e.get('ph') == 'X'))" "$tmp/step.json" 2>/dev/null \
  || python3 -c "import json,sys; print(sum(1 for e in json.load(open(sys.argv[1])) if e.get('ph') == 'X'))" "$tmp/step.json")
[ "$exported" -gt 0 ] || fail "the step window export holds no span"

echo
echo "| $n events, $ranks ranks | value |"
echo "|---|---:|"
echo "| recording wall (all ranks at once) | $rec_wall s |"
echo "| segments | $(python3 -c "print(f'{$seg_bytes / 1e9:.2f} GB, {$seg_bytes / $n:.2f} B/event')") |"
echo "| compaction wall / CPU (user + sys) | $c_wall s / $(python3 -c "print(f'{$c_user + $c_sys:.1f}')") s |"
echo "| compaction events/s per core | $(python3 -c "print(f'{$n / ($c_user + $c_sys) / 1e6:.1f} M')") |"
echo "| compaction peak RSS | $((c_rss / 1024)) MiB |"
echo "| DB | $(python3 -c "print(f'{$db_bytes / 1e9:.2f} GB, {$db_bytes / $n:.2f} B/event')") |"
echo
echo "| query (fresh process; top-10: median of $reps runs, others: of $heavy) | wall s | CPU s | peak RSS MiB |"
echo "|---|---:|---:|---:|"
for q in top10 span_stats stragglers mpi export export_nm; do
  read -r w c m <<< "${res[$q]}"
  case $q in
    top10) label="top-10 slowest COMMUNICATE (\`tracedb query\`)" ;;
    span_stats) label="\`SELECT * FROM span_stats\`" ;;
    stragglers) label="\`tracedb report stragglers\`" ;;
    mpi) label="\`tracedb report mpi\`" ;;
    export) label="\`tracedb export\` of step $step (400 ms window, $exported spans)" ;;
    export_nm) label="the same with \`--no-messages\` (no MPI message matching)" ;;
  esac
  echo "| $label | $w | $c | $m |"
done
echo "load average after the queries: $(loadavg)"

if [ "${VIEW:-1}" = 1 ]; then
  echo
  echo "tracedb view (bench/run_view_bench.sh, DB=$tmp/job.tdb PEER=0):"
  DB="$tmp/job.tdb" PEER=0 bench/run_view_bench.sh "$build" "$tmp/view" > "$tmp/view.jsonl"
  python3 - "$tmp/view.jsonl" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        d = json.loads(line)
        if d.get("errors"):
            sys.exit(f"the view bench reported errors: {d['errors']}")
        print(f"| first paint | zoom/pan p50 | zoom/pan p95 | server p95 | browser PSS | load (1 min) |")
        print("|---:|---:|---:|---:|---:|---|")
        print(f"| {d['first_paint_ms']} ms | {d['zoom_pan_p50_ms']} ms | {d['zoom_pan_p95_ms']} ms | "
              f"{d['server_p95_ms']} ms | {d['browser_pss_mb']} MB | {d['load_avg_1min']} |")
EOF
fi
[ "${KEEP:-0}" = 1 ] || rm -rf "$tmp/job.tdb" "$tmp/step.json"
