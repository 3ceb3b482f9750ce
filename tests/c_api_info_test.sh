#!/usr/bin/env bash
# Runs the C program on several threads and checks that `tracedb info --json` counts exactly
# what it emitted (written + dropped), over every rank.
set -euo pipefail
tmp="${TRACEDB_TEST_TMP:-/tmp}/c-api-$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

total=0
for rank in 0 1 2; do
  out=$(TRACEDB_RANK=$rank TRACEDB_WORLD_SIZE=3 "$C_API_PROGRAM" "$tmp/trace" 4 25003)
  echo "rank $rank: $out"
  read -r _ emitted _ written _ dropped <<<"$out"
  [ "$emitted" -eq $((4 * 25003)) ] || { echo "bad emitted count"; exit 1; }
  [ $((written + dropped)) -eq "$emitted" ] || { echo "written+dropped != emitted"; exit 1; }
  total=$((total + emitted))
done

json=$("$TRACEDB_BIN" info "$tmp/trace" --json)
echo "$json"
python3 - "$json" "$total" <<'PY'
import json, sys
info = json.loads(sys.argv[1])
total = int(sys.argv[2])
assert info["ranks"] == 3, info
assert info["events"] + info["dropped"] == total, (info["events"], info["dropped"], total)
assert info["bytes"] > 0
assert info["corrupt_blocks"] == 0 and info["torn_tails"] == 0, info
print("ok: %d events + %d dropped == %d emitted" % (info["events"], info["dropped"], total))
PY
"$TRACEDB_BIN" info "$tmp/trace" | head -n 3
# A missing directory is a clear error with exit code 1.
if "$TRACEDB_BIN" info "$tmp/missing" 2>"$tmp/err"; then echo "expected failure"; exit 1; fi
grep -q "no such directory" "$tmp/err"
