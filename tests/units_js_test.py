#!/usr/bin/env python3
"""The web pages' human units (view/web/units.js) against the SQL functions human_duration() and
human_bytes() (engine/util/human_units.cc), which the terminal output uses: the same text for every
value, exact printf ties (1125 ns -> "1.12 us", half to even), negatives, unit boundaries and
random values included. node runs the JavaScript; the stock sqlite3 with the loadable extension
runs the C++. Exit 77 (skipped) when node or sqlite3 is missing, except under CI=true."""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ext", required=True, help="libtracedb_sqlite.so")
    ap.add_argument("--units", required=True, help="view/web/units.js")
    args = ap.parse_args()
    for tool in ("node", "sqlite3"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed")
            sys.exit(1 if os.environ.get("CI") == "true" else 77)

    rng = random.Random(20261127)
    durations = [0, 1, 999, 999.5, 1000, 1125, 1005, 3400, 999994, 999995, 999999, 1e6, 12345678,
                 999_995_000, 1e9, 1250000000, 2.5, 0.5, -1125, -2.5, -1e9, 1e15]
    durations += [rng.randint(0, 10**12) for _ in range(300)]
    durations += [rng.uniform(-1e10, 1e10) for _ in range(300)]
    durations += [rng.randint(1, 999) * 125 for _ in range(100)]  # many exact binary ties
    sizes = [0, 1, 999, 1000, 1050, 1500, 999_950, 3.2e6, 1e18, -2048]
    sizes += [rng.randint(0, 10**13) for _ in range(300)]

    def sql_values(fn, values):
        # One statement over a JSON array (json_each keeps the order of its elements).
        lit = json.dumps(values).replace("'", "''")
        r = subprocess.run(["sqlite3", ":memory:", f".load {args.ext}",
                            f"SELECT {fn}(value) FROM json_each('{lit}') ORDER BY key"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(f"sqlite3 failed: {r.stderr.strip()[:500]}")
            sys.exit(1)
        return r.stdout.splitlines()

    js = ("const u = require(process.argv[1]);"
          "const d = JSON.parse(process.argv[2]);"
          "console.log(JSON.stringify([d.dur.map(u.humanDuration), d.bytes.map(u.humanBytes)]));")
    out = subprocess.run(["node", "-e", js, os.path.abspath(args.units),
                          json.dumps({"dur": durations, "bytes": sizes})],
                         capture_output=True, text=True, check=True).stdout
    js_dur, js_bytes = json.loads(out)

    failures = 0
    for name, values, c, j in (("human_duration", durations, sql_values("human_duration", durations),
                                js_dur),
                               ("human_bytes", sizes, sql_values("human_bytes", sizes), js_bytes)):
        assert len(c) == len(values) == len(j), (name, len(c), len(values), len(j))
        for v, a, b in zip(values, c, j):
            if a != b:
                failures += 1
                print(f"{name}({v!r}): SQL {a!r}, units.js {b!r}")
    print(f"{len(durations)} durations, {len(sizes)} sizes compared, {failures} differ")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
