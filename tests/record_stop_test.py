#!/usr/bin/env python3
"""`tracedb record` stopped by a signal sent to it alone (issue 23 item 1, docs/hang.md).

A scheduler or a user may signal the `tracedb record` process only, not its process group. For
SIGINT, SIGHUP and SIGTERM: `tracedb record --nproc 2 -- flight_program 100000` (2 local ranks
that record steps of 2 ms, for minutes) is signalled once both ranks have flushed events;
record must forward the signal to the ranks, wait for them, compact, and say so. Checked: its
exit code is 128 + the signal (the ranks died of it); stderr names the signal; the database
holds both ranks' `work` spans; each rank has at most one span still open, written open; no
segment directory is left behind. And a second signal, a second after the first, to a job that
ignores the first (`trap '' TERM` in a shell), kills it at once.
Exit 0 passed, 1 failed.
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

from harness import check, clean_up, query, verdict


def flushed_ranks(seg_dir):
    n = 0
    for r in ("rank-0", "rank-1"):
        d = os.path.join(seg_dir, r)
        if os.path.isdir(d) and sum(os.path.getsize(os.path.join(d, f))
                                    for f in os.listdir(d)) > 4096:
            n += 1
    return n


def stop_with(args, work, sig):
    name = signal.Signals(sig).name
    db = os.path.join(work, name + ".tdb")
    seg = os.path.join(work, name + ".segments")
    env = dict(os.environ, TRACEDB_FLUSH_MS="100")
    p = subprocess.Popen([args.tracedb, "record", "--force", "--nproc", "2", "-o", db, "--",
                          args.program, "100000", "nomanual"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)  # so that only record gets the signal
    deadline = time.time() + 30
    while flushed_ranks(seg) < 2 and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
    check(flushed_ranks(seg) == 2, "%s: the ranks never flushed" % name)
    os.kill(p.pid, sig)
    err = p.communicate(timeout=60)[1]
    check(p.returncode == 128 + sig, "%s: exit code %d, want %d" %
          (name, p.returncode, 128 + sig))
    check(("got " + name) in err and "compacting what it flushed" in err,
          "%s: stderr does not say so:\n%s" % (name, err))
    if not check(os.path.exists(db), "%s: no database:\n%s" % (name, err)):
        return
    check(not os.path.exists(seg), "%s: segments left behind" % name)
    rows = query(args, db, "SELECT rank, count(*) AS n, sum(open) AS o FROM events "
                           "WHERE name IN ('work', 'allreduce') GROUP BY rank ORDER BY rank")
    check([r["rank"] for r in rows] == ["0", "1"], "%s: ranks %s" % (name, rows))
    for r in rows:
        check(int(r["n"]) > 10 and int(r["o"]) <= 1, "%s: rank %s rows %s" % (name, r["rank"], r))


def second_signal_kills(args, work):
    db = os.path.join(work, "stubborn.tdb")
    p = subprocess.Popen([args.tracedb, "record", "--force", "--grace", "60", "-o", db, "--",
                          "sh", "-c", "trap '' TERM; sleep 30"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    time.sleep(0.5)
    os.kill(p.pid, signal.SIGTERM)
    time.sleep(1.2)
    t0 = time.time()
    os.kill(p.pid, signal.SIGTERM)
    err = p.communicate(timeout=60)[1]
    # Killed at the second signal, not after the 60 s grace nor the 30 s sleep.
    check(time.time() - t0 < 20, "the second SIGTERM did not kill the job at once")
    check("again: killing the job" in err, "no word of the second signal:\n" + err)
    # The exit code is the job's: it died of SIGKILL.
    check(p.returncode == 128 + signal.SIGKILL, "stubborn: exit code %d" % p.returncode)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracedb", required=True)
    ap.add_argument("--program", required=True)
    ap.add_argument("--tmp", default=tempfile.gettempdir())
    args = ap.parse_args()
    os.makedirs(args.tmp, exist_ok=True)
    work = tempfile.mkdtemp(prefix="record-stop-", dir=args.tmp)
    try:
        for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
            stop_with(args, work, sig)
        second_signal_kills(args, work)
    finally:
        clean_up(work)
    return verdict(work)


if __name__ == "__main__":
    sys.exit(main())
