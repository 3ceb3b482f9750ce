"""Tests of the recording API of the tracedb Python package (python/tracedb, docs/python.md).

Each test records in a child process of the Python under test (TRACEDB_TEST_PYTHON, default
sys.executable), compacts with the tracedb CLI (TRACEDB_BIN) and reads the rows back with
`tracedb query --format json`: what the child emitted is compared with what the database holds.
Run by ctest (python_recording_test) with PYTHONPATH pointing at build/python.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

TRACEDB_BIN = os.environ.get("TRACEDB_BIN", "tracedb")
PYTHON = os.environ.get("TRACEDB_TEST_PYTHON", sys.executable)


def run_child(code, env_extra=None, check=True):
    env = dict(os.environ)
    env.pop("TRACEDB_DIR", None)
    env.update(env_extra or {})
    p = subprocess.run([PYTHON, "-c", textwrap.dedent(code)], env=env, capture_output=True,
                       text=True, timeout=120)
    if check and p.returncode != 0:
        raise AssertionError(f"child failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def compact_and_query(seg_dir, db, sql):
    c = subprocess.run([TRACEDB_BIN, "compact", seg_dir, "-o", db], capture_output=True,
                       text=True, timeout=120)
    if c.returncode != 0:
        raise AssertionError(f"compact failed: {c.stderr}")
    q = subprocess.run([TRACEDB_BIN, "query", "--format", "json", db, sql], capture_output=True,
                       text=True, timeout=120)
    if q.returncode != 0:
        raise AssertionError(f"query failed: {q.stderr}")
    return json.loads(q.stdout) if q.stdout.strip() else []


class RecordingTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tracedb-pytest-")
        self.seg = os.path.join(self.tmp, "seg")
        self.db = os.path.join(self.tmp, "job.tdb")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_spans_args_steps_counters_lanes(self):
        run_child(f"""
            import tracedb
            tracedb.start({self.seg!r})
            for s in range(3):
                tracedb.step(s)
                with tracedb.span("forward", cat="compute"):
                    with tracedb.span("allreduce", "comm", bytes=4096, peer=2, comm=7, seq=s):
                        pass
                tracedb.counter("loss", 1.0 / 2 ** s)
                tracedb.instant("checkpoint", cat="phase")
            @tracedb.trace
            def decorated(x):
                return x * 2
            @tracedb.trace(name="named", cat="phase")
            def other():
                return None
            assert decorated(21) == 42
            other()
            lane = tracedb.lane("tensor.grad")
            tracedb.begin("COMMUNICATE", cat="comm", lane=lane, bytes=123)
            tracedb.end("COMMUNICATE", cat="comm", lane=lane)
            t = tracedb.now()
            tracedb.complete("explicit", t, 5000, cat="user")
            tracedb.stop()
        """)
        rows = compact_and_query(
            self.seg, self.db,
            "SELECT name, cat, kind, depth, bytes, peer, comm, seq, step, lane, value, dur "
            "FROM events ORDER BY ts, depth")
        by_name = {}
        for r in rows:
            by_name.setdefault(r["name"], []).append(r)
        self.assertEqual(len(by_name["forward"]), 3)
        self.assertEqual([r["step"] for r in by_name["forward"]], [0, 1, 2])
        self.assertTrue(all(r["cat"] == "compute" and r["kind"] == "span" and r["depth"] == 0
                            for r in by_name["forward"]))
        ar = by_name["allreduce"]
        self.assertEqual([(r["bytes"], r["peer"], r["comm"], r["seq"], r["depth"], r["cat"])
                          for r in ar],
                         [(4096, 2, 7, s, 1, "comm") for s in range(3)])
        self.assertEqual([r["value"] for r in by_name["loss"]], [1.0, 0.5, 0.25])
        self.assertEqual([r["kind"] for r in by_name["checkpoint"]], ["instant"] * 3)
        self.assertEqual(by_name["checkpoint"][0]["cat"], "phase")
        self.assertEqual(len(by_name["decorated"]), 1)
        self.assertEqual(by_name["named"][0]["cat"], "phase")
        comm = by_name["COMMUNICATE"][0]
        self.assertEqual((comm["lane"], comm["bytes"], comm["cat"]), ("tensor.grad", 123, "comm"))
        self.assertEqual(by_name["explicit"][0]["dur"], 5000)

    def test_flight_trigger_writes_the_ring_and_is_rate_limited(self):
        # Flight mode (docs/flight.md): nothing of the first 200 steps (2 ms each, over 300 ms
        # before the trigger) is written; the last ones and the trigger are; a second trigger
        # within the second is refused (False). Not recording: trigger raises.
        p = run_child(f"""
            import time, tracedb
            try:
                tracedb.trigger("early")
                raise SystemExit("trigger while not recording did not raise")
            except RuntimeError:
                pass
            tracedb.start({self.seg!r})
            for s in range(400):
                tracedb.step(s)
                with tracedb.span("work"):
                    time.sleep(0.002)
            print(tracedb.trigger("from python"), tracedb.trigger("again"))
            tracedb.stop()
        """, {"TRACEDB_FLIGHT": "300ms", "TRACEDB_FLUSH_MS": "50", "TRACEDB_SLOW_STEP": "0"})
        self.assertEqual(p.stdout.split(), ["True", "False"])
        rows = compact_and_query(self.seg, self.db,
                                 "SELECT min(step) AS lo, max(step) AS hi FROM events "
                                 "WHERE name = 'work'")
        self.assertGreater(rows[0]["lo"], 200)
        self.assertEqual(rows[0]["hi"], 399)
        trig = compact_and_query(self.seg, self.db, "SELECT reason FROM triggers")
        self.assertEqual(trig, [{"reason": "from python"}])

    def test_automatic_start_from_env(self):
        p = run_child("""
            import tracedb
            assert tracedb.enabled(), "not recording after import with TRACEDB_DIR set"
            print(tracedb.rank(), tracedb.world_size())
            with tracedb.span("auto"):
                pass
        """, {"TRACEDB_DIR": self.seg, "RANK": "3", "WORLD_SIZE": "4"})
        self.assertEqual(p.stdout.split(), ["3", "4"])
        rows = compact_and_query(self.seg, self.db, "SELECT rank, name FROM events")
        self.assertEqual(rows, [{"rank": 3, "name": "auto"}])

    def test_not_started_records_nothing_and_costs_no_error(self):
        p = run_child("""
            import tracedb
            assert not tracedb.enabled()
            with tracedb.span("nothing"):
                pass
            tracedb.step(1)
            tracedb.counter("c", 1)
            print(tracedb.counters()["written"])
        """)
        self.assertEqual(p.stdout.strip(), "0")

    def test_bad_arguments_raise_clear_errors(self):
        p = run_child(f"""
            import tracedb
            def err(f):
                try:
                    f()
                except Exception as e:
                    return type(e).__name__ + ": " + str(e)
                return "no error"
            print(err(lambda: tracedb.span("x", cat="bogus")))
            print(err(lambda: tracedb.span(3.5)))
            print(err(lambda: tracedb.span("x", bytes=-1)))
            print(err(lambda: tracedb.span("x", nope=1)))
            print(err(lambda: tracedb.span("a\\0b")))
            print(err(lambda: tracedb.stop()))
            print(err(lambda: tracedb.start("/proc/no-such-dir/x")))
            tracedb.start({self.seg!r})
            print(err(lambda: tracedb.start({self.seg!r})))
            tracedb.stop()
        """)
        lines = p.stdout.splitlines()
        self.assertIn("ValueError: tracedb: unknown category 'bogus'", lines[0])
        self.assertIn("TypeError: tracedb: a name must be a str, not float", lines[1])
        self.assertIn("ValueError: tracedb: bytes=-1 out of range", lines[2])
        self.assertIn("TypeError: span(): unexpected or repeated argument 'nope'", lines[3])
        self.assertIn("ValueError: tracedb: a name may not contain NUL", lines[4])
        self.assertIn("RuntimeError: tracedb.stop: wrong state", lines[5])
        self.assertIn("OSError: tracedb.start: cannot write /proc/no-such-dir/x", lines[6])
        self.assertIn("RuntimeError: tracedb.start: wrong state", lines[7])

    def test_threads_each_get_a_track_and_nothing_is_lost(self):
        run_child(f"""
            import threading, tracedb
            tracedb.start({self.seg!r})
            def work(i):
                tracedb.thread_name(f"worker-{{i}}")
                for _ in range(10000):
                    with tracedb.span("w"):
                        pass
            ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
            for t in ts: t.start()
            for t in ts: t.join()
            tracedb.flush()
            c = tracedb.counters()
            assert c["dropped"] == 0, c
            tracedb.stop()
        """)
        rows = compact_and_query(self.seg, self.db,
                                 "SELECT count(*) AS n, count(DISTINCT tid) AS threads "
                                 "FROM events WHERE name = 'w'")
        self.assertEqual(rows, [{"n": 40000, "threads": 4}])


class RecordStartupHookTest(unittest.TestCase):
    """`tracedb record` runs Python ranks with the package's start-up hook (python/_boot)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tracedb-boot-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def record(self, code, nproc=2, env_extra=None):
        script = os.path.join(self.tmp, "prog.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(code))
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        env.pop("TRACEDB_DIR", None)
        env.update(env_extra or {})
        db = os.path.join(self.tmp, "job.tdb")
        p = subprocess.run([TRACEDB_BIN, "record", "-o", db, "--nproc", str(nproc), "--",
                            PYTHON, script], env=env, capture_output=True, text=True,
                           timeout=120, cwd=self.tmp)
        return p, db

    def test_package_found_recording_on_torch_not_imported_site_hook_chained(self):
        site = os.path.join(self.tmp, "site")
        os.makedirs(site)
        with open(os.path.join(site, "sitecustomize.py"), "w") as f:
            f.write("import os\nos.environ['USER_SITECUSTOMIZE_RAN'] = '1'\n")
        p, db = self.record("""
            import os, sys
            import tracedb
            assert tracedb.enabled(), "recording is not on"
            assert "torch" not in sys.modules, "the start-up hook imported torch"
            assert os.environ.get("USER_SITECUSTOMIZE_RAN") == "1", "user sitecustomize skipped"
            assert os.environ["RANK"] == str(tracedb.rank())
            assert os.environ["WORLD_SIZE"] == "2" and os.environ["MASTER_ADDR"] == "127.0.0.1"
            assert int(os.environ["MASTER_PORT"]) > 0
            with tracedb.span("in_rank"):
                pass
        """, env_extra={"PYTHONPATH": site})
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = compact_and_query_db(db, "SELECT rank, count(*) AS n FROM events "
                                        "WHERE name = 'in_rank' GROUP BY rank")
        self.assertEqual(rows, [{"rank": 0, "n": 1}, {"rank": 1, "n": 1}])

    def test_failing_rank_exit_status_is_reported(self):
        p, db = self.record("""
            import os, sys, time, tracedb
            with tracedb.span("ran"):
                pass
            tracedb.flush()
            open("ready-" + os.environ["RANK"], "w").close()
            while not (os.path.exists("ready-0") and os.path.exists("ready-1")):
                time.sleep(0.01)
            sys.exit(3 if os.environ["RANK"] == "1" else 0)
        """)
        self.assertEqual(p.returncode, 3, p.stderr)
        self.assertRegex(p.stderr, r"rank 1 \(pid \d+\) exited with status 3")
        self.assertIn("the job failed (exit code 3); compacting what it flushed", p.stderr)
        rows = compact_and_query_db(db, "SELECT count(*) AS n FROM events WHERE name = 'ran'")
        self.assertEqual(rows, [{"n": 2}])


def compact_and_query_db(db, sql):
    q = subprocess.run([TRACEDB_BIN, "query", "--format", "json", db, sql], capture_output=True,
                       text=True, timeout=120)
    if q.returncode != 0:
        raise AssertionError(f"query failed: {q.stderr}")
    return json.loads(q.stdout) if q.stdout.strip() else []


if __name__ == "__main__":
    unittest.main()
