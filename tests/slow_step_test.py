#!/usr/bin/env python3
"""step_stats and the slow-step trigger end to end (docs/flight.md "step_stats", "Slow steps").

tests/slow_step_program.c runs steps of a known length (sleeps: a `work` span, then a 2 ms
MPI_Allreduce of 1000 + step bytes and a 1 ms MPI_Isend of 10 bytes: 3 spans a step), with
slow steps injected at known steps (400 ms for 40 ms; the trigger's factor is 5, so that a
loaded machine's stalls do not fire it). Checked against what was injected:
  - flight mode (TRACEDB_FLIGHT=800ms, TRACEDB_SLOW_STEP=5), slow steps 25 and 75 of 110:
    `triggers` holds exactly two `slow_step` rows, inside steps 25 and 75 (by the step_stats
    bounds, and by the trigger instants' own `step`); the `work` events of steps 24-26 and
    74-76 are written, none of steps 0-3, 48-53 or 101-109 (far from both). The ring is the
    800 ms ending at the slow step's end: at least 400 ms (10 steps) before the 400 ms slow
    step, at most 800 ms more where no drain came to forget older blocks (18 steps); then
    800 ms (20 steps) after it;
  - `step_stats` has one row for every step 0-109 even so (most steps have no events), with
    dur_ns at least the injected sleeps, the slow steps at least 4x the median of the others,
    events = 3 (the spans), bytes = 1010 + step, compute_ns >= the work sleep, wait_ns >= the Allreduce
    sleep and comm_ns - wait_ns >= the Isend sleep (MPI_Isend is not a blocking call),
    top_names = work (its time is compute_ns), then MPI_Allreduce and MPI_Isend; and the
    STEPSTATS blocks of the segment files (read here frame by frame, independently of the
    product) are small per step;
  - without flight mode: no trigger (the slow-step trigger belongs to flight mode), every step
    written, and step_stats' start_ns and dur_ns equal the `steps` table's marker times and
    their differences exactly, and its events the rows of each step in the events table (a
    separate reading of the same events);
  - a healthy flight run (no slow step) fires no trigger and writes no events, and
    TRACEDB_SLOW_STEP=0 turns the trigger off with slow steps injected.
Exit 0 passed, 1 failed.
"""
import argparse
import csv
import io
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile

FAILURES = []
STEP_MS, SLOW_MS = 40, 400
STEPSTATS_BLOCK = 11  # docs/segment-format.md, block types


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL: " + what)
    return cond


def query(args, db, sql):
    out = subprocess.run([args.tracedb, "query", db, sql, "-f", "csv"], capture_output=True,
                         text=True, timeout=60)
    if not check(out.returncode == 0, "query %s: %s" % (sql, out.stderr)):
        return []
    return list(csv.DictReader(io.StringIO(out.stdout)))


def run(args, work, name, steps, slow, flight=None, k=None):
    trace = os.path.join(work, name)
    env = dict(os.environ, TRACEDB_DIR=trace, TRACEDB_FLUSH_MS="50")
    for v in ("TRACEDB_FLIGHT", "TRACEDB_SLOW_STEP", "TRACEDB_HANG_TIMEOUT"):
        env.pop(v, None)
    if flight:
        env["TRACEDB_FLIGHT"] = flight
    if k is not None:
        env["TRACEDB_SLOW_STEP"] = k
    argv = [args.program, str(steps), str(STEP_MS), str(SLOW_MS)] + [str(s) for s in slow]
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0 and p.stderr == "", "%s: exit %d: %s" % (name, p.returncode, p.stderr))
    db = os.path.join(work, name + ".tdb")
    c = subprocess.run([args.tracedb, "compact", trace, "-o", db, "--finish", "-q"],
                       capture_output=True, text=True, timeout=120)
    check(c.returncode == 0, "%s: compact: %s" % (name, c.stderr))
    return trace, db


def work_steps(args, db):
    return set(int(r["step"]) for r in query(args, db, "SELECT step FROM events "
                                                      "WHERE name = 'work'"))


def stepstats_block_bytes(trace):
    """Bytes of the STEPSTATS blocks (frame header + stored payload) in every segment file."""
    total = 0
    for root, _, files in os.walk(trace):
        for f in files:
            if not f.endswith(".tds"):
                continue
            data = open(os.path.join(root, f), "rb").read()
            pos = 32
            while pos + 20 <= len(data):
                magic, btype, _codec, _res, stored = struct.unpack_from("<4sBBHI", data, pos)
                if magic != b"TDBK":
                    break
                if btype == STEPSTATS_BLOCK:
                    total += 20 + stored
                pos += 20 + stored
    return total


def check_stats(args, db, trace, name, steps, slow):
    rows = query(args, db, "SELECT * FROM step_stats ORDER BY rank, step")
    got = [(int(r["rank"]), int(r["step"])) for r in rows]
    check(got == [(0, s) for s in range(steps)],
          "%s: step_stats rows %s, want rank 0 steps 0-%d" % (name, got[:5], steps - 1))
    normal = []
    for r in rows:
        s = int(r["step"])
        ms = SLOW_MS if s in slow else STEP_MS
        dur = int(r["dur_ns"])
        check(dur >= ms * 1e6 * 0.99, "%s: step %d lasted %d ns, slept %d ms" % (name, s, dur, ms))
        check(int(r["end_ns"]) - int(r["start_ns"]) == dur, "%s: step %d end - start" % (name, s))
        if s not in slow:
            normal.append(dur)
        # The program's 3 spans: the trigger's own instant is not one of them.
        check(int(r["events"]) == 3, "%s: step %d events %s, want 3" % (name, s, r["events"]))
        check(int(r["bytes"]) == 1010 + s, "%s: step %d bytes %s" % (name, s, r["bytes"]))
        compute, comm, wait = int(r["compute_ns"]), int(r["comm_ns"]), int(r["wait_ns"])
        check((ms - 3) * 1e6 * 0.99 <= compute <= dur,
              "%s: step %d compute_ns %d (work slept %d ms)" % (name, s, compute, ms - 3))
        check(wait >= 2e6 * 0.99 and comm - wait >= 1e6 * 0.99 and comm + compute <= dur,
              "%s: step %d comm_ns %d wait_ns %d" % (name, s, comm, wait))
        top = json.loads(r["top_names"])
        # The order of the two short calls is left to the machine's sleeps.
        check(top[0] == ["work", compute] and
              sorted(t[0] for t in top[1:]) == ["MPI_Allreduce", "MPI_Isend"], "%s: step %d top_names %s" % (name, s, r["top_names"]))
    if normal:
        med = statistics.median(normal)
        check(med < 2 * STEP_MS * 1e6, "%s: median step %d ns for %d ms sleeps" % (name, med,
                                                                                    STEP_MS))
        for r in rows:
            if int(r["step"]) in slow:
                check(int(r["dur_ns"]) >= 4 * med, "%s: slow step %s lasted %s ns, median %d" %
                      (name, r["step"], r["dur_ns"], med))
    block_bytes = stepstats_block_bytes(trace)
    per_step = block_bytes / max(1, len(rows))
    print("%s: STEPSTATS %d bytes for %d steps: %.1f bytes per step and rank" %
          (name, block_bytes, len(rows), per_step))
    check(0 < per_step <= 1024, "%s: %.1f bytes of STEPSTATS per step" % (name, per_step))
    return rows


def trigger_steps(args, db):
    return [(t["reason"], t["step"]) for t in query(
        args, db, "SELECT t.reason, s.step FROM triggers t LEFT JOIN step_stats s "
                  "ON s.rank = t.rank AND t.ts >= s.start_ns AND t.ts < s.end_ns ORDER BY t.ts")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracedb", required=True)
    ap.add_argument("--program", required=True)
    ap.add_argument("--tmp", default=tempfile.gettempdir())
    args = ap.parse_args()
    os.makedirs(args.tmp, exist_ok=True)
    work = tempfile.mkdtemp(prefix="slow-step-", dir=args.tmp)
    try:
        slow = (25, 75)
        trace, db = run(args, work, "flight", 110, slow, flight="800ms", k="5")
        check(trigger_steps(args, db) == [("slow_step", "25"), ("slow_step", "75")],
              "flight: triggers (reason, step) %s, want slow_step at 25 and 75" %
              trigger_steps(args, db))
        inst = [int(r["step"]) for r in query(
            args, db, "SELECT step FROM events WHERE name = 'tracedb.trigger:slow_step' "
                      "ORDER BY ts")]
        check(inst == [25, 75], "flight: trigger instants in steps %s" % inst)
        steps = work_steps(args, db)
        for s in (24, 25, 26, 74, 75, 76):
            check(s in steps, "flight: step %d (next to a slow step) not written" % s)
        far = sorted(s for s in steps if s <= 3 or 48 <= s <= 53 or s >= 101)
        check(not far, "flight: steps far from the slow steps written: %s" % far)
        check_stats(args, db, trace, "flight", 110, slow)

        trace, db = run(args, work, "plain", 40, (15,), k="5")
        check(trigger_steps(args, db) == [], "plain: triggers %s" % trigger_steps(args, db))
        check(work_steps(args, db) == set(range(40)), "plain: not every step written")
        rows = check_stats(args, db, trace, "plain", 40, (15,))
        marks = [int(r["ts"]) for r in query(args, db, "SELECT ts FROM steps ORDER BY ts")]
        check(len(marks) == 40, "plain: %d step markers" % len(marks))
        for r, ts in zip(rows, marks):
            check(int(r["start_ns"]) == ts, "plain: step %s starts at %s, its marker at %d" %
                  (r["step"], r["start_ns"], ts))
        # events: the rows each step has in the events table (every step is written here).
        per_step = {int(r["step"]): int(r["n"]) for r in query(
            args, db, "SELECT step, count(*) AS n FROM events GROUP BY step")}
        for r in rows:
            check(per_step.get(int(r["step"])) == int(r["events"]),
                  "plain: step %s has %s rows in events, step_stats says %s" %
                  (r["step"], per_step.get(int(r["step"])), r["events"]))
        for r, a, b in zip(rows, marks, marks[1:]):
            check(int(r["dur_ns"]) == b - a, "plain: step %s dur %s, markers %d apart" %
                  (r["step"], r["dur_ns"], b - a))

        trace, db = run(args, work, "healthy", 40, (), flight="400ms", k="5")
        check(trigger_steps(args, db) == [], "healthy: triggers %s" % trigger_steps(args, db))
        check(work_steps(args, db) == set(), "healthy: events written without a trigger")
        check_stats(args, db, trace, "healthy", 40, ())

        trace, db = run(args, work, "off", 40, (15,), flight="400ms", k="0")
        check(trigger_steps(args, db) == [], "off: triggers %s" % trigger_steps(args, db))
        check(work_steps(args, db) == set(), "off: events written with the trigger off")
        check_stats(args, db, trace, "off", 40, (15,))
    finally:
        if not FAILURES:
            shutil.rmtree(work, ignore_errors=True)
    if FAILURES:
        print("%d failure(s); files kept in %s" % (len(FAILURES), work))
        return 1
    print("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
