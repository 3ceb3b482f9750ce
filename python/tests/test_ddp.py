"""The PyTorch capture end to end: examples/ddp_train.py (DDP over gloo, 4 ranks) recorded with
no code change by `tracedb record`, both as the local launcher (--nproc 4) and under
`mpirun -np 4`; then a rank that crashes. Counts are checked against what the example and DDP
themselves report (parameter bytes, bucket sizes, steps), not against tracedb's own numbers.

Skips when torch is not importable by the Python under test (TRACEDB_TEST_PYTHON); the project's
setup script installs it, so CI runs it. Run by ctest (python_ddp_test).
"""
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

TRACEDB_BIN = os.environ.get("TRACEDB_BIN", "tracedb")
PYTHON = os.environ.get("TRACEDB_TEST_PYTHON", sys.executable)
SOURCE = os.environ.get("TRACEDB_SOURCE_ROOT",
                        os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
EXAMPLE = os.path.join(SOURCE, "examples", "ddp_train.py")
STEPS = 6
RANKS = 4


def have_torch():
    return subprocess.run([PYTHON, "-c", "import torch.distributed as d; assert d.is_available()"],
                          capture_output=True).returncode == 0


def query(db, sql):
    q = subprocess.run([TRACEDB_BIN, "query", "--format", "json", db, sql], capture_output=True,
                       text=True, timeout=120)
    if q.returncode != 0:
        raise AssertionError(f"query failed: {q.stderr}")
    return json.loads(q.stdout) if q.stdout.strip() else []


def mpi_flags():
    flags = ["--oversubscribe"]
    if os.geteuid() == 0:
        flags.append("--allow-run-as-root")
    return flags


@unittest.skipUnless(have_torch(), f"torch.distributed is not importable by {PYTHON}")
class DdpCaptureTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tracedb-ddp-")
        cls.runs = {}
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # `tracedb record` must find the package by itself
        env.pop("TRACEDB_DIR", None)
        for mode in ("nproc", "mpirun"):
            db = os.path.join(cls.tmp, f"{mode}.tdb")
            report = os.path.join(cls.tmp, f"{mode}.json")
            prog = [PYTHON, EXAMPLE, "--steps", str(STEPS), "--report", report]
            if mode == "nproc":
                cmd = [TRACEDB_BIN, "record", "-o", db, "--nproc", str(RANKS), "--"] + prog
            else:
                if shutil.which("mpirun") is None:
                    continue
                cmd = ([TRACEDB_BIN, "record", "-o", db, "--", "mpirun"] + mpi_flags() +
                       ["-np", str(RANKS)] + prog)
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300,
                               cwd=cls.tmp)
            if p.returncode != 0:
                raise AssertionError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n"
                                     f"{p.stderr}")
            with open(report) as f:
                cls.runs[mode] = (db, json.load(f), p.stderr)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def each_run(self):
        """[(db, report, stderr)] of each recorded run (--nproc, and mpirun where present)."""
        self.assertIn("nproc", self.runs)
        return list(self.runs.values())

    def test_ranks_and_steps(self):
        for db, report, _ in self.each_run():
            self.assertEqual(report["world_size"], RANKS)
            rows = query(db, "SELECT rank, group_concat(step) AS steps FROM "
                             "(SELECT rank, step FROM steps ORDER BY rank, ts) GROUP BY rank")
            self.assertEqual(rows, [{"rank": r, "steps": ",".join(map(str, range(STEPS)))}
                                    for r in range(RANKS)])
            rows = query(db, "SELECT name, rank, count(*) AS n, count(DISTINCT step) AS steps "
                             "FROM events WHERE name IN ('forward', 'backward', "
                             "'optimizer.step', 'optimizer.zero_grad') GROUP BY name, rank")
            self.assertEqual(len(rows), 4 * RANKS)
            for r in rows:
                self.assertEqual((r["n"], r["steps"]), (STEPS, STEPS), r)

    def test_every_rank_sees_the_same_collectives(self):
        for db, _, _ in self.each_run():
            rows = query(db, "SELECT name, rank, count(*) AS n FROM events WHERE cat = 'comm' "
                             "GROUP BY name, rank ORDER BY name, rank")
            per_name = collections.defaultdict(dict)
            for r in rows:
                per_name[r["name"]][r["rank"]] = r["n"]
            self.assertIn("gloo:all_reduce", per_name)
            for name, counts in per_name.items():
                self.assertEqual(sorted(counts), list(range(RANKS)), name)
                self.assertEqual(len(set(counts.values())), 1, f"{name}: {counts}")
            # Matched by (comm, seq): every collective once on every rank, same name and bytes.
            bad = query(db, "SELECT comm, seq, count(*) AS n, count(DISTINCT rank) AS ranks, "
                            "count(DISTINCT name) AS names, count(DISTINCT bytes) AS sizes "
                            "FROM events WHERE cat = 'comm' AND seq IS NOT NULL "
                            "GROUP BY comm, seq HAVING n <> 4 OR ranks <> 4 OR names <> 1 "
                            "OR sizes <> 1")
            self.assertEqual(bad, [])
            # Overlapping operations sit on lanes of their own: nothing mis-nested or unmatched.
            damage = query(db, "SELECT name, rank, value FROM stats WHERE name IN "
                               "('improper_nesting', 'unmatched_end', 'negative_duration', "
                               "'dropped') AND value > 0")
            self.assertEqual(damage, [])
            seqs = query(db, "SELECT rank, count(*) AS n, max(seq) AS top FROM events "
                             "WHERE cat = 'comm' AND seq IS NOT NULL GROUP BY rank")
            for r in seqs:
                self.assertEqual(r["top"], r["n"] - 1, "seq numbers 0..n-1 without gaps")

    def test_parents_contain_their_children(self):
        # The c10d operations are begin/end pairs on lanes of the thread that runs them (gloo's
        # workers, the Python thread for send/recv); nesting must follow time, not arrival.
        # Plain SQL: every parent on its child's track, containing it, one level up.
        for db, _, _ in self.each_run():
            rows = query(db, "SELECT count(*) AS n, coalesce(sum(c.ts >= p.ts AND "
                             "c.end_ts <= p.end_ts AND c.track = p.track AND "
                             "c.depth = p.depth + 1), 0) AS ok FROM events c "
                             "JOIN events p ON c.parent = p.id")
            self.assertEqual(rows[0]["n"], rows[0]["ok"], f"{db}: parents that do not contain")
            # The c10d lanes never nest (docs/python.md): depth 0, no parent, on every rank.
            lanes = query(db, "SELECT rank, count(*) AS n, sum(depth = 0 AND parent IS NULL) "
                              "AS top FROM events WHERE track_name LIKE 'c10d %' GROUP BY rank")
            self.assertEqual([r["rank"] for r in lanes], list(range(RANKS)))
            for r in lanes:
                self.assertGreater(r["n"], 0)
                self.assertEqual(r["top"], r["n"], f"{db}: c10d events below another: {r}")
            # Every other invariant of the suite (tests/db_invariants.h), where built.
            checker = os.environ.get("TRACEDB_INVARIANTS")
            if checker:
                p = subprocess.run([checker, db], capture_output=True, text=True, timeout=120,
                                   env=dict(os.environ, TRACEDB_BIN=TRACEDB_BIN))
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_bucketed_allreduce_bytes_equal_ddp_buckets(self):
        for db, report, _ in self.each_run():
            rows = query(db, "SELECT rank, step, bytes FROM events "
                             "WHERE name = 'gloo:all_reduce' AND step IS NOT NULL "
                             "ORDER BY rank, step, bytes")
            per_step = collections.defaultdict(list)
            for r in rows:
                per_step[(r["rank"], r["step"])].append(r["bytes"])
            self.assertEqual(len(per_step), RANKS * STEPS)
            for (rank, step), sizes in per_step.items():
                self.assertEqual(sum(sizes), report["param_bytes"], (rank, step))
                expect = report["buckets_first_step"] if step == 0 else report["buckets_rebuilt"]
                self.assertEqual(sorted(sizes), sorted(expect), (rank, step))

    def test_clock_sync_points_on_every_rank(self):
        for db, _, _ in self.each_run():
            rows = query(db, "SELECT rank, count(*) AS n FROM sync_points GROUP BY rank")
            self.assertEqual([r["rank"] for r in rows], list(range(RANKS)))
            for r in rows:
                self.assertGreaterEqual(r["n"], 2)  # init_process_group and destroy

    def test_stragglers_report_matches_across_ranks(self):
        for db, _, _ in self.each_run():
            rows = query(db, "SELECT ranks, count(*) AS n FROM collectives GROUP BY ranks")
            self.assertEqual([r["ranks"] for r in rows], [RANKS])

    def test_groups_peers_and_roots(self):
        db = os.path.join(self.tmp, "ops.tdb")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "comm_ops.py")
        p = subprocess.run([TRACEDB_BIN, "record", "-o", db, "--nproc", "4", "--", PYTHON,
                            script], env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        world = 0x40000000
        rows = query(db, "SELECT rank, name, bytes, peer, comm - %d AS g, seq FROM events "
                         "WHERE cat = 'comm' AND step IS NULL ORDER BY rank, ts" % world)
        got = collections.defaultdict(list)
        for r in rows:
            got[r["rank"]].append((r["name"], r["bytes"], r["peer"], r["g"], r["seq"]))
        common = [("gloo:all_reduce", 1024, None, 0, 0), ("gloo:broadcast", 1024, 2, 0, 1)]
        barrier = ("gloo:barrier", 0, None, 0, 2)
        self.assertEqual(got[0], common + [("gloo:all_reduce", 128, None, 2, 0),
                                           ("gloo:send", 40, 1, 0, None),
                                           ("gloo:send", 20, 3, 0, None), barrier])
        self.assertEqual(got[1], common + [("gloo:all_reduce", 64, None, 1, 0),
                                           ("gloo:broadcast", 32, 1, 1, 1),
                                           ("gloo:recv", 40, 0, 0, None), barrier])
        self.assertEqual(got[2], common + [("gloo:all_reduce", 128, None, 2, 0), barrier])
        self.assertEqual(got[3], common + [("gloo:all_reduce", 64, None, 1, 0),
                                           ("gloo:broadcast", 32, 1, 1, 1),
                                           ("gloo:recv", 20, 0, 0, None), barrier])
        comms = query(db, "SELECT rank, comm - %d AS g, size, rank_in_comm FROM comms "
                          "ORDER BY rank, comm" % world)
        self.assertIn({"rank": 3, "g": 1, "size": 2, "rank_in_comm": 1}, comms)
        self.assertIn({"rank": 2, "g": 2, "size": 2, "rank_in_comm": 1}, comms)

    def test_async_collectives_numbered_in_issue_order(self):
        db = os.path.join(self.tmp, "async.tdb")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "async_ops.py")
        p = subprocess.run([TRACEDB_BIN, "record", "-o", db, "--nproc", "4", "--", PYTHON,
                            script], env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = query(db, "SELECT rank, seq, bytes FROM events WHERE name = 'gloo:all_reduce' "
                         "ORDER BY rank, seq")
        late = {int(m.group(1)): int(m.group(2)) for m in
                re.finditer(r"async_ops rank (\d+) late_starts (\d+)", p.stdout)}
        self.assertEqual(sorted(late), [0, 1, 2, 3], p.stdout)
        for rank in range(4):
            mine = [(r["seq"], r["bytes"]) for r in rows if r["rank"] == rank]
            want = [(i, 4 * (i + 1)) for i in range(60)]
            if late[rank] == 0:
                self.assertEqual(mine, want, f"rank {rank}")
                continue
            # An operation that started after a later-issued one had completed (a worker thread
            # descheduled on a loaded machine) cannot get its number back: the recorder counts
            # it, and only such operations and the ones they overtook are out of place, each
            # number still given once.
            self.assertEqual(sorted(s for s, _ in mine), list(range(60)), f"rank {rank}")
            self.assertEqual(sorted(b for _, b in mine), [b for _, b in want], f"rank {rank}")
            misplaced = sum(1 for got, exp in zip(mine, want) if got != exp)
            self.assertLessEqual(misplaced, 2 * late[rank], f"rank {rank}: {mine}")

    def test_renumbering_restores_issue_order(self):
        code = ("import torch, json, tracedb._tracedb_torch as t\n"
                "cases = [\n"
                " [('start', 10), ('start', 11), ('end', 10), ('end', 11)],\n"
                " [('start', 11), ('start', 10), ('end', 10), ('end', 11)],\n"
                " [('start', 12), ('start', 11), ('start', 10), ('end', 11), ('end', 12),\n"
                "  ('end', 10)],\n"
                " [('start', 10), ('end', 10), ('start', 12), ('start', 11), ('end', 12),\n"
                "  ('end', 11), ('start', 13), ('end', 13)],\n"
                "]\n"
                "print(json.dumps([sorted(t._number_check(c).items()) for c in cases]))\n")
        env = dict(os.environ)  # the package of the build tree the CLI belongs to
        env["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.abspath(TRACEDB_BIN)), "python")
        p = subprocess.run([PYTHON, "-c", code], env=env, capture_output=True, text=True,
                           timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        got = json.loads(p.stdout)
        self.assertEqual(got, [
            [[10, 0], [11, 1]],
            [[10, 0], [11, 1]],                # 11 started first, gave its number up to 10
            [[10, 0], [11, 1], [12, 2]],
            [[10, 0], [11, 1], [12, 2], [13, 3]],
        ])

    def test_ddp_over_sub_groups(self):
        db = os.path.join(self.tmp, "groups.tdb")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_groups.py")
        p = subprocess.run([TRACEDB_BIN, "record", "-o", db, "--nproc", "4", "--", PYTHON,
                            script], env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        world = 0x40000000
        rows = query(db, "SELECT rank, comm - %d AS g, count(*) AS n, sum(bytes) AS b "
                         "FROM events WHERE name = 'gloo:all_reduce' AND step IS NOT NULL "
                         "GROUP BY rank, comm ORDER BY rank" % world)
        param_bytes = 4 * (8 * 16 + 16 + 16 * 2 + 2)
        self.assertEqual([(r["rank"], r["g"], r["b"]) for r in rows],
                         [(0, 1, 3 * param_bytes), (1, 1, 3 * param_bytes),
                          (2, 2, 3 * param_bytes), (3, 2, 3 * param_bytes)])
        bad = query(db, "SELECT comm, seq, count(*) AS n, count(DISTINCT bytes) AS sizes "
                        "FROM events WHERE cat = 'comm' AND seq IS NOT NULL AND comm <> %d "
                        "GROUP BY comm, seq HAVING n <> 2 OR sizes <> 1" % world)
        self.assertEqual(bad, [])

    def crash_script(self, tmp, ranks):
        """Every rank records and flushes, then says so; rank 2 crashes once all have, the
        others wait to be stopped by the launcher."""
        script = os.path.join(tmp, "crash.py")
        with open(script, "w") as f:
            f.write("import os, signal, sys, time, tracedb\n"
                    "with tracedb.span('before_crash'):\n"
                    "    pass\n"
                    "tracedb.flush()\n"
                    "d = os.path.dirname(sys.argv[0])\n"
                    "open(os.path.join(d, 'ready-' + os.environ['RANK']), 'w').close()\n"
                    f"while len([n for n in os.listdir(d) if n.startswith('ready-')]) < {ranks}:\n"
                    "    time.sleep(0.01)\n"
                    "if os.environ['RANK'] == '2':\n"
                    "    os.kill(os.getpid(), signal.SIGSEGV)\n"
                    "time.sleep(60)\n")
        return script

    def test_crashed_rank_is_reported_and_flushed_events_kept(self):
        tmp = tempfile.mkdtemp(prefix="tracedb-crash-", dir=self.tmp)
        script = self.crash_script(tmp, 3)
        db = os.path.join(tmp, "crash.tdb")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        p = subprocess.run([TRACEDB_BIN, "record", "-o", db, "--nproc", "3", "--", PYTHON,
                            script], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 128 + 11, p.stderr)
        self.assertRegex(p.stderr, r"rank 2 \(pid \d+\) was killed by signal 11 "
                                   r"\(Segmentation fault")
        self.assertIn("stopping the other 2 ranks", p.stderr)
        # The recorder's crash handler writes and closes the crashing rank's file (docs/hang.md):
        # nothing is lost, so record no longer reports it as unfinished.
        self.assertNotRegex(p.stderr, r"rank 2 \(pid \d+\) did not finish")
        rows = query(db, "SELECT rank FROM events WHERE name = 'before_crash' ORDER BY rank")
        self.assertEqual([r["rank"] for r in rows], [0, 1, 2])

    @unittest.skipUnless(shutil.which("mpirun"), "mpirun is not installed")
    def test_crash_under_mpirun_keeps_the_crashed_ranks_events(self):
        tmp = tempfile.mkdtemp(prefix="tracedb-crash-mpi-", dir=self.tmp)
        script = self.crash_script(tmp, 3)
        db = os.path.join(tmp, "crash.tdb")
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        p = subprocess.run([TRACEDB_BIN, "record", "-o", db, "--", "mpirun"] + mpi_flags() +
                           ["-np", "3", PYTHON, script], env=env, capture_output=True,
                           text=True, timeout=120)
        self.assertNotEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stderr, r"tracedb record: mpirun \(pid \d+\) (exited with status \d+|"
                                   r"was killed by signal)")
        # The crashing rank's recorder closed its file on SIGSEGV (docs/hang.md), so nothing of
        # it is reported lost; its events are in the database below.
        self.assertNotRegex(p.stderr, r"rank 2 \(pid \d+\) did not finish")
        self.assertIn("compacting what it flushed", p.stderr)
        rows = query(db, "SELECT rank FROM events WHERE name = 'before_crash' ORDER BY rank")
        self.assertEqual([r["rank"] for r in rows], [0, 1, 2])


if __name__ == "__main__":
    unittest.main()
