#!/usr/bin/env python3
"""PyTorch DDP over gloo (4 CPU ranks, tests/torch_job.py) recorded with no code change by
`tracedb record --nproc 4`, with known answers put in (issues 22 and 23, item 6 of each).

  torch_test.py why   the why analyses (docs/why.md): delays injected at known (step, rank,
                      phase) are each the top root cause of their step, named with the rank and
                      the phase, costing the delay x 3 waiting ranks (+-50%), in `root_causes`
                      and in `tracedb explain -f json`; the waits are wait_at_nxn in that step's
                      gloo:all_reduce (DDP's gradient bucket), waiting for the injected rank; the
                      same job without delays reports no cause above the noise bar below.
  torch_test.py hang  the hang forensics (docs/hang.md): at a known step rank 2 blocks in
                      dist.recv from rank 3 inside `fetch_batch`, the others in the step's bucket
                      allreduce inside `backward`. The job is stopped by SIGTERM to `tracedb
                      record` (as timeout and batch schedulers do); `report hang -f json` names
                      rank 2 alone as culprit, ranks 0, 1, 3 blocked in gloo:all_reduce with one
                      comm and the seq after the last finished one, rank 2 blocked in gloo:recv
                      from 3, and each rank's open spans as it wrote them before blocking. Then
                      the same in flight-recorder mode (--flight 300ms --hang-timeout 1s): the
                      watchdog's ring names rank 2 on the running job's segments before any
                      signal, and after SIGTERM the database does too, with one `hang` trigger per
                      rank and only the steps near the hang.

The noise bar (why, run without delays): at most 2 reported causes per step on average, and
none costing a third or more of the smallest injected cause measured in the run with delays (no
absolute time bound: the ranks share two cores with other work). As in tests/mpi/why_mpi_test.cc,
a run where the machine's own stall outranks an injection is recorded again, once.

Exit 0 passed, 1 failed, 77 skipped (torch.distributed, or the tracedb PyTorch capture, absent).
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from harness import check, clean_up, hang_report, query, verdict

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "torch_job.py")
RANKS = 4
WORLD = 0x40000000  # the PyTorch capture's default group (docs/python.md)

# (step, rank, phase, ms): each delays that step's bucket allreduce on the 3 other ranks.
DELAYS = [(5, 1, "forward", 80), (10, 3, "backward", 80), (15, 2, "load_batch", 80)]
STEPS = 20
HANG_STEP = 6
FLIGHT_HANG_STEP = 400


def env_for_record():
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # `tracedb record` finds the package by itself
    for k in ("TRACEDB_DIR", "TRACEDB_FLIGHT", "TRACEDB_HANG_TIMEOUT"):
        env.pop(k, None)
    env["TRACEDB_FLUSH_MS"] = "200"  # a running job's segments soon hold its blocked calls
    return env


def skip_reason(args):
    """Why this machine cannot run the test ("" when it can)."""
    p = subprocess.run([args.python, "-c", "import torch.distributed as d; "
                        "assert d.is_available()"], capture_output=True, text=True)
    if p.returncode != 0:
        return "torch.distributed is not importable by %s" % args.python
    pkg = os.path.join(os.path.dirname(os.path.abspath(args.tracedb)), "python", "tracedb")
    if not os.path.isdir(pkg) or not any(n.startswith("_tracedb_torch") for n in os.listdir(pkg)):
        return ("the PyTorch capture (_tracedb_torch) is not built in %s (it needs libtorch-dev; "
                "build the tracedb_python target)" % pkg)
    return ""


# ---- why ----

def record_why(args, work, name, delays):
    db = os.path.join(work, name + ".tdb")
    cmd = ([args.tracedb, "record", "--force", "-o", db, "--nproc", str(RANKS), "--",
            args.python, JOB, "why", str(STEPS)] +
           ["%d:%d:%s:%d" % d for d in delays])
    p = subprocess.run(cmd, env=env_for_record(), capture_output=True, text=True, timeout=300,
                       cwd=work)
    check(p.returncode == 0, "%s failed (%d):\n%s\n%s" % (" ".join(cmd), p.returncode, p.stdout,
                                                          p.stderr))
    return db


def top_causes(args, db):
    """step -> (rank, name, cost_ns) of its top root cause."""
    rows = query(args, db, "SELECT step, rank, name, max(cost_ns) AS cost FROM root_causes "
                           "GROUP BY step")
    return {int(r["step"]): (int(r["rank"]), r["name"], int(r["cost"])) for r in rows}


def injected_misses(args, db):
    top = top_causes(args, db)
    misses = []
    for step, rank, phase, ms in DELAYS:
        want = ms * 1e6 * (RANKS - 1)
        got = top.get(step)
        if got is None:
            misses.append("step %d: no cause" % step)
        elif got[0] != rank or got[1] != phase or not 0.5 * want <= got[2] <= 1.5 * want:
            misses.append("step %d: top cause rank %d %s cost %.1f ms, want rank %d %s "
                          "%.0f ms +-50%%" % (step, got[0], got[1], got[2] / 1e6, rank, phase,
                                              want / 1e6))
    return misses


def quiet_misses(args, quiet, delayed):
    top = top_causes(args, delayed)
    injected = [top[s][2] for s, _, _, _ in DELAYS if s in top]
    if len(injected) != len(DELAYS):
        return ["the run with delays lacks causes"]
    bar = min(injected) / 3
    rows = query(args, quiet, "SELECT step, rank, name, cost_ns FROM root_causes")
    misses = []
    if len(rows) > 2 * STEPS:
        misses.append("%d causes reported in %d steps" % (len(rows), STEPS))
    for r in rows:
        if int(r["cost_ns"]) >= bar:
            misses.append("step %s rank %s %s cost %.1f ms, over the bar %.1f ms" %
                          (r["step"], r["rank"], r["name"], int(r["cost_ns"]) / 1e6, bar / 1e6))
    return misses


def test_why(args, work):
    delayed = record_why(args, work, "delayed", DELAYS)
    misses = injected_misses(args, delayed)
    if misses:
        print("torch_test: recording again after a noisy run (%s)" % "; ".join(misses), flush=True)
        delayed = record_why(args, work, "delayed2", DELAYS)
        misses = injected_misses(args, delayed)
    for m in misses:
        check(False, m)

    # The capture's collectives are the synchronisations: each injection made the 3 others wait
    # at N x N in that step's gloo:all_reduce (DDP's bucket), for the injected rank.
    for step, rank, phase, ms in DELAYS:
        rows = query(args, delayed,
                     "SELECT rank, wait_ns FROM wait_states WHERE step = %d AND "
                     "pattern = 'wait_at_nxn' AND call = 'gloo:all_reduce' AND waited_for = %d "
                     "AND wait_ns > %d ORDER BY rank" % (step, rank, ms * 1e6 / 2))
        check(sorted(int(r["rank"]) for r in rows) == [r for r in range(RANKS) if r != rank],
              "step %d: wait_at_nxn waits for rank %d: %s" % (step, rank, rows))
        # Independent of the analysis: the injected rank entered the bucket allreduce about the
        # delay after the median of the others (plain SQL over events).
        ts = {int(r["rank"]): int(r["ts"]) for r in query(
            args, delayed, "SELECT rank, min(ts) AS ts FROM events WHERE step = %d AND "
                           "name = 'gloo:all_reduce' GROUP BY rank" % step)}
        others = sorted(t for r, t in ts.items() if r != rank)
        if check(len(ts) == RANKS and len(others) == 3, "step %d: allreduce of %s" % (step, ts)):
            check(ts[rank] - others[1] > ms * 1e6 / 2,
                  "step %d: rank %d entered the allreduce %.1f ms after the median" %
                  (step, rank, (ts[rank] - others[1]) / 1e6))

    # `tracedb explain -f json` says the same (its own reading of the analysis).
    for step, rank, phase, ms in DELAYS:
        p = subprocess.run([args.tracedb, "explain", delayed, "--steps", "%d:%d" % (step, step),
                            "-n", "1", "-f", "json"], capture_output=True, text=True, timeout=120)
        if not check(p.returncode == 0, "explain: %s" % p.stderr):
            continue
        doc = json.loads(p.stdout)
        causes = doc["causes"]
        if check(causes, "explain step %d: no cause: %s" % (step, p.stdout[:400])):
            c = causes[0]
            want = ms * 1e6 * (RANKS - 1)
            check((c["step"], c["rank"], c["name"], c["call"]) ==
                  (step, rank, phase, "gloo:all_reduce") and
                  c["waiting_ranks"] == [r for r in range(RANKS) if r != rank] and
                  0.5 * want <= c["cost_ns"] <= 1.5 * want,
                  "explain step %d: top cause %s, want rank %d %s" % (step, c, rank, phase))
    text = subprocess.run([args.tracedb, "explain", delayed], capture_output=True, text=True,
                          timeout=120).stdout
    check("step 10: rank 3 spent " in text and "more in backward than the median rank; ranks "
          "0, 1, 2 waited " in text and "in gloo:all_reduce for it" in text,
          "explain's words:\n" + text)

    quiet = record_why(args, work, "quiet", [])
    misses = quiet_misses(args, quiet, delayed)
    if misses:
        print("torch_test: recording again after a noisy run (%s)" % "; ".join(misses[:3]),
              flush=True)
        quiet = record_why(args, work, "quiet2", [])
        misses = quiet_misses(args, quiet, delayed)
    for m in misses:
        check(False, "run without delays: " + m)


# ---- hang ----

def expectations(out_dir):
    """rank -> (call, peer, step, open spans innermost first), as each rank wrote them."""
    exp = {}
    for rank in range(RANKS):
        path = os.path.join(out_dir, "expect-%d.txt" % rank)
        if os.path.exists(path):
            lines = open(path).read().split("\n")
            f = lines[0].split()
            exp[rank] = (f[0], int(f[1]), int(f[2]), lines[1].split())
    return exp


def report_misses(rep, exp):
    """What is wrong with a hang report against the known answer ([] when nothing)."""
    if rep is None:
        return ["no report"]
    misses = []
    ranks = {r["rank"]: r for r in rep["ranks"]}
    if [c["rank"] for c in rep["culprits"]] != [2]:
        misses.append("culprits %s, want rank 2 alone" % rep["culprits"])
    if sorted(exp) != list(range(RANKS)):
        misses.append("known answers of ranks %s" % sorted(exp))
    seqs = set()
    for rank, (call, peer, step, spans) in sorted(exp.items()):
        r = ranks.get(rank)
        if r is None:
            misses.append("rank %d missing" % rank)
            continue
        if r["blocked_in"] != call:
            misses.append("rank %d blocked_in %s, want %s" % (rank, r["blocked_in"], call))
        names = [s["name"] for s in r["open_spans"]]
        if names != spans:
            misses.append("rank %d open spans %s, want %s" % (rank, names, spans))
        if peer >= 0 and r["peer"] != peer:
            misses.append("rank %d peer %s, want %d" % (rank, r["peer"], peer))
        if call == "gloo:all_reduce":
            seqs.add((r["comm"], r["seq"]))
    if len(seqs) != 1 or next(iter(seqs))[0] != WORLD or next(iter(seqs))[1] is None:
        misses.append("the blocked gloo:all_reduce: comm/seq %s, want one on comm %d" %
                      (seqs, WORLD))
    return misses


def run_hang(args, work, name, step, extra):
    """Records the job hanging at `step`; SIGTERM once `ready(p, seg_dir)` says so. Returns
    (db, exit code, stderr of record, known answers, what `ready` returned)."""
    out_dir = os.path.join(work, name)
    os.makedirs(out_dir)
    db = os.path.join(work, name + ".tdb")
    seg_dir = os.path.join(work, name + ".segments")
    cmd = ([args.tracedb, "record", "--force"] + extra +
           ["-o", db, "--nproc", str(RANKS), "--", args.python, JOB, "hang", str(step), out_dir])
    err_path = os.path.join(work, name + ".err")
    live = None
    with open(err_path, "w") as err:
        p = subprocess.Popen(cmd, env=env_for_record(), stdout=subprocess.PIPE, stderr=err,
                             text=True, cwd=work)
        try:
            blocked = False
            for line in p.stdout:
                if line.startswith("hang: rank 2 blocks"):
                    blocked = True
                    break
            check(blocked, "%s: rank 2 never said it blocks" % name)
            deadline = time.time() + 30
            while len(expectations(out_dir)) < RANKS and time.time() < deadline:
                time.sleep(0.05)
            exp = expectations(out_dir)
            # Poll the running job's segments until the report names the culprit (the flushes,
            # every 200 ms, or the watchdog's ring have written the calls' begins), or give up.
            deadline = time.time() + 8
            while blocked and time.time() < deadline and p.poll() is None:
                time.sleep(0.5)
                rep, _ = hang_report(args, seg_dir)
                if rep is not None and not report_misses(rep, exp):
                    live = rep
                    break
            running = p.poll() is None
            check(running, "%s: the job ended before it was stopped" % name)
            p.send_signal(signal.SIGTERM)  # as `timeout` or a batch scheduler stops a job
            rc = p.wait(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    return db, rc, open(err_path).read(), expectations(out_dir), live


def check_hang_db(args, name, db, rc, err, exp, step):
    check(rc == 128 + signal.SIGTERM, "%s: record's exit code %d, want %d (the ranks died of "
          "SIGTERM)\n%s" % (name, rc, 128 + signal.SIGTERM, err))
    check("got SIGTERM" in err, "%s: record did not say it got SIGTERM:\n%s" % (name, err))
    if not check(os.path.exists(db), "%s: no database after SIGTERM:\n%s" % (name, err)):
        return None
    check(exp.get(2, (None, None, None))[2] == step and
          all(e[2] == step for e in exp.values()),
          "%s: the ranks blocked at steps %s, want %d" % (name, exp, step))
    rep, why = hang_report(args, db)
    check(rep is not None, "%s: report hang: %s" % (name, why))
    for m in report_misses(rep, exp):
        check(False, "%s database: %s" % (name, m))
    # The blocked allreduce is the one after the last each rank finished (plain SQL), and the
    # open rows are exactly the spans each rank said it would block in.
    if rep is not None:
        blocked = {r["rank"]: r for r in rep["ranks"]}
        for rank in (0, 1, 3):
            last = query(args, db, "SELECT max(seq) AS s FROM events WHERE name = "
                                   "'gloo:all_reduce' AND open = 0 AND rank = %d AND comm = %d" %
                                   (rank, WORLD))
            got = blocked.get(rank, {}).get("seq")
            check(last and last[0]["s"] != "" and got == int(last[0]["s"]) + 1,
                  "%s: rank %d blocked in seq %s, its last finished allreduce was %s" %
                  (name, rank, got, last))
    rows = query(args, db, "SELECT rank, name, cat FROM events WHERE open = 1 "
                           "ORDER BY rank, ts DESC")
    got = {}
    for r in rows:
        got.setdefault(int(r["rank"]), []).append(r["name"])
    check(got == {rank: e[3] for rank, e in exp.items()},
          "%s: open rows %s, want %s" % (name, got, {rank: e[3] for rank, e in exp.items()}))
    return rep


def test_hang(args, work):
    db, rc, err, exp, live = run_hang(args, work, "hang", HANG_STEP, [])
    check(live is not None, "hang: the running job's segments never named rank 2 as culprit")
    check_hang_db(args, "hang", db, rc, err, exp, HANG_STEP)
    # Every step before the hang finished its bucket allreduce on every rank.
    rows = query(args, db, "SELECT rank, count(DISTINCT step) AS n FROM events WHERE "
                           "name = 'gloo:all_reduce' AND open = 0 AND step IS NOT NULL "
                           "GROUP BY rank ORDER BY rank")
    check([(int(r["rank"]), int(r["n"])) for r in rows] ==
          [(r, HANG_STEP) for r in range(RANKS)], "hang: finished steps %s" % rows)
    text = subprocess.run([args.tracedb, "report", "hang", db], capture_output=True, text=True,
                          timeout=60).stdout
    check("rank 2: not in gloo:all_reduce" in text and "gloo:recv from rank 3" in text and
          "inside fetch_batch" in text and "(a deadlock)" in text, "hang text report:\n" + text)

    # Flight-recorder mode: nothing is written until the watchdog fires (1 s after the calls
    # block); its ring names rank 2 on the running job's segments before any signal. The
    # slow-step trigger is off (--slow-step 0), as in hang_test.py: on a loaded machine a step
    # stretched past twice the median wrote the rings early, with a slow_step trigger per rank
    # and the open spans of that step (seen once, load average 4); slow_step_test.py tests it.
    db, rc, err, exp, live = run_hang(args, work, "flight", FLIGHT_HANG_STEP,
                                      ["--flight", "300ms", "--hang-timeout", "1s",
                                       "--slow-step", "0"])
    check(live is not None, "flight: the watchdog's ring did not name rank 2 before SIGTERM")
    check_hang_db(args, "flight", db, rc, err, exp, FLIGHT_HANG_STEP)
    trig = query(args, db, "SELECT rank, reason FROM triggers ORDER BY rank")
    check([(int(t["rank"]), t["reason"]) for t in trig] == [(r, "hang") for r in range(RANKS)],
          "flight: triggers %s, want one hang per rank" % trig)
    rows = query(args, db, "SELECT rank, min(step) AS lo, max(step) AS hi FROM events "
                           "WHERE name = 'fetch_batch' GROUP BY rank ORDER BY rank")
    check(len(rows) == RANKS, "flight: fetch_batch of %d ranks" % len(rows))
    for r in rows:
        # The ring holds at most 300 ms before the trigger (steps of at least 2 ms) plus a
        # flush interval: the early steps are not written.
        check(int(r["lo"]) > 100 and int(r["hi"]) == FLIGHT_HANG_STEP,
              "flight: rank %s fetch_batch steps %s-%s, want only the last ones up to %d" %
              (r["rank"], r["lo"], r["hi"], FLIGHT_HANG_STEP))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["why", "hang"])
    ap.add_argument("--tracedb", required=True)
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="the Python with torch the tracedb package was built for")
    ap.add_argument("--tmp", default=tempfile.gettempdir())
    args = ap.parse_args()
    args.tracedb = os.path.abspath(args.tracedb)  # the jobs run in their work directory
    reason = skip_reason(args)
    if reason:
        print("torch_test: skipped: " + reason)
        return 77
    os.makedirs(args.tmp, exist_ok=True)
    work = os.path.abspath(tempfile.mkdtemp(prefix="torch-%s-" % args.what, dir=args.tmp))
    try:
        if args.what == "why":
            test_why(args, work)
        else:
            test_hang(args, work)
    finally:
        clean_up(work)
    return verdict(work)


if __name__ == "__main__":
    sys.exit(main())
