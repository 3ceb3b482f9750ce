"""The read path (tracedb.open, db.sql, db.events) against the SQL path's `events` table.

A database with known content is recorded by the Python API in a child process (several ranks,
threads, lanes, counters, typed arguments, steps) and compacted with the CLI; then every column
db.events() decodes from the blocks is compared with the same rows read through `tracedb query`
(the events virtual table, a separate reader), with and without filters, as NumPy and as pandas.
Corrupt input must raise an error naming the file. Run by ctest (python_read_test).
"""
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

import tracedb

TRACEDB_BIN = os.environ.get("TRACEDB_BIN", "tracedb")
PYTHON = os.environ.get("TRACEDB_TEST_PYTHON", sys.executable)
COLS = ["rank", "tid", "track", "lane", "id", "name", "cat", "kind", "ts", "dur", "end_ts",
        "depth", "bytes", "peer", "tag", "comm", "seq", "flow", "value", "step"]

try:
    import numpy  # noqa: F401
    HAVE_NUMPY = True
except ImportError:
    HAVE_NUMPY = False
try:
    import pandas  # noqa: F401
    HAVE_PANDAS = True
except ImportError:
    HAVE_PANDAS = False


def sql_rows(db, where=""):
    q = subprocess.run([TRACEDB_BIN, "query", "--format", "json", db,
                        f"SELECT {', '.join(COLS)} FROM events {where} ORDER BY id"],
                       capture_output=True, text=True, timeout=120)
    if q.returncode != 0:
        raise AssertionError(q.stderr)
    return json.loads(q.stdout) if q.stdout.strip() else []


@unittest.skipUnless(HAVE_NUMPY, "numpy is not installed")
class ReadTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tracedb-read-")
        seg = os.path.join(cls.tmp, "seg")
        code = textwrap.dedent(f"""
            import os, threading, tracedb
            tracedb.start({seg!r})
            lane = tracedb.lane("tensor.w1")
            def worker(t):
                tracedb.thread_name(f"worker-{{t}}")
                for i in range(3000):
                    with tracedb.span("work", cat="compute"):
                        with tracedb.span("send", "comm", bytes=i * 8, peer=t, tag=7, comm=3,
                                          seq=i, flow=i + 1):
                            pass
                    if i % 100 == 0:
                        tracedb.counter("queue", i / 4)
            for s in range(5):
                tracedb.step(s)
                with tracedb.span("forward", cat="compute"):
                    tracedb.instant("mark", cat="phase")
                tracedb.begin("COMMUNICATE", cat="comm", lane=lane, bytes=s)
                tracedb.end("COMMUNICATE", cat="comm", lane=lane)
            ts = [threading.Thread(target=worker, args=(t,)) for t in range(3)]
            for t in ts: t.start()
            for t in ts: t.join()
            tracedb.stop()
        """)
        for rank in (0, 1, 2):
            env = dict(os.environ, TRACEDB_RANK=str(rank), TRACEDB_WORLD_SIZE="3")
            env.pop("TRACEDB_DIR", None)
            subprocess.run([PYTHON, "-c", code], env=env, check=True, timeout=120)
        cls.db = os.path.join(cls.tmp, "job.tdb")
        subprocess.run([TRACEDB_BIN, "compact", seg, "-o", cls.db], check=True,
                       capture_output=True, timeout=120)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def numpy_rows(self, where=None):
        cols = tracedb.open(self.db).events(columns=COLS, where=where, pandas=False)
        n = len(cols["ts"])
        rows = []
        for i in range(n):
            r = {}
            for c in COLS:
                v = cols[c][i]
                if v is numpy.ma.masked:
                    v = None
                elif isinstance(v, numpy.generic):
                    v = v.item()
                r[c] = v
            rows.append(r)
        return sorted(rows, key=lambda r: r["id"])

    def assert_same(self, ours, theirs):
        self.assertEqual(len(ours), len(theirs))
        for a, b in zip(ours, theirs):
            for c in COLS:
                if c == "value" and a[c] is not None and b[c] is not None:
                    self.assertTrue(math.isclose(a[c], b[c], rel_tol=1e-12), (c, a, b))
                else:
                    self.assertEqual(a[c], b[c], (c, a, b))

    def test_every_column_equals_the_sql_path(self):
        theirs = sql_rows(self.db)
        self.assertEqual(len(theirs), 3 * (5 * 3 + 3 * (3000 * 2 + 30)))
        self.assert_same(self.numpy_rows(), theirs)

    def test_filters_equal_the_sql_path(self):
        cases = [
            ({"rank": 1}, "WHERE rank = 1"),
            ({"rank": [0, 2], "name": "send"}, "WHERE rank IN (0, 2) AND name = 'send'"),
            ({"cat": ["comm", "phase"]}, "WHERE cat IN ('comm', 'phase')"),
            ({"kind": "counter"}, "WHERE kind = 'counter'"),
            ({"step": (1, 3), "name": "forward"}, "WHERE step BETWEEN 1 AND 3 AND name = 'forward'"),
            ({"name": "nothing-by-this-name"}, "WHERE name = 'nothing-by-this-name'"),
        ]
        for where, sql in cases:
            with self.subTest(where=where):
                self.assert_same(self.numpy_rows(where), sql_rows(self.db, sql))
        # ts and dur ranges, from the data itself
        all_rows = sql_rows(self.db, "WHERE name = 'send'")
        mid = sorted(r["ts"] for r in all_rows)[len(all_rows) // 2]
        self.assert_same(self.numpy_rows({"ts": (mid, None), "name": "send"}),
                         sql_rows(self.db, f"WHERE ts >= {mid} AND name = 'send'"))
        self.assert_same(self.numpy_rows({"dur": (2000, None)}),
                         sql_rows(self.db, "WHERE dur >= 2000"))

    def test_zone_maps_prune_blocks(self):
        db = tracedb.open(self.db)
        db.events(columns=["ts"], where={"rank": 2})
        self.assertLess(db.blocks_read, db.blocks_total)
        self.assertGreater(db.blocks_read, 0)

    @unittest.skipUnless(HAVE_PANDAS, "pandas is not installed")
    def test_pandas_frame(self):
        df = tracedb.open(self.db).events(columns=COLS, pandas=True)
        theirs = sql_rows(self.db)
        self.assertEqual(len(df), len(theirs))
        df = df.sort_values("id").reset_index(drop=True)
        self.assertEqual(str(df["name"].dtype), "category")
        self.assertEqual(str(df["bytes"].dtype), "Int64")
        for i in (0, 1, len(df) // 2, len(df) - 1):
            for c in ("name", "cat", "kind", "lane", "bytes", "peer", "step", "ts", "tid"):
                v = df[c][i]
                v = None if v is pandas.NA or (isinstance(v, float) and math.isnan(v)) else v
                self.assertEqual(v, theirs[i][c], (i, c))
        self.assertEqual(int(df["bytes"].sum()), sum(r["bytes"] or 0 for r in theirs))

    def test_sql_rows(self):
        db = tracedb.open(self.db)
        self.assertEqual(db.sql("SELECT count(*) FROM events WHERE name = ?", ("send",)),
                         [(3 * 3 * 3000,)])
        self.assertEqual(db.sql("SELECT DISTINCT rank FROM events ORDER BY rank"),
                         [(0,), (1,), (2,)])

    def test_errors_name_the_file(self):
        with self.assertRaisesRegex(FileNotFoundError, "no-such.tdb"):
            tracedb.open(os.path.join(self.tmp, "no-such.tdb"))
        bad = os.path.join(self.tmp, "garbage.tdb")
        with open(bad, "wb") as f:
            f.write(b"not a database at all" * 100)
        with self.assertRaisesRegex(ValueError, "garbage.tdb"):
            tracedb.open(bad).events()
        with self.assertRaisesRegex(ValueError, "no column 'nope'"):
            tracedb.open(self.db).events(columns=["nope"])
        # a block whose payload is damaged: an error naming the file, never a crash
        broken = os.path.join(self.tmp, "broken.tdb")
        shutil.copy(self.db, broken)
        import sqlite3
        con = sqlite3.connect(broken)
        block, data = con.execute("SELECT block, data FROM blocks LIMIT 1").fetchone()
        data = bytearray(data)
        for i in range(8, len(data), 7):
            data[i] ^= 0x5A
        con.execute("UPDATE blocks SET data = ? WHERE block = ?", (bytes(data), block))
        con.commit()
        con.close()
        with self.assertRaisesRegex(ValueError, "broken.tdb"):
            tracedb.open(broken).events()

    def run_events(self, path):
        """db.events() in a child process: a crash is a signal there, not the end of this test."""
        code = (f"import tracedb\n"
                f"try:\n"
                f"    c = tracedb.open({path!r}).events(columns=['rank', 'ts', 'dur'], pandas=False)\n"
                f"    print('rows', len(c['ts']))\n"
                f"except ValueError as e:\n"
                f"    print('error', e)\n")
        return subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=120)

    def hostile_copy(self, name, *statements):
        import sqlite3
        path = os.path.join(self.tmp, name)
        shutil.copy(self.db, path)
        con = sqlite3.connect(path)
        for st in statements:
            con.execute(st)
        con.commit()
        con.close()
        return path

    def test_hostile_block_counts_are_errors(self):
        # The zone map's counts size the output: negative, too large, 2^62, or a lie in either
        # direction about what the block holds must each end in an error naming the file.
        import sqlite3
        con = sqlite3.connect(self.db)
        (true1,), (true2,) = con.execute("SELECT count FROM blocks WHERE block IN (1, 2) "
                                         "ORDER BY block").fetchall()
        con.close()
        cases = {
            "neg.tdb": ("UPDATE blocks SET count = -10 WHERE block = 1",
                        "UPDATE blocks SET count = 20 WHERE block = 2"),
            "minus1.tdb": ("UPDATE blocks SET count = -1 WHERE block = 1",),
            "huge.tdb": (f"UPDATE blocks SET count = {2 ** 62} WHERE block = 1",),
            "over.tdb": ("UPDATE blocks SET count = 65537 WHERE block = 1",),
            "fewer.tdb": (f"UPDATE blocks SET count = {true1 - 1} WHERE block = 1",),
            "more.tdb": (f"UPDATE blocks SET count = {true2 + 5} WHERE block = 2",),
        }
        for name, statements in cases.items():
            with self.subTest(name=name):
                p = self.run_events(self.hostile_copy(name, *statements))
                self.assertEqual(p.returncode, 0, (p.returncode, p.stderr[-2000:]))
                self.assertIn("error", p.stdout)
                self.assertIn(name, p.stdout)
                self.assertIn("zone map", p.stdout)
        # the untouched file still reads, in the same child (the harness itself is sound)
        p = self.run_events(self.db)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), f"rows {len(sql_rows(self.db))}")

    def test_huge_string_ids_neither_abort_nor_size_memory(self):
        # id 4e12 made bad_alloc escape the extension into Python (abort); id 30M cost ~1 GB.
        # In a child: an abort must fail this test, not end it.
        import sqlite3
        con = sqlite3.connect(self.db)
        (events,) = con.execute("SELECT sum(count) FROM blocks").fetchone()
        con.close()
        for sid in (30000000, 4000000000000):
            with self.subTest(id=sid):
                path = self.hostile_copy(f"sid{sid}.tdb", f"INSERT INTO strings VALUES({sid}, 'x')")
                code = (f"import tracedb\n"
                        f"db = tracedb.open({path!r})\n"
                        f"print(db.sql('SELECT count(*), count(name) = count(*) FROM events'))\n"
                        f"print(len(db.events(columns=['name'], pandas=False)['name']))\n"
                        f"print(len(db.strings()) < 10000)\n")
                p = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True,
                                   timeout=120)
                self.assertEqual(p.returncode, 0, p.stderr[-2000:])
                self.assertEqual(p.stdout.split("\n")[:3], [f"[({events}, 1)]", str(events),
                                                             "True"])

    def test_paths_with_uri_characters_open_that_file(self):
        # "job#1.tdb" in a URI without escaping is "job" with a fragment: SQLite created "job".
        import sqlite3
        con = sqlite3.connect(self.db)
        (events,) = con.execute("SELECT sum(count) FROM blocks").fetchone()
        con.close()
        d = os.path.join(self.tmp, "uri dir")
        os.makedirs(d, exist_ok=True)
        for name in ("job#1.tdb", "job?mode=rwc.tdb", "100%25.tdb", "job%.tdb"):
            with self.subTest(name=name):
                path = os.path.join(d, name)
                shutil.copy(self.db, path)
                before = sorted(os.listdir(d))
                db = tracedb.open(path)
                self.assertEqual(db.sql("SELECT count(*) FROM events"), [(events,)])
                self.assertIn("send", db.strings())
                db.close()
                self.assertEqual(sorted(os.listdir(d)), before)

    def test_sql_connection_is_hardened(self):
        # trusted_schema off and DEFENSIVE on, as tracedb's own connections (docs/security.md).
        db = tracedb.open(self.db)
        self.assertEqual(db.sql("PRAGMA trusted_schema"), [(0,)])
        # DEFENSIVE ignores journal_mode=OFF (a connection without it answers "off").
        self.assertEqual(db.sql("PRAGMA journal_mode = OFF"), [("delete",)])
        db.close()


@unittest.skipUnless(HAVE_NUMPY, "numpy is not installed")
class LargeColumnsTest(unittest.TestCase):
    """Columns of 2 MiB and more come from a mapping of huge pages (python/src/event_columns.h
    Buffer), not the heap: 300,000 events (2.4 MB per int64 column) read whole equal what the
    SQL path sums over the same database."""

    def test_large_columns_equal_the_sql_path(self):
        tmp = tempfile.mkdtemp(prefix="tracedb-read-large-")
        try:
            seg = os.path.join(tmp, "seg")
            code = textwrap.dedent(f"""
                import tracedb
                tracedb.start({seg!r})
                for i in range(300000):
                    with tracedb.span("s", cat="compute"):
                        pass
                tracedb.stop()
            """)
            env = dict(os.environ, TRACEDB_RANK="0", TRACEDB_WORLD_SIZE="1")
            env.pop("TRACEDB_DIR", None)
            subprocess.run([PYTHON, "-c", code], env=env, check=True, timeout=300)
            db = os.path.join(tmp, "job.tdb")
            subprocess.run([TRACEDB_BIN, "compact", seg, "-o", db], check=True,
                           capture_output=True, timeout=300)
            cols = tracedb.open(db).events(columns=["id", "ts", "dur"], pandas=False)
            q = subprocess.run([TRACEDB_BIN, "query", "--format", "csv", db,
                                "SELECT count(*), sum(id), sum(ts % 1000000007), sum(dur) "
                                "FROM events"],
                               capture_output=True, text=True, timeout=120, check=True)
            want = [int(x) for x in q.stdout.splitlines()[1].split(",")]
            self.assertEqual(want[0], 300000)
            got = [len(cols["ts"]), int(cols["id"].astype(object).sum()),
                   int((cols["ts"] % 1000000007).astype(object).sum()),
                   int(cols["dur"].astype(object).sum())]
            self.assertEqual(got, want)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
