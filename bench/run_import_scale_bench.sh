#!/usr/bin/env bash
# Imports beyond memory (issue 24 item 4): generates a Horovod-style timeline of HOROVOD_GB and a
# Kineto trace (object form, with ac2g flows) of KINETO_GB with build/bench/gen_trace, imports
# each once with `/usr/bin/time -f "%e %U %S %M" tracedb import` (wall s, user s, sys s, peak RSS
# in KB), checks the database's row count against the rows the generator counted as it wrote the
# file (an independent reference), then loads the same file once into DuckDB with
# bench/duckdb_read_json.mjs (a database file under WORK, memory_limit DUCK_MEM, spilling to
# WORK) under the same /usr/bin/time. DuckDB is stopped after DUCK_TIMEOUT seconds; a failure or
# a timeout is reported as such. The load average is printed before and after each run (the
# machine is shared). Every generated file and database is deleted at the end (--keep keeps them).
# This measures; it is not a test.
#
# Usage: bench/run_import_scale_bench.sh [--build DIR] [--work DIR] [--horovod-gb G]
#            [--kineto-gb G] [--only horovod|kineto] [--no-duckdb] [--duck-mem 16GB]
#            [--duck-timeout S] [--keep]
# Defaults: build/, /tmp/tracedb-import-scale, 10 GB Horovod, 5 GB Kineto, DuckDB at 16GB, 1800 s.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="$root/build"
work=/tmp/tracedb-import-scale
horovod_gb=10
kineto_gb=5
only=""
duck=1
duck_mem=16GB
duck_timeout=1800
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --horovod-gb) horovod_gb="$2"; shift 2 ;;
    --kineto-gb) kineto_gb="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --no-duckdb) duck=0; shift ;;
    --duck-mem) duck_mem="$2"; shift 2 ;;
    --duck-timeout) duck_timeout="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "usage: $0 [--build DIR] [--work DIR] [--horovod-gb G] [--kineto-gb G]" \
            "[--only horovod|kineto] [--no-duckdb] [--duck-mem SIZE] [--duck-timeout S] [--keep]" >&2
       exit 2 ;;
  esac
done

tracedb="$build/tracedb"
gen="$build/bench/gen_trace"
for b in "$tracedb" "$gen"; do
  [ -x "$b" ] || { echo "$b not built (cmake --build build --target tracedb_cli gen_trace)" >&2; exit 1; }
done
[ -x /usr/bin/time ] || { echo "/usr/bin/time is needed (apt-get install time)" >&2; exit 1; }
if [ "$duck" = 1 ] && [ ! -d "$root/bench/node_modules/@duckdb/node-api" ]; then
  (cd "$root/bench" && npm install --no-save --no-audit --no-fund @duckdb/node-api@1.5.6-r.1 \
     >/dev/null 2>&1) || { echo "DuckDB could not be installed: its side is skipped"; duck=0; }
fi
mkdir -p "$work"
cleanup() { [ "$keep" = 1 ] || rm -rf "$work"; }
trap cleanup EXIT

load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM," \
     "$(df -h "$work" | awk 'NR==2 {print $4}') free under $work"

# Bytes per record of a generator mode, from a 200K-record sample.
bytes_per_record() {
  "$gen" "$work/sample.json" 200000 "$@" >/dev/null
  local size
  size=$(stat -c %s "$work/sample.json")
  rm -f "$work/sample.json"
  echo $((size / 200000))
}

run_one() {  # NAME GB FORM GEN-FLAGS...
  local name="$1" gb="$2" form="$3"
  shift 3
  local bpr records file out rows_expected
  bpr=$(bytes_per_record "$@")
  records=$(python3 -c "print(int($gb * 1e9 / $bpr))")
  file="$work/$name.json"
  echo
  echo "== $name: $gb GB target, ~$bpr bytes/record, $records records"
  local t0 t1
  t0=$(date +%s.%N)
  out=$("$gen" "$file" "$records" "$@")
  t1=$(date +%s.%N)
  rows_expected=$(echo "$out" | sed -n 's/.* records, \([0-9]*\) rows/\1/p')
  printf 'generated %s (%s bytes): %s in %.1f s\n' "$file" "$(stat -c %s "$file")" "$out" \
    "$(echo "$t1 - $t0" | bc)"

  rm -f "$work/$name.tdb"
  echo "load before tracedb: $(load)"
  /usr/bin/time -f "%e %U %S %M" -o "$work/time.txt" \
    "$tracedb" import "$file" -o "$work/$name.tdb" >"$work/import.out" 2>&1 || {
      echo "tracedb import failed:"; tail -5 "$work/import.out"; return 1; }
  echo "load after tracedb:  $(load)"
  read -r wall user sys maxkb <"$work/time.txt"
  grep -m1 '^imported' "$work/import.out" || true
  local rows
  rows=$("$tracedb" query -f csv "$work/$name.tdb" "SELECT count(*) FROM events" | tail -1)
  local verdict="MISMATCH"
  [ "$rows" = "$rows_expected" ] && verdict="ok"
  printf 'tracedb import: %s s wall, %s s user, %s s sys, peak RSS %d MB; %s rows in events,' \
    "$wall" "$user" "$sys" $((maxkb / 1024)) "$rows"
  printf ' generator counted %s: %s; database %d MB\n' "$rows_expected" "$verdict" \
    $(($(stat -c %s "$work/$name.tdb") / 1000000))
  rm -f "$work/$name.tdb"

  if [ "$duck" = 1 ]; then
    echo "load before DuckDB: $(load)"
    local rc=0
    DUCKDB_DB="$work/$name.duckdb" DUCKDB_MEMORY_LIMIT="$duck_mem" DUCKDB_TEMP_DIR="$work/duck.tmp" \
      timeout "$duck_timeout" /usr/bin/time -f "%e %U %S %M" -o "$work/time.txt" \
      node "$root/bench/duckdb_read_json.mjs" "$file" "$form" >"$work/duck.out" 2>&1 || rc=$?
    echo "load after DuckDB:  $(load)"
    if [ "$rc" = 0 ]; then
      read -r dwall duser dsys dmaxkb <"$work/time.txt"
      local dload
      dload=$(python3 -c "import json,sys; d=json.loads(open('$work/duck.out').read().strip().splitlines()[-1]); print(d['rows'], '%.2f' % d['seconds'])")
      printf 'DuckDB read_json: rows and load s: %s; process %s s wall, %s s user, %s s sys, peak RSS %d MB\n' \
        "$dload" "$dwall" "$duser" "$dsys" $((dmaxkb / 1024))
      python3 -c "print('speed (DuckDB load s / tracedb wall s): %.1fx; memory (tracedb / DuckDB peak): %.3f' % ($(echo "$dload" | cut -d' ' -f2) / $wall, $maxkb / $dmaxkb))"
    elif [ "$rc" = 124 ]; then
      echo "DuckDB read_json: stopped after $duck_timeout s (timeout)"
    else
      echo "DuckDB read_json: failed (exit $rc): $(grep -v '^ *at ' "$work/duck.out" | grep -m2 -i 'error\|memory' | cut -c1-300)"
      [ -f "$work/time.txt" ] && echo "  its process: $(cat "$work/time.txt") (wall s, user s, sys s, peak KB)"
    fi
    rm -rf "$work/$name.duckdb" "$work/$name.duckdb.wal" "$work/duck.tmp"
  fi
  rm -f "$file"
}

if [ -z "$only" ] || [ "$only" = horovod ]; then
  run_one horovod "$horovod_gb" array
fi
if [ -z "$only" ] || [ "$only" = kineto ]; then
  run_one kineto "$kineto_gb" object --kineto --flows
fi
