#!/usr/bin/env python3
"""Test of `tracedb top` (docs/top.md "Testing") on a growing trace directory.

Two ranks of tests/top_job_program.cc record in real time (rank 1 computes three times longer
than rank 0, so it is the straggler). While they run, `top --once` must show both ranks with
growing step counts; when they are done, its counts must equal what the programs say they
recorded, its compute/communication shares must match the programs' sleeps, the trace directory
must be untouched (top only reads it) and top's temporary database must be gone. Also: the
refresh loop when stdout is not a terminal (stopped by SIGINT, exit 0, no escape codes), q in a
real terminal (tmux, when installed), a database as input, and a missing input.
Exit 0 passed, 1 failed.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL: " + what)


def frame_rows(text):
    """rank -> dict of the per-rank table of the last frame in `text`."""
    rows = {}
    for line in text.splitlines():
        # rank steps step steptime last-step compute comm events/s dropped drops/s
        m = re.match(r"\s*(\d+)\s+(\d+)\s+(\S+)\s+(-|\S+ \S+)\s+(-|\S+ \S+)\s+([\d.]+)%\s+"
                     r"([\d.]+)%\s+([\d,]+)\s+([\d,]+)\s+(\S+)\s*$", line)
        if m:
            rows[int(m.group(1))] = {
                "steps": int(m.group(2)), "compute": float(m.group(6)) / 100,
                "comm": float(m.group(7)) / 100, "dropped": int(m.group(9).replace(",", "")),
            }
    return rows


def recorded_shares(tracedb, directory, env):
    """rank -> (compute, comm, both): the shares of each rank's spans in the trace of
    tests/top_job_program.cc, read with plain SQL from a compaction of `directory`: each step is
    "forward" then "MPI_Allreduce", back to back, and "MPI_Iallreduce" runs inside "forward", so
    the rank's time is the sum of the first two and the time in both is the third. This is what
    the programs' sleeps came to on this machine (a loaded one oversleeps), the reference top's
    shares are held to."""
    db = directory.rstrip("/") + ".reference.tdb"
    subprocess.run([tracedb, "compact", directory, "-o", db, "-q"], check=True, env=env)
    sql = ("SELECT rank, sum(CASE WHEN name = 'forward' THEN dur ELSE 0 END), "
           "sum(CASE WHEN name = 'MPI_Allreduce' THEN dur ELSE 0 END), "
           "sum(CASE WHEN name = 'MPI_Iallreduce' THEN dur ELSE 0 END) "
           "FROM events GROUP BY rank ORDER BY rank")
    out = subprocess.run([tracedb, "query", db, sql, "-f", "csv", "-q"], check=True, env=env,
                         stdout=subprocess.PIPE, text=True).stdout
    shares = {}
    for line in out.splitlines()[1:]:
        rank, fwd, ar, iar = (int(x) for x in line.split(","))
        total = fwd + ar
        shares[rank] = (fwd / total, (ar + iar) / total, iar / total)
    os.remove(db)
    return shares


def total_events(text):
    m = re.findall(r"(\d+) ranks, ([\d,]+) events", text)
    return int(m[-1][1].replace(",", "")) if m else -1


def snapshot(d):
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            st = os.stat(p)
            out[p] = (st.st_size, st.st_mtime_ns)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracedb", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--tmp", default=None)
    o = ap.parse_args()
    if o.tmp:
        os.makedirs(o.tmp, exist_ok=True)
    work = tempfile.mkdtemp(prefix="top-", dir=o.tmp)
    try:
        test(o, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if FAILURES:
        print("%d checks failed" % len(FAILURES))
        return 1
    print("top: every check passed")
    return 0


def test(o, work):
    job = os.path.join(work, "job")
    top_tmp = os.path.join(work, "toptmp")
    os.makedirs(top_tmp)
    env = dict(os.environ, TRACEDB_FLUSH_MS="100", TMPDIR=top_tmp)
    # Before the job has written anything: an empty frame, not an error.
    os.makedirs(job)
    r0 = subprocess.run([o.tracedb, "top", job, "--once"], env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True, timeout=30)
    check(r0.returncode == 0 and "0 ranks, 0 events" in r0.stdout,
          "empty directory: %s %s" % (r0.stdout, r0.stderr))
    steps = 300  # rank 1 runs about 4.5 s; the recorder anchors its clock every second
    # rank 0: 4 ms compute + 2 ms communication per step; rank 1: 12 ms + 2 ms.
    procs = [subprocess.Popen([o.job, job, str(r), str(steps), c, "2"], env=env,
                              stdout=subprocess.PIPE, text=True)
             for r, c in ((0, "4"), (1, "12"))]

    def top(*args, timeout=60):
        return subprocess.run([o.tracedb, "top"] + list(args), env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=timeout)

    time.sleep(1.5)
    r1 = top(job, "--once")
    check(r1.returncode == 0, "top --once while running: " + r1.stderr)
    rows1 = frame_rows(r1.stdout)
    time.sleep(1.6)
    r2 = top(job, "--once")
    rows2 = frame_rows(r2.stdout)
    running = [p.poll() is None for p in procs]
    print(r2.stdout)
    check(1 in rows1 and 1 in rows2, "rank 1 shown while running")
    if 1 in rows1 and 1 in rows2:
        check(0 < rows1[1]["steps"] < rows2[1]["steps"],
              "steps grow between frames (%d, %d)" % (rows1[1]["steps"], rows2[1]["steps"]))
    check(running[1], "rank 1 was still running at the second frame (the test's premise)")
    check(re.search(r"rank 1 \(step time \+\d+%", r2.stdout) is not None,
          "rank 1 is the straggler while running")
    check("\x1b" not in r1.stdout, "no escape codes with --once")

    recorded = 0
    for p in procs:
        out, _ = p.communicate(timeout=60)
        check(p.returncode == 0, "job program exit")
        m = re.search(r"events (\d+) dropped (\d+)", out)
        recorded += int(m.group(1)) if m else 0
    before = snapshot(job)
    final = top(job, "--once")
    check(final.returncode == 0, "final frame: " + final.stderr)
    print(final.stdout)
    rows = frame_rows(final.stdout)
    check(total_events(final.stdout) == recorded,
          "events %d == recorded %d" % (total_events(final.stdout), recorded))
    check(rows.get(0, {}).get("steps") == steps and rows.get(1, {}).get("steps") == steps,
          "every step seen")
    check("overlap" not in final.stdout, "no overlap said where compute and communication do not")
    check(snapshot(job) == before, "top only reads the trace directory")
    check(os.listdir(top_tmp) == [], "top's temporary database removed: %s" % os.listdir(top_tmp))
    ref = recorded_shares(o.tracedb, job, env)
    print("recorded shares (compute, comm, both) by rank:", ref)
    if 0 in rows and 1 in rows and 0 in ref and 1 in ref:
        # Shares of the window (the last 10 s: the whole job) against the spans the programs
        # recorded (sleeps of 4/2 and 12/2 ms, longer on a loaded machine); the sleeps
        # themselves only roughly (every sleep runs long on a loaded machine).
        check(abs(rows[0]["comm"] - ref[0][1]) < 0.02,
              "rank 0 comm share %.3f, recorded %.3f" % (rows[0]["comm"], ref[0][1]))
        check(abs(rows[1]["compute"] - ref[1][0]) < 0.02,
              "rank 1 compute share %.3f, recorded %.3f" % (rows[1]["compute"], ref[1][0]))
        check(abs(ref[0][1] - 2 / 6) < 0.25 and abs(ref[1][0] - 12 / 14) < 0.25,
              "the programs' shares %s near their sleeps' (2/6, 12/14)" % ref)
        check(rows[0]["dropped"] == 0 and rows[1]["dropped"] == 0, "nothing dropped")

    # Not a terminal: frames one after another until SIGINT, then exit 0.
    p = subprocess.Popen([o.tracedb, "top", job, "--interval", "0.3"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=20)
    check(p.returncode == 0, "SIGINT ends the loop cleanly (rc %s, %s)" % (p.returncode, err))
    check(out.count("tracedb top ") >= 2, "several frames printed")
    check("\x1b" not in out, "no escape codes when not a terminal")
    check(os.listdir(top_tmp) == [], "temporary database removed after SIGINT")

    # A database as input (as `tracedb compact --watch` keeps one).
    db = os.path.join(work, "job.tdb")
    subprocess.run([o.tracedb, "compact", job, "-o", db, "-q"], check=True, env=env)
    r = top(db, "--once")
    check(r.returncode == 0 and total_events(r.stdout) == recorded, "database input")
    # A window longer than int64 ns holds is the whole trace (it was an undefined conversion);
    # NaN is no window.
    r = top(db, "--once", "--window", "1e30")
    check(r.returncode == 0 and total_events(r.stdout) == recorded and
          "last 0 ns" not in r.stdout and "last 1 ns" not in r.stdout,
          "--window 1e30: " + r.stdout + r.stderr)
    r = top(db, "--once", "--window", "nan")
    check(r.returncode == 2 and "must be positive" in r.stderr, "--window nan: " + r.stderr)

    # q in a real terminal.
    if shutil.which("tmux"):
        sock = os.path.join(work, "tmux.sock")
        done = os.path.join(work, "exit")
        cmd = "%s top %s --interval 0.5; echo rc=$? > %s" % (o.tracedb, db, done)
        subprocess.run(["tmux", "-S", sock, "new-session", "-d", "-x", "130", "-y", "30", cmd],
                       check=True)
        time.sleep(1.5)
        pane = subprocess.run(["tmux", "-S", sock, "capture-pane", "-p"], stdout=subprocess.PIPE,
                              text=True).stdout
        check("q to quit" in pane and "rank" in pane, "frame on the terminal:\n" + pane)
        subprocess.run(["tmux", "-S", sock, "send-keys", "q"])
        for _ in range(50):
            if os.path.exists(done):
                break
            time.sleep(0.1)
        check(os.path.exists(done) and open(done).read().strip() == "rc=0", "q quits with 0")
        subprocess.run(["tmux", "-S", sock, "kill-server"], stderr=subprocess.DEVNULL)
    else:
        print("tmux not installed: the terminal check is skipped")

    # Overlap: 3 ms of communication hidden in every 4 ms forward, then 2 ms of allreduce: 3 of
    # every 6 ms are in both, so compute (67%) + comm (83%) exceed 100%, and the frame says so.
    ov = os.path.join(work, "overlap")
    p = subprocess.run([o.job, ov, "0", "60", "4", "2", "3"], env=env, stdout=subprocess.PIPE,
                       text=True, timeout=60)
    check(p.returncode == 0, "overlap job")
    r = top(ov, "--once")
    m = re.search(r"overlap on rank 0 \(up to ([\d.]+)% of the time is in both", r.stdout)
    check(m is not None, "overlap said: " + r.stdout)
    ref = recorded_shares(o.tracedb, ov, env)
    print("recorded shares of the overlap job (compute, comm, both):", ref)
    if m and 0 in ref:
        # Against the recorded spans (3 of every 6 ms in both as the program sleeps them; 41.7%
        # once on a loaded machine, where every sleep ran long).
        check(abs(float(m.group(1)) / 100 - ref[0][2]) < 0.02,
              "overlap share %s%%, recorded %.1f%%" % (m.group(1), 100 * ref[0][2]))
        check(abs(ref[0][2] - 3 / 6) < 0.25, "the program's overlap %.3f near 3/6" % ref[0][2])
    rows = frame_rows(r.stdout)
    if 0 in rows:
        check(rows[0]["compute"] + rows[0]["comm"] > 1.2, "shares add up to more than 100%")

    # A missing input is an error naming it.
    r = top(os.path.join(work, "missing"), "--once")
    check(r.returncode == 1 and "missing" in r.stderr, "missing input: " + r.stderr)


if __name__ == "__main__":
    sys.exit(main())
