"""The read path into NumPy and pandas beside pandas.read_sql over the same query and beside
loading the equivalent Chrome/Kineto JSON with the standard library into pandas (the way
Holistic Trace Analysis loads a trace: json.load, then a DataFrame of traceEvents).

    PYTHONPATH=build/python /usr/bin/python3 bench/python_read_bench.py --build build \
        [--events 10000000] [--json-ranks 0] [--repeat 3] [--db DB] [--numpy-only]

Generates the database with bench/db_bench_gen (Horovod-like spans on 8 ranks) and compacts it
with the tracedb CLI; the JSON is `tracedb export --chrome` of the ranks in --json-ranks (a
slice: 10M events of JSON objects do not fit in this machine's memory), compared per event.
--db reads an existing database instead (one written by another build, e.g. of an older block
format); --numpy-only stops after the first row (db.events(rank, ts, dur) -> NumPy), the one
that measures block decoding. Figures: docs/bench-python.md.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

import tracedb


_cpu = {}


def timed(fn, repeat):
    """Median wall time; the median CPU time of the process (all threads) goes to _cpu["last"]:
    on a shared machine, events per CPU-second is the figure that other jobs disturb least."""
    times, cpus, result = [], [], None
    for _ in range(repeat):
        result = None
        c = time.process_time()
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    _cpu["last"] = statistics.median(cpus)
    return statistics.median(times), result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json-ranks", default="0")
    ap.add_argument("--keep", default="", help="directory to keep the generated files in")
    ap.add_argument("--db", default="", help="an existing database to read (nothing generated)")
    ap.add_argument("--numpy-only", action="store_true",
                    help="only db.events(rank, ts, dur) -> NumPy")
    a = ap.parse_args()
    import pandas as pd

    tmp = a.keep or tempfile.mkdtemp(prefix="tracedb-read-bench-")
    os.makedirs(tmp, exist_ok=True)
    build = os.path.abspath(a.build)
    cli = os.path.join(build, "tracedb")
    db_path = a.db or os.path.join(tmp, f"{a.events}.tdb")
    try:
        if not os.path.exists(db_path):
            subprocess.run([os.path.join(build, "bench", "db_bench_gen"), tmp, str(a.events), "8",
                            "--no-csv"], check=True, stdout=subprocess.DEVNULL)
            subprocess.run([cli, "compact", os.path.join(tmp, "trace"), "-o", db_path],
                           check=True, stdout=subprocess.DEVNULL)
        db = tracedb.open(db_path)
        n_total = db.sql("SELECT sum(count) FROM blocks")[0][0]
        print(f"database: {n_total:,} events, {os.path.getsize(db_path) / 1e6:.1f} MB; "
              f"median of {a.repeat}; decoding threads: "
              f"{os.environ.get('TRACEDB_READ_THREADS', 'all cores')} ({os.cpu_count()} here)")
        rows = []

        print(f"  {'':58s} {'wall':>8s}   {'M events/s':>10s} {'CPU s':>7s} "
              f"{'M events/CPU-s':>14s}")

        def add(what, seconds, n):
            rows.append((what, seconds, n))
            cpu = _cpu["last"]
            print(f"  {what:58s} {seconds:8.3f} s {n / seconds / 1e6:10.1f} {cpu:7.3f} "
                  f"{n / cpu / 1e6:14.1f}", flush=True)

        cols3 = ["rank", "ts", "dur"]
        cols5 = ["rank", "name", "ts", "dur", "depth"]
        t, r = timed(lambda: db.events(columns=cols3, pandas=False), a.repeat)
        add("db.events(rank, ts, dur) -> NumPy", t, len(r["ts"]))
        if a.numpy_only:
            return
        t, r = timed(lambda: db.events(columns=cols5, pandas=False), a.repeat)
        add("db.events(rank, name, ts, dur, depth) -> NumPy (name: str)", t, len(r["ts"]))
        t, r = timed(lambda: db.events(columns=cols5, pandas=True), a.repeat)
        add("db.events(rank, name, ts, dur, depth) -> pandas", t, len(r))
        t, r = timed(lambda: db.events(columns=cols5, where={"name": "COMMUNICATE"},
                                       pandas=True), a.repeat)
        add("db.events(..., where name = COMMUNICATE) -> pandas", t, len(r))

        con = db.connection()
        t, r = timed(lambda: pd.read_sql("SELECT rank, name, ts, dur, depth FROM events", con),
                     1)
        add("pandas.read_sql(SELECT rank, name, ts, dur, depth)", t, len(r))
        del r

        json_path = os.path.join(tmp, "slice.json")
        subprocess.run([cli, "export", "--chrome", db_path, "-o", json_path, "--ranks",
                        a.json_ranks, "--quiet"], check=True)
        size = os.path.getsize(json_path)

        def load_json():
            with open(json_path) as f:
                trace = json.load(f)
            return pd.DataFrame(trace["traceEvents"])
        t, r = timed(load_json, 1)
        n_json = int((r["ph"] == "X").sum()) if "ph" in r else len(r)
        add(f"json.load + DataFrame of Chrome JSON (ranks {a.json_ranks}, "
            f"{size / 1e6:.0f} MB)", t, n_json)
        del r
        t, r = timed(lambda: db.events(columns=cols5, where={"rank": [int(x) for x in
                                                                   a.json_ranks.split(",")]},
                                       pandas=True), a.repeat)
        add(f"db.events(...) of the same ranks ({a.json_ranks}) -> pandas", t, len(r))

        base = {w: n / s for w, s, n in rows}
        ours = base["db.events(rank, name, ts, dur, depth) -> pandas"]
        sql = base["pandas.read_sql(SELECT rank, name, ts, dur, depth)"]
        js = [v for k, v in base.items() if k.startswith("json.load")][0]
        print(f"ratios (events/s): db.events->pandas / read_sql = {ours / sql:.1f}x, "
              f"/ JSON load = {ours / js:.1f}x")
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
