#!/usr/bin/env bash
# Runs the C program on several threads and checks that `tracedb info --json` counts exactly
# the events it emitted (a begin/end pair once, as the span it is), over every rank, and that
# `tracedb compact` reports and the DB holds the same number (counted with plain SQL). The
# checks run in $PYTHON3 (default: python3; CTest passes TRACEDB_TEST_PYTHON3).
set -euo pipefail
tmp="${TRACEDB_TEST_TMP:-/tmp}/c-api-$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

total=0
for rank in 0 1 2; do
  out=$(TRACEDB_RANK=$rank TRACEDB_WORLD_SIZE=3 "$C_API_PROGRAM" "$tmp/trace" 4 25003)
  echo "rank $rank: $out"
  read -r _ emitted _ written _ dropped _ events <<<"$out"
  [ "$emitted" -eq $((4 * 25003 + 1000)) ] || { echo "bad emitted count"; exit 1; }
  [ $((written + dropped)) -eq "$emitted" ] || { echo "written+dropped != emitted"; exit 1; }
  # 25003 records a thread: 5000 loops of 5 records (4 events) and 3 instants.
  [ "$events" -eq $((4 * (5000 * 4 + 3) + 1000)) ] || { echo "bad event count"; exit 1; }
  [ "$dropped" -eq 0 ] || { echo "the recorder dropped $dropped records: counts not comparable"; exit 1; }
  total=$((total + events))
done

json=$("$TRACEDB_BIN" info "$tmp/trace" --json)
echo "$json"
"${PYTHON3:-python3}" - "$json" "$total" <<'PY'
import json, sys
info = json.loads(sys.argv[1])
total = int(sys.argv[2])
assert info["ranks"] == 3, info
assert info["events"] == total and info["dropped"] == 0, (info["events"], info["dropped"], total)
assert info["bytes"] > 0
assert info["corrupt_blocks"] == 0 and info["torn_tails"] == 0, info
print("ok: %d events == %d emitted" % (info["events"], total))
PY
# compact says the same number and the DB holds one row per event (plain SQL on the file).
"$TRACEDB_BIN" compact "$tmp/trace" -o "$tmp/job.tdb" 2>&1 | tee "$tmp/compact.txt"
said=$(sed -n 's/.*compacted \([0-9,]*\) segment events.*/\1/p' "$tmp/compact.txt" | tr -d ,)
[ "$said" = "$total" ] || { echo "compact counted '$said' events, program emitted $total"; exit 1; }
rows=$("$TRACEDB_BIN" query "$tmp/job.tdb" "SELECT count(*) FROM events" --format csv | tail -n 1)
[ "$rows" -eq "$total" ] || { echo "DB holds $rows rows, program emitted $total events"; exit 1; }
# Rank 0's recorder clock is the common clock: its known durations come back to the ns (the
# others' within their clock's rate difference to rank 0's, a few ppm).
wrong=$("$TRACEDB_BIN" query "$tmp/job.tdb" --format csv \
  "SELECT count(*) FROM events WHERE name = 'known' AND rank = 0 AND dur <> 6067204" | tail -n 1)
[ "$wrong" -eq 0 ] || { echo "$wrong of rank 0's 1000 known durations changed"; exit 1; }
far=$("$TRACEDB_BIN" query "$tmp/job.tdb" --format csv \
  "SELECT count(*) FROM events WHERE name = 'known' AND abs(dur - 6067204) > 6067204 * 50e-6" |
  tail -n 1)
[ "$far" -eq 0 ] || { echo "$far known durations off by more than 50 ppm"; exit 1; }
# Every invariant of the suite's DBs (tests/db_invariants.h), where the checker is built.
if [ -n "${DB_INVARIANTS:-}" ]; then "$DB_INVARIANTS" "$tmp/job.tdb"; fi
"$TRACEDB_BIN" info "$tmp/trace" | head -n 3
# A missing directory is a clear error with exit code 1.
if "$TRACEDB_BIN" info "$tmp/missing" 2>"$tmp/err"; then echo "expected failure"; exit 1; fi
grep -q "no such directory" "$tmp/err"
