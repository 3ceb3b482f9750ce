#!/usr/bin/env python3
"""A many-rank job, compacted and checked against its generator (issue 12 item 4).

tests/scale_job_gen.cc writes RANKS ranks' segment files with true clocks and injected
stragglers; this script compacts them with `tracedb compact --finish` under a small limit of open
files and checks, against what the generator says (never against tracedb's own output):
  - rows: `events` holds exactly the rows the generator made, `steps` one marker per rank and step;
  - clocks: every step marker's ts (read from the plain `steps` table with Python's sqlite3) is
    within its rank's stated `ranks.uncertainty_ns` of the true common time in truth.csv;
  - stragglers: `tracedb report stragglers -f csv` ranks first exactly the ranks that truly
    made the others wait >= 5 ms (collectives.csv: the injected stragglers, each last in every
    step it was slowed in, and the ranks the MPI_Init clock sync released last, at step 0
    only), with the wait they caused within 2%.
It also measures compaction (CPU, wall, peak RSS, most open files, DB size) and prints them as
one JSON line, which bench/run_scale_bench.sh tabulates. Exit 0 when every check passes.

Usage: scale_job_test.py --tracedb BIN --gen BIN --tmp DIR --ranks N [--steps N]
                         [--nofile N] [--keep] [--gen-arg ARG]...
"""
import argparse
import csv
import io
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import threading
import time


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def stragglers_for(ranks):
    """Four ranks on different nodes (8 ranks per node), none of them rank 0 or a leader."""
    picks = [ranks // 7 + 3, ranks // 3 + 1, ranks // 2 + 6, ranks - 2]
    out = []
    for p in picks:
        p = max(1, min(ranks - 1, p))
        if p not in out:
            out.append(p)
    return out


def count_fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0


def run_measured(cmd, nofile):
    """Runs cmd with RLIMIT_NOFILE = nofile; returns (rc, stderr, cpu_s, wall_s, maxrss_kb,
    max_fds). CPU and RSS are the child's own (wait4), the fds sampled every millisecond."""

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit)
    max_fds = [0]
    done = threading.Event()

    def poll():
        while not done.is_set():
            max_fds[0] = max(max_fds[0], count_fds(p.pid))
            time.sleep(0.001)

    poller = threading.Thread(target=poll)
    poller.start()
    out_buf, err_buf = [], []
    readers = [threading.Thread(target=lambda: out_buf.append(p.stdout.read())),
               threading.Thread(target=lambda: err_buf.append(p.stderr.read()))]
    for r in readers:
        r.start()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    done.set()
    poller.join()
    for r in readers:
        r.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    return (p.returncode, (err_buf[0] if err_buf else b"").decode(errors="replace"),
            ru.ru_utime + ru.ru_stime, wall, ru.ru_maxrss, max_fds[0])


def human_ns(text):
    """'437.14 ms' (engine/util/human_units.h) in ns."""
    units = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9, "min": 60e9, "h": 3600e9}
    value, _, unit = text.strip().partition(" ")
    if unit not in units:
        fail(f"report stragglers: cannot read the duration {text!r}")
    return float(value) * units[unit]


def query_csv(tracedb, db, sql):
    r = subprocess.run([tracedb, "query", db, sql, "--format", "csv"], capture_output=True,
                       text=True)
    if r.returncode != 0:
        fail(f"tracedb query {sql!r}: {r.stderr.strip()}")
    return list(csv.DictReader(io.StringIO(r.stdout)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracedb", required=True)
    ap.add_argument("--gen", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--nofile", type=int, default=32,
                    help="RLIMIT_NOFILE of the compaction (open files must stay bounded)")
    ap.add_argument("--keep", action="store_true", help="keep the generated job and DB")
    ap.add_argument("--gen-arg", action="append", default=[],
                    help="an extra argument for the generator (e.g. --no-members)")
    args = ap.parse_args()

    work = os.path.join(args.tmp, f"scale_job_{args.ranks}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(args.tmp, exist_ok=True)
    strag = stragglers_for(args.ranks)
    gen_cmd = [args.gen, work, str(args.ranks), "--steps", str(args.steps)]
    for s in strag:
        gen_cmd += ["--straggler", str(s)]
    gen_cmd += args.gen_arg
    t0 = time.monotonic()
    g = subprocess.run(gen_cmd, capture_output=True, text=True)
    gen_wall = time.monotonic() - t0
    if g.returncode != 0:
        fail(f"generator: {g.stderr.strip()}")
    fields = g.stdout.split()
    made = dict(zip(fields[0::2], (int(v) for v in fields[1::2])))

    db = os.path.join(work, "job.tdb")
    rc, err, cpu, wall, rss_kb, fds = run_measured(
        [args.tracedb, "compact", os.path.join(work, "trace"), "-o", db, "--finish", "-q"],
        args.nofile)
    if rc != 0:
        fail(f"compact (RLIMIT_NOFILE {args.nofile}) exited {rc}: {err.strip()}")
    db_bytes = os.path.getsize(db)

    # Rows: the generator's counts.
    n = int(query_csv(args.tracedb, db, "SELECT count(*) AS n FROM events")[0]["n"])
    if n != made["rows"]:
        fail(f"events has {n} rows, the generator made {made['rows']}")
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    nsteps = con.execute("SELECT count(*) FROM steps").fetchone()[0]
    if nsteps != args.ranks * args.steps:
        fail(f"steps has {nsteps} markers, expected {args.ranks} x {args.steps}")
    nranks = con.execute("SELECT count(*) FROM ranks").fetchone()[0]
    if nranks != args.ranks:
        fail(f"ranks has {nranks} rows, expected {args.ranks}")

    # Communicators: each rank defines the world (comm 0) and its MPI_COMM_SELF (comm 2 + rank),
    # as the generator's DefineComms writes them; every distinct member list is stored once.
    world = None if "--no-members" in args.gen_arg else ",".join(map(str, range(args.ranks)))
    want = sorted([(r, 0, args.ranks, r, world) for r in range(args.ranks)] +
                  [(r, 2 + r, 1, 0, str(r)) for r in range(args.ranks)])
    got = sorted(con.execute("SELECT rank, comm, size, rank_in_comm, members FROM comms"))
    if got != want:
        bad = next((w, g) for w, g in zip(want + [None] * len(got), got + [None] * len(want))
                   if w != g)
        fail(f"comms differs from the generator's: expected {bad[0]}, got {bad[1]}")
    groups = con.execute("SELECT count(*) FROM comm_groups").fetchone()[0]
    if groups != args.ranks + (world is not None):
        fail(f"comm_groups has {groups} rows, expected {args.ranks + (world is not None)} "
             "(the world once, one MPI_COMM_SELF per rank)")

    # Clocks: every step marker against the truth, within its rank's stated uncertainty.
    unc = {}
    method = {}
    for rank, m, u in con.execute("SELECT rank, clock_method, uncertainty_ns FROM ranks"):
        if u is None:
            fail(f"rank {rank} ({m}) states no clock uncertainty")
        unc[rank], method[rank] = u, m
    got = {(r, s): ts for r, s, ts in con.execute("SELECT rank, step, ts FROM steps")}
    con.close()
    worst = {}  # rank -> largest |error|
    with open(os.path.join(work, "truth.csv")) as f:
        for row in csv.DictReader(f):
            key = (int(row["rank"]), int(row["step"]))
            if key not in got:
                fail(f"no step marker for rank {key[0]} step {key[1]}")
            e = abs(got[key] - int(row["common_ns"]))
            worst[key[0]] = max(worst.get(key[0], 0), e)
    # 2 ns of slack: integer rounding in the generator's and compaction's linear maps.
    bad = [(r, e, unc[r], method[r]) for r, e in worst.items() if e > unc[r] + 2]
    if bad:
        bad.sort(key=lambda b: b[1] - b[2], reverse=True)
        fail(f"{len(bad)} ranks beyond their stated clock uncertainty, worst "
             + ", ".join(f"rank {r} ({m}): error {e} ns > {u} ns" for r, e, u, m in bad[:5]))
    by_method = {}
    for r, e in worst.items():
        m = method[r]
        cur = by_method.setdefault(m, {"ranks": 0, "max_error_ns": 0, "max_unc_ns": 0,
                                       "max_error_over_unc": 0.0})
        cur["ranks"] += 1
        cur["max_error_ns"] = max(cur["max_error_ns"], e)
        cur["max_unc_ns"] = max(cur["max_unc_ns"], unc[r])
        cur["max_error_over_unc"] = max(cur["max_error_over_unc"], e / max(unc[r], 1))

    # Stragglers: the report against who really arrived last (collectives.csv, true time).
    # Skews of a few us (ranks leaving the previous allreduce) are below the clock uncertainty,
    # so only the collectives whose true skew is >= 1 ms are expected to be attributed
    # exactly: the injected stragglers' slowed steps, and step 0's first allreduce, which waits
    # for the ranks that the MPI_Init clock sync released last.
    t0 = time.monotonic()
    r = subprocess.run([args.tracedb, "report", "stragglers", db, "-f", "csv"],
                       capture_output=True, text=True)
    report_wall = time.monotonic() - t0
    if r.returncode != 0:
        fail(f"report stragglers: {r.stderr.strip()}")
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    reported = {int(x["rank"]): (int(x["times_last"]), human_ns(x["others_waited"]))
                for x in rows}
    true_wait, true_times, late_at = {}, {}, {}
    with open(os.path.join(work, "collectives.csv")) as f:
        for row in csv.DictReader(f):
            skew = int(row["skew_ns"])
            if skew < 1_000_000:
                continue
            last = int(row["last_rank"])
            true_wait[last] = true_wait.get(last, 0) + skew
            true_times[last] = true_times.get(last, 0) + 1
            late_at.setdefault(last, []).append(int(row["seq"]))
    significant = 5e6  # ns of others' waiting: far above what us-skews add up to
    found = {rk for rk, (_, w) in reported.items() if w >= significant}
    truth = {rk for rk, w in true_wait.items() if w >= significant}
    if found != truth:
        fail(f"report stragglers: ranks causing >= 5 ms of waiting {sorted(found)}, "
             f"truly {sorted(truth)}")
    k = len(strag)
    for rk in truth:
        times, wait = reported[rk]
        # The report sums every collective the rank was last in (us-skews too): within 2% or
        # 1 ms of the significant ones' true sum.
        if abs(wait - true_wait[rk]) > max(0.02 * true_wait[rk], 1e6) or times < true_times[rk]:
            fail(f"report stragglers: rank {rk} last {times} times, caused {wait:.0f} ns; "
                 f"truly {true_times[rk]} times, {true_wait[rk]} ns")
        if rk in strag:
            # The generator slows straggler i in the steps s >= 1 with s % k == i.
            i = strag.index(rk)
            slowed = sum(1 for s in range(1, args.steps) if s % k == i)
            if times < slowed:
                fail(f"straggler {rk} last only {times} times (slowed in {slowed} steps)")
        elif late_at[rk] != [0]:
            fail(f"rank {rk} is no injected straggler, yet truly last at collectives "
                 f"{late_at[rk][:10]}")
    if not set(strag) <= found:
        fail(f"injected stragglers {strag}, the report found {sorted(found)}")
    top = [int(x["rank"]) for x in rows[:len(truth)]]
    if set(top) != truth:
        fail(f"report stragglers lists {top} first, expected {sorted(truth)}")
    late_synced = sorted(truth - set(strag))

    seg_bytes = made["bytes"]
    print(json.dumps({
        "ranks": args.ranks, "nodes": made["nodes"], "steps": args.steps,
        "segment_events": made["events"], "rows": made["rows"], "segment_bytes": seg_bytes,
        "gen_wall_s": round(gen_wall, 2), "compact_cpu_s": round(cpu, 2),
        "compact_wall_s": round(wall, 2), "compact_max_rss_kb": rss_kb,
        "compact_max_fds": fds, "nofile_limit": args.nofile, "db_bytes": db_bytes,
        "report_stragglers_wall_s": round(report_wall, 2), "stragglers": strag,
        "late_after_sync": late_synced,
        "clock": by_method}))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
