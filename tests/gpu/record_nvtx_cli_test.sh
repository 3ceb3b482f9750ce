#!/usr/bin/env bash
# `tracedb record --nvtx` end to end: the NVTX test program, which knows nothing of tracedb, is
# recorded through the injection library that the record command finds next to itself, and its
# ranges come back as spans (nvtx_program.c: one "forward" push/pop, one "checkpoint" mark).
set -euo pipefail
tmp="${TRACEDB_TEST_TMP:-/tmp}/record_nvtx_cli.$$"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
"$TRACEDB_BIN" record --nvtx -o "$tmp/n.tdb" -- "$NVTX_PROGRAM" >"$tmp/out" 2>&1 || {
  cat "$tmp/out"; echo "record --nvtx failed"; exit 1; }
got=$("$TRACEDB_BIN" query --format csv "$tmp/n.tdb" \
  "SELECT (SELECT count(*) FROM events WHERE name = 'forward' AND kind = 'span') || ',' ||
          (SELECT count(*) FROM events WHERE name = 'checkpoint' AND kind = 'instant')" | tail -1)
got=${got//\"/}; [ "$got" = "1,1" ] || { echo "expected forward span 1, checkpoint instant 1; got $got"; exit 1; }
# Without --nvtx nothing of NVTX is recorded.
"$TRACEDB_BIN" record -o "$tmp/plain.tdb" -- "$NVTX_PROGRAM" >"$tmp/out" 2>&1 || true
if [ -f "$tmp/plain.tdb" ]; then
  n=$("$TRACEDB_BIN" query --format csv "$tmp/plain.tdb" \
    "SELECT count(*) FROM events WHERE name = 'forward'" | tail -1)
  n=${n//\"/}; [ "$n" = "0" ] || { echo "NVTX recorded without --nvtx ($n)"; exit 1; }
fi
echo "record --nvtx: ok"
