#!/usr/bin/env python3
"""Flight-recorder mode end to end (docs/flight.md).

tests/flight_program.c runs 1300 steps of at least 2 ms with TRACEDB_FLIGHT=300ms: a
tracedb_trigger("manual") at step 300 (then a storm of 50 more, within the rate limit), SIGUSR1
at step 1000. Only the steps around the two triggers may be written: each trigger writes the ring
(at most 300 ms before it, so at most 150 steps, plus a flush interval) and the next 300 ms.
Checked against the program's own step numbers and return codes:
  - steps 299, 300 and 999, 1000 are in the database (the ring held them);
  - steps far from both triggers (0-49, 560-740, 1250-1299) are not;
  - `triggers` holds exactly (manual, SIGUSR1) in that order; no storm trigger, and the program
    saw every storm call refused (TRACEDB_ERR_RATE);
  - with the hang watchdog on (TRACEDB_HANG_TIMEOUT=500ms) and a 1.5 s compute phase at step 500
    (no communication call open), the watchdog does not fire;
  - a communication span stuck for 1.2 s at step 400 fires it exactly once (a `hang` trigger),
    and the ring before it is written;
  - without TRACEDB_FLIGHT every step is written (the same program, the same checks inverted).
Exit 0 passed, 1 failed.
"""
import argparse
import os
import subprocess
import sys
import tempfile

from harness import check, clean_up, query, verdict


def run(args, work, name, flight, steps=1300, options=(), hang_timeout=None):
    trace = os.path.join(work, name)
    env = dict(os.environ, TRACEDB_DIR=trace, TRACEDB_FLUSH_MS="50")
    env.pop("TRACEDB_FLIGHT", None)
    env.pop("TRACEDB_HANG_TIMEOUT", None)
    # The long compute phase and the stuck call are slow steps: the slow-step trigger (tested
    # in slow_step_test.py) is off here, so that only the triggers under test fire.
    env["TRACEDB_SLOW_STEP"] = "0"
    if flight:
        env["TRACEDB_FLIGHT"] = flight
    if hang_timeout:
        env["TRACEDB_HANG_TIMEOUT"] = hang_timeout
    argv = [args.program, str(steps)] + list(options)
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "%s: exit %d: %s" % (name, p.returncode, p.stderr))
    db = os.path.join(work, name + ".tdb")
    c = subprocess.run([args.tracedb, "compact", trace, "-o", db, "--finish", "-q"],
                       capture_output=True, text=True, timeout=120)
    check(c.returncode == 0, "%s: compact: %s" % (name, c.stderr))
    steps = set(int(r["step"]) for r in query(args, db, "SELECT step FROM events "
                                                        "WHERE name = 'work'"))
    return p.stdout, db, steps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracedb", required=True)
    ap.add_argument("--program", required=True)
    ap.add_argument("--tmp", default=tempfile.gettempdir())
    args = ap.parse_args()
    os.makedirs(args.tmp, exist_ok=True)
    work = tempfile.mkdtemp(prefix="flight-", dir=args.tmp)
    try:
        out, db, steps = run(args, work, "flight", "300ms", options=("usr1", "longcompute"),
                             hang_timeout="500ms")
        check("manual 0\n" in out, "the manual trigger was refused: " + out)
        check("storm accepted 0\n" in out, "a storm trigger was accepted: " + out)
        for s in (299, 300, 999, 1000):
            check(s in steps, "flight: step %d not written" % s)
        for lo, hi in ((0, 50), (501, 741), (1250, 1300)):
            bad = sorted(s for s in steps if lo <= s < hi)
            check(not bad, "flight: steps %s written, far from any trigger" % bad[:10])
        check(len(steps) < 1300 // 2, "flight: %d steps written of 1300" % len(steps))
        trig = query(args, db, "SELECT reason FROM triggers ORDER BY ts")
        check([t["reason"] for t in trig] == ["manual", "SIGUSR1"], "triggers %s" % trig)

        out, db, steps = run(args, work, "stuck", "300ms", steps=600, options=("stuckcomm", "nomanual"),
                             hang_timeout="500ms")
        trig = query(args, db, "SELECT reason FROM triggers ORDER BY ts")
        check([t["reason"] for t in trig] == ["hang"], "stuck comm: triggers %s" % trig)
        check(399 in steps and 400 in steps, "stuck comm: steps 399, 400 not written")
        # The ring holds at most 300 ms (150 steps) before the trigger; its detail window ends
        # before the stuck call returns (0.5 s + 0.3 s < 1.2 s).
        far = sorted(s for s in steps if s < 200 or s > 500)
        check(not far, "stuck comm: steps far from the hang written: %s" % far[:10])

        out, db, steps = run(args, work, "plain", None)
        check(steps == set(range(1300)), "plain: %d steps written of 1300" % len(steps))
        trig = query(args, db, "SELECT reason FROM triggers ORDER BY ts")
        # Outside flight mode a trigger is only recorded (SIGUSR1 keeps its default action, so
        # the program does not raise it there).
        check([t["reason"] for t in trig] == ["manual"], "plain triggers %s" % trig)
    finally:
        clean_up(work)
    return verdict(work)


if __name__ == "__main__":
    sys.exit(main())
