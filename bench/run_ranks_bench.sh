#!/usr/bin/env bash
# Many ranks end to end (issue 24 item 6; docs/bench-compaction.md "10,000 ranks"): for each rank
# count, tests/scale_job_gen writes the job (8 ranks per node, STEPS steps, true per-node clocks,
# the MPI clock sync points, 4 injected stragglers), which is compacted three ways:
#   one.tdb    `tracedb compact` into one database;
#   mpi2.tdb   `mpirun -np 2 tracedb compact --mpi` (2 shards, merged);
#   nodes.tdb  `tracedb compact --shard-by node` (one shard per node, read in place);
# and each is asked `report stragglers`, the collectives, and `tracedb explain`. Every command is
# run once in a fresh process: CPU (user + system), wall and peak RSS (/usr/bin/time). Checks,
# any failure stops the script: the three hold the same rows (count, sum of durations, time
# range); every collective whose last rank was late by more than 1 ms in true time (the
# generator's collectives.csv) names that rank; each injected straggler is last at least that
# often in `report stragglers`; explain's top three causes are on injected stragglers.
# Usage: bench/run_ranks_bench.sh [RANKS...]     (default: 1000 10000)
#   env: BUILD (default build), STEPS (20), TMP (/tmp/tracedb-ranks-bench)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
steps=${STEPS:-20}
tmp=${TMP:-/tmp/tracedb-ranks-bench}
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(1000 10000)
cmake --build "$build" --target tracedb_cli scale_job_gen >/dev/null
bin=$(cd "$build" && pwd)/tracedb
gen=$(cd "$build" && pwd)/tests/scale_job_gen
mpirun_cmd=(mpirun --oversubscribe -np 2)
[ "$(id -u)" = 0 ] && mpirun_cmd+=(--allow-run-as-root)

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u '+%F %H:%M') UTC"
# Runs a command once: prints "cpu_s wall_s peak_MiB".
measure() {
  /usr/bin/time -o "$tmp/time.txt" -f "%U %S %e %M" "$@" >"$tmp/out.txt" 2>&1 ||
    { cat "$tmp/out.txt" >&2; echo "failed: $*" >&2; exit 1; }
  awk '{ printf "%.2f %.1f %.0f", $1 + $2, $3, $4 / 1024 }' "$tmp/time.txt"
}
row() { printf '| %s | %s | %s | %s | %s | %s |\n' "$@"; }

for r in "${ranks[@]}"; do
  work="$tmp/$r"
  rm -rf "$work" && mkdir -p "$work"
  stragglers=($((r / 7)) $((r / 3)) $((r / 2 + 1)) $((r - 5)))
  gen_out=$("$gen" "$work/job" "$r" --steps "$steps" \
    $(for s in "${stragglers[@]}"; do printf -- '--straggler %s ' "$s"; done))
  echo
  echo "### $r ranks: $gen_out (stragglers ${stragglers[*]})"
  echo
  row "what" "database" "CPU s" "wall s" "peak RSS MiB" "answer"
  row "---" "---" "---:" "---:" "---:" "---"
  read -r c w m <<< "$(measure "$bin" compact "$work/job/trace" -o "$work/one.tdb" -q)"
  row "compact" "one.tdb ($(du -m "$work/one.tdb" | cut -f1) MB)" "$c" "$w" "$m" ""
  read -r c w m <<< "$(measure "${mpirun_cmd[@]}" "$bin" compact --mpi "$work/job/trace" \
    -o "$work/mpi2.tdb" -q)"
  row "compact --mpi (mpirun -np 2)" "mpi2.tdb" "$c" "$w" "$m" ""
  read -r c w m <<< "$(measure "$bin" compact --shard-by node "$work/job/trace" \
    -o "$work/nodes.tdb" -q)"
  row "compact --shard-by node" "nodes.tdb ($(ls "$work/nodes.tdb.shards" | grep -c '^node-') shards)" \
    "$c" "$w" "$m" ""
  ref=""
  for db in one.tdb mpi2.tdb nodes.tdb; do
    sum=$("$bin" query "$work/$db" "SELECT count(*), sum(dur), min(ts), max(ts) FROM events" -f csv |
      tail -1)
    [ -z "$ref" ] && ref=$sum
    [ "$sum" = "$ref" ] || { echo "$db holds other rows: $sum, one.tdb: $ref" >&2; exit 1; }
    read -r c w m <<< "$(measure "$bin" report stragglers "$work/$db" -n 4 -f csv)"
    # Against the generator's truth (collectives.csv: who really arrived last at each allreduce,
    # and by how much): where the last rank was late by more than 1 ms (far above the clocks'
    # uncertainty; the others are near-ties of microseconds), the collectives table names it,
    # and each injected straggler is last at least that often in the report.
    "$bin" query "$work/$db" "SELECT seq, last_rank FROM collectives" -f csv >"$tmp/coll.csv"
    got=$(python3 - "$tmp/out.txt" "$work/job/collectives.csv" "$tmp/coll.csv" \
      "${stragglers[@]}" <<'EOF2'
import csv, sys
report, truth, table, ranks = sys.argv[1], sys.argv[2], sys.argv[3], [int(r) for r in sys.argv[4:]]
last = {}
with open(report) as f:
    for row in csv.DictReader(f):
        if not row.get("rank", "").isdigit():
            break
        last[int(row["rank"])] = int(row["times_last"])
named = {int(r["seq"]): int(r["last_rank"]) for r in csv.DictReader(open(table))}
want, late = {}, 0
for row in csv.DictReader(open(truth)):
    if int(row["skew_ns"]) <= 1000000:
        continue
    late += 1
    r = int(row["last_rank"])
    want[r] = want.get(r, 0) + 1
    if named.get(int(row["seq"])) != r:
        sys.exit(f"collective {row['seq']}: the table names rank {named.get(int(row['seq']))}, truth {r}")
got = [last.get(r, 0) for r in ranks]
exp = [want.get(r, 0) for r in ranks]
if min(exp) == 0 or any(g < e for g, e in zip(got, exp)):
    sys.exit(f"times last {got}, truth (late by > 1 ms) {exp}")
print(f"{late} late arrivals > 1 ms named right; injected ranks last {got} times (truth {exp})")
EOF2
) || { echo "$db: disagrees with the generator: $got" >&2; exit 1; }
    row "report stragglers" "$db" "$c" "$w" "$m" "$got"
    read -r c w m <<< "$(measure "$bin" query "$work/$db" \
      "SELECT count(*), max(skew_ns) FROM collectives" -f csv)"
    row "collectives" "$db" "$c" "$w" "$m" "$(tail -1 "$tmp/out.txt")"
    read -r c w m <<< "$(measure "$bin" explain "$work/$db" -n 3 -f json)"
    # The top causes are on injected stragglers.
    causes=$(python3 -c 'import json, sys
print("; ".join("step %d rank %d %s" % (c["step"], c["rank"], c["name"])
               for c in json.load(open(sys.argv[1]))["causes"][:3]))' "$tmp/out.txt")
    for c_rank in $(echo "$causes" | awk '{ for (i = 1; i < NF; i++) if ($i == "rank") { r = $(i + 1); sub(/;/, "", r); print r } }'); do
      printf '%s\n' "${stragglers[@]}" | grep -qx "$c_rank" ||
        { echo "$db: explain's top cause on rank $c_rank, not a straggler: $causes" >&2; exit 1; }
    done
    row "explain" "$db" "$c" "$w" "$m" "$causes"
  done
  echo
  echo "rows (count, sum(dur), min(ts), max(ts)) in all three: $ref"
done
