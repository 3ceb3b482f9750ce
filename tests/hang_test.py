#!/usr/bin/env python3
"""Hang forensics end to end (issue 23, docs/hang.md), with real mpirun and 4 ranks.

tests/mpi/hang_program.c hangs at a known step: rank 2 blocks in MPI_Recv from rank 3 inside its
`fetch_batch` span, the others in that step's MPI_Allreduce. Run as a user would,
`timeout -s TERM N tracedb record -o job.tdb -- mpirun ...`:
  - while it hangs, `report hang` on the job's segment directory (a running job) names rank 2;
  - after timeout's SIGTERM, tracedb record forwards it, compacts, and job.tdb exists;
  - the spans open when the job stopped are rows with open = 1, exactly those each rank wrote it
    was about to block in (DIR/expect-RANK.txt, the known answer), innermost first;
  - `report hang -f json` names rank 2 alone as culprit, blocked in MPI_Recv from rank 3 inside
    fetch_batch, and ranks 0, 1, 3 blocked in MPI_Allreduce with one comm and seq, the seq after
    the one of their last finished MPI_Allreduce.
Then the same hang at step 400 in flight-recorder mode (`--flight 300ms --hang-timeout 1s`):
nothing is written until the watchdog fires, then the ring is, before any signal (checked live
with `report hang` on the segments); after SIGTERM the database names rank 2 again, has one
`hang` trigger per rank, and holds no step far from the hang.
Then a crash (rank 1 raises SIGSEGV inside `compute` at a known step): its last events are kept,
`compute` as an open row, and as many finished steps as the program did.
Exit 0 passed, 1 failed.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from harness import check, clean_up, query, verdict

HANG_STEP = 30
CRASH_STEP = 20


def mpirun(args, mode, step, out_dir):
    cmd = [args.mpirun, "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    # Flush every 200 ms, so that a running job's segments hold its blocked calls soon.
    cmd += ["-np", "4", "-x", "TRACEDB_FLUSH_MS=200", args.program, mode, str(step), out_dir]
    return cmd


def expectations(out_dir):
    """rank -> (state, call, peer, step, spans innermost first, allreduces finished)."""
    exp = {}
    for rank in range(4):
        path = os.path.join(out_dir, "expect-%d.txt" % rank)
        if not os.path.exists(path):
            continue
        lines = open(path).read().split("\n")
        f = lines[0].split()
        exp[rank] = (f[0], f[1], int(f[2]), int(f[3]), f[4:], int(lines[1].split()[1]))
    return exp


def hang_report(args, path):
    out = subprocess.run([args.tracedb, "report", "hang", "-f", "json", path],
                         capture_output=True, text=True, timeout=120)
    if not check(out.returncode == 0, "report hang %s: %s" % (path, out.stderr)):
        return None
    try:
        return json.loads(out.stdout)
    except ValueError as e:
        check(False, "report hang %s: not JSON (%s): %s" % (path, e, out.stdout[:500]))
        return None


def check_report(rep, exp, where):
    if rep is None:
        return
    ranks = {r["rank"]: r for r in rep["ranks"]}
    check(sorted(ranks) == [0, 1, 2, 3], "%s: ranks %s" % (where, sorted(ranks)))
    check([c["rank"] for c in rep["culprits"]] == [2],
          "%s: culprits %s, want rank 2 alone" % (where, rep["culprits"]))
    seqs = set()
    for rank, (state, call, peer, step, spans, _) in exp.items():
        r = ranks.get(rank)
        if not check(r is not None, "%s: rank %d missing" % (where, rank)):
            continue
        check(r["blocked_in"] == call, "%s: rank %d blocked_in %s, want %s" %
              (where, rank, r["blocked_in"], call))
        names = [s["name"] for s in r["open_spans"]]
        check(names == spans, "%s: rank %d open spans %s, want %s" % (where, rank, names, spans))
        if peer >= 0:
            check(r["peer"] == peer, "%s: rank %d peer %s, want %d" % (where, rank, r["peer"], peer))
        if call == "MPI_Allreduce":
            check(r["comm"] is not None and r["seq"] is not None,
                  "%s: rank %d: no comm/seq" % (where, rank))
            seqs.add((r["comm"], r["seq"]))
    check(len(seqs) == 1, "%s: the blocked MPI_Allreduce ranks disagree on comm/seq: %s" %
          (where, seqs))
    return seqs


def test_hang(args, work):
    out_dir = os.path.join(work, "hang")
    os.makedirs(out_dir)
    db = os.path.join(work, "job.tdb")
    seg_dir = os.path.join(work, "job.segments")
    limit = 7  # seconds: timeout's SIGTERM; the hang is seen (and checked live) well before
    cmd = ["timeout", "-s", "TERM", str(limit), args.tracedb, "record", "--force", "-o", db,
           "--"] + mpirun(args, "hang", HANG_STEP, out_dir)
    err_path = os.path.join(work, "record.err")
    t0 = time.time()
    with open(err_path, "w") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        blocked = False
        for line in p.stdout:
            if line.startswith("hang: rank 2 blocks"):
                blocked = True
                break
        check(blocked, "rank 2 never said it blocks")
        # Every rank has written its known answer and is blocked; the 200 ms flushes have
        # written the calls' begin events. Then ask about the running job.
        deadline = time.time() + 5
        while len(expectations(out_dir)) < 4 and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        exp = expectations(out_dir)
        check(len(exp) == 4, "expectations of %d ranks" % len(exp))
        if p.poll() is None:
            live = hang_report(args, seg_dir)
            check_report(live, exp, "live segments")
        else:
            check(False, "the job ended before timeout (%s s)" % (time.time() - t0))
        rest = p.stdout.read()
        rc = p.wait()
    err_text = open(err_path).read()
    check(rc == 124, "timeout's exit code %d, want 124 (it sent SIGTERM)" % rc)
    check("got SIGTERM" in err_text, "record did not say it got SIGTERM:\n" + err_text)
    if not check(os.path.exists(db), "no %s after SIGTERM:\n%s" % (db, err_text)):
        return
    check(not os.path.exists(seg_dir), "segments left behind")

    # The open rows: exactly the spans each rank said it was in, innermost (deepest) first.
    rows = query(args, db, "SELECT rank, name, depth, dur FROM events WHERE open = 1 "
                           "ORDER BY rank, depth DESC")
    got = {}
    for r in rows:
        got.setdefault(int(r["rank"]), []).append(r["name"])
        check(int(r["dur"]) > 0, "open row with no duration: %s" % r)
    want = {rank: e[4] for rank, e in exp.items()}
    check(got == want, "open rows %s, want %s" % (got, want))
    # Steps before the hang are all there: every rank finished HANG_STEP allreduces.
    for r in query(args, db, "SELECT rank, count(*) AS n FROM events WHERE name = "
                             "'MPI_Allreduce' AND open = 0 GROUP BY rank"):
        check(int(r["n"]) == exp[int(r["rank"])][5],
              "rank %s finished %s MPI_Allreduce, the program says %d" %
              (r["rank"], r["n"], exp[int(r["rank"])][5]))
    rep = hang_report(args, db)
    seqs = check_report(rep, exp, "database")
    if seqs and len(seqs) == 1:
        comm, seq = next(iter(seqs))
        last = query(args, db, "SELECT max(seq) AS s FROM events WHERE name = 'MPI_Allreduce' "
                               "AND open = 0 AND rank = 0 AND comm = %d" % comm)
        check(last and int(last[0]["s"]) + 1 == seq,
              "blocked seq %d is not the one after the last finished (%s)" % (seq, last))
    text = subprocess.run([args.tracedb, "report", "hang", db], capture_output=True, text=True,
                          timeout=60).stdout
    check("rank 2: not in MPI_Allreduce" in text and "MPI_Recv from rank 3" in text and
          "inside fetch_batch" in text, "text report:\n" + text)


def test_flight_hang(args, work):
    out_dir = os.path.join(work, "flight")
    os.makedirs(out_dir)
    db = os.path.join(work, "flight.tdb")
    seg_dir = os.path.join(work, "flight.segments")
    step = 400
    # The slow-step trigger is off (--slow-step 0): a 2 ms step stretched by a loaded machine
    # would write steps far from the hang; it is tested in slow_step_test.py.
    cmd = ["timeout", "-s", "TERM", "8", args.tracedb, "record", "--force", "--flight", "300ms",
           "--hang-timeout", "1s", "--slow-step", "0", "-o", db, "--"] + mpirun(args, "hang", step,
                                                                              out_dir)
    err_path = os.path.join(work, "flight.err")
    with open(err_path, "w") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        for line in p.stdout:
            if line.startswith("hang: rank 2 blocks"):
                break
        # The watchdog fires 1 s (plus a flush interval) after the calls block, and writes the
        # ring: until then the segments hold no event. Polled on the running job.
        live = None
        deadline = time.time() + 5
        while time.time() < deadline and p.poll() is None:
            time.sleep(0.5)
            out = subprocess.run([args.tracedb, "report", "hang", "-f", "json", seg_dir],
                                 capture_output=True, text=True, timeout=60)
            if out.returncode == 0:
                rep = json.loads(out.stdout)
                if [c["rank"] for c in rep["culprits"]] == [2]:
                    live = rep
                    break
        check(live is not None and p.poll() is None,
              "flight: the watchdog's ring did not name rank 2 before the job was stopped")
        p.stdout.read()
        rc = p.wait()
    check(rc == 124, "flight: timeout's exit code %d, want 124" % rc)
    if not check(os.path.exists(db), "flight: no database:\n" + open(err_path).read()):
        return
    exp = expectations(out_dir)
    check_report(hang_report(args, db), exp, "flight database")
    trig = query(args, db, "SELECT rank, reason FROM triggers ORDER BY rank")
    check([(int(t["rank"]), t["reason"]) for t in trig] == [(r, "hang") for r in range(4)],
          "flight: triggers %s, want one hang per rank" % trig)
    rows = query(args, db, "SELECT rank, min(step) AS lo, max(step) AS hi FROM events "
                           "WHERE name = 'fetch_batch' GROUP BY rank ORDER BY rank")
    for r in rows:
        # The ring holds at most 300 ms before the trigger: 150 steps of 2 ms, plus a flush.
        check(int(r["lo"]) > 100 and int(r["hi"]) == step,
              "flight: rank %s fetch_batch steps %s-%s, want only the last ones up to %d" %
              (r["rank"], r["lo"], r["hi"], step))
    check(len(rows) == 4, "flight: fetch_batch of %d ranks" % len(rows))


def test_crash(args, work):
    out_dir = os.path.join(work, "crash")
    os.makedirs(out_dir)
    db = os.path.join(work, "crash.tdb")
    cmd = ["timeout", "-s", "TERM", "60", args.tracedb, "record", "--force", "-o", db,
           "--"] + mpirun(args, "crash", CRASH_STEP, out_dir)
    p = subprocess.run(cmd, capture_output=True, text=True)
    check(p.returncode != 0 and p.returncode != 124, "crash run exit code %d" % p.returncode)
    if not check(os.path.exists(db), "no database after the crash:\n" + p.stderr):
        return
    exp = expectations(out_dir)
    if not check(1 in exp, "rank 1 did not write its known answer"):
        return
    state, _, _, step, spans, allreduces = exp[1]
    # Its last events: every step's fetch_batch up to the crash, and `compute` left open.
    rows = query(args, db, "SELECT name, count(*) AS n, sum(open) AS o FROM events "
                           "WHERE rank = 1 AND cat = 'user' GROUP BY name ORDER BY name")
    got = {r["name"]: (int(r["n"]), int(r["o"])) for r in rows}
    check(got.get("fetch_batch") == (step + 1, 0), "rank 1 fetch_batch %s, want %d closed" %
          (got.get("fetch_batch"), step + 1))
    check(got.get("compute") == (step + 1, 1), "rank 1 compute %s, want %d with 1 open" %
          (got.get("compute"), step + 1))
    n = query(args, db, "SELECT count(*) AS n FROM events WHERE rank = 1 AND "
                        "name = 'MPI_Allreduce' AND open = 0")
    check(n and int(n[0]["n"]) == allreduces, "rank 1 allreduces %s, want %d" % (n, allreduces))


def test_flight_crash(args, work):
    """Flight mode: rank 1 dies of SIGSEGV at step 800; its crash handler writes the ring, so
    the database holds its last steps, the `compute` it died in open, and nothing of the early
    steps. The ring keeps the blocks drained in the last 300 ms, and a block holds what was
    recorded since the drain before it (200 ms flushes, longer when a loaded machine starves the
    flusher): a reach of 600 steps (1.2 s at 2 ms a step at least) is allowed, not the whole
    run."""
    out_dir = os.path.join(work, "flight_crash")
    os.makedirs(out_dir)
    db = os.path.join(work, "flight_crash.tdb")
    step = 800
    cmd = ["timeout", "-s", "TERM", "60", args.tracedb, "record", "--force", "--flight", "300ms",
           "--slow-step", "0", "-o", db, "--"] + mpirun(args, "crash", step, out_dir)
    p = subprocess.run(cmd, capture_output=True, text=True)
    check(p.returncode != 0 and p.returncode != 124, "flight crash run exit code %d" % p.returncode)
    if not check(os.path.exists(db), "no database after the crash in flight mode:\n" + p.stderr):
        return
    exp = expectations(out_dir)
    if not check(1 in exp and exp[1][3] == step, "rank 1 did not write its known answer"):
        return
    rows = query(args, db, "SELECT name, step, open FROM events WHERE rank = 1 AND cat = 'user' "
                           "ORDER BY ts DESC LIMIT 2")
    got = [(r["name"], int(r["step"]), int(r["open"])) for r in rows]
    check(got == [("compute", step, 1), ("fetch_batch", step, 0)],
          "flight crash: rank 1's last rows %s, want compute open and fetch_batch of step %d" %
          (got, step))
    early = query(args, db, "SELECT count(*) AS n, min(step) AS s FROM events WHERE rank = 1 "
                            "AND cat = 'user'")
    check(early and int(early[0]["s"]) > step - 600,
          "flight crash: rank 1's rows go back to step %s of %d: the ring kept more than 1.2 s" %
          (early[0]["s"] if early else None, step))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracedb", required=True)
    ap.add_argument("--program", required=True)
    ap.add_argument("--mpirun", required=True)
    ap.add_argument("--tmp", default=tempfile.gettempdir())
    args = ap.parse_args()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file from the crash
    os.makedirs(args.tmp, exist_ok=True)
    work = tempfile.mkdtemp(prefix="hang-", dir=args.tmp)
    try:
        test_hang(args, work)
        test_flight_hang(args, work)
        test_crash(args, work)
        test_flight_crash(args, work)
    finally:
        clean_up(work)
    return verdict(work)


if __name__ == "__main__":
    sys.exit(main())
