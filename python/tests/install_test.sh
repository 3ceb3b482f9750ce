#!/usr/bin/env bash
# Installs the Python package with the documented command (`cmake --install BUILD --component
# python`) into a DESTDIR and checks that the installed copy imports and records on its own.
# Usage: install_test.sh BUILD_DIR PYTHON SITE_DIR TRACEDB_BIN
set -euo pipefail
build=$1 python=$2 site=$3 tracedb=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"  # python -c puts the working directory first on sys.path
DESTDIR="$tmp/root" cmake --install "$build" --component python >/dev/null
pkg="$tmp/root$site/tracedb"
for f in __init__.py libtracedb.so.0; do
  [ -e "$pkg/$f" ] || { echo "FAIL: $pkg/$f not installed"; exit 1; }
done
ls "$pkg"/_tracedb*.so >/dev/null || { echo "FAIL: no extension in $pkg"; exit 1; }
# No build tree on the path: the installed package must find its own libtracedb.so.0.
env -u PYTHONPATH -u LD_LIBRARY_PATH PYTHONPATH="$tmp/root$site" TRACEDB_DIR="$tmp/seg" \
  "$python" -c '
import tracedb, sys
assert tracedb.__file__.startswith(sys.argv[1]), tracedb.__file__
with tracedb.span("installed"):
    pass
' "$tmp/root$site"
lib=$(env -u LD_LIBRARY_PATH PYTHONPATH="$tmp/root$site" "$python" -c '
import tracedb, tracedb._tracedb as m
print(open("/proc/self/maps").read())' | grep -o '/[^ ]*libtracedb\.so[^ ]*' | sort -u)
case "$lib" in
  "$tmp"/*) ;;
  *) echo "FAIL: the installed extension loaded $lib"; exit 1 ;;
esac
"$tracedb" compact "$tmp/seg" -o "$tmp/job.tdb" >/dev/null
n=$("$tracedb" query --format csv "$tmp/job.tdb" "SELECT count(*) FROM events WHERE name = 'installed'" | tail -1)
[ "$n" = "1" ] || { echo "FAIL: expected 1 event, got $n"; exit 1; }
# The installed read path: db.sql through the installed SQLite extension, db.events when NumPy is
# there.
env -u PYTHONPATH -u LD_LIBRARY_PATH PYTHONPATH="$tmp/root$site" "$python" -c '
import sys, tracedb
db = tracedb.open(sys.argv[1])
assert db.sql("SELECT count(*) FROM events WHERE name = ?", ("installed",)) == [(1,)]
try:
    import numpy
except ImportError:
    sys.exit(0)
cols = db.events(columns=["name"], pandas=False)
assert list(cols["name"]) == ["installed"], cols
' "$tmp/job.tdb"
echo "OK: installed into $pkg, recorded one span and read it back"
