"""The read path: a trace database's events as NumPy arrays or a pandas DataFrame.

    db = tracedb.open("job.tdb")
    db.sql("SELECT name, count(*) FROM events GROUP BY name")   # rows (list of tuples)
    cols = db.events(columns=["rank", "name", "ts", "dur"], where={"cat": "comm"}, pandas=False)
    df = db.events(where={"name": "gloo:all_reduce", "step": (10, 20)})   # a DataFrame

events() decodes the event blocks in C++ (tracedb._tracedb_read), choosing them by the zone maps
of the SQL path first; NumPy wraps the decoded buffers without a copy. sql() runs on Python's
sqlite3 with the tracedb SQLite extension loaded (the `events` table, functions and views of
docs/sql.md). Details: docs/python.md, "Reading traces".
"""
import os
import sqlite3

from tracedb import _tracedb_read

COLUMNS = ("rank", "tid", "track", "lane", "id", "name", "cat", "kind", "ts", "dur", "end_ts",
           "depth", "bytes", "peer", "tag", "comm", "seq", "flow", "value", "step")
DEFAULT_COLUMNS = ("rank", "tid", "lane", "name", "cat", "kind", "ts", "dur", "depth", "bytes",
                   "peer", "comm", "seq", "step")
KINDS = ("span", "instant", "counter", "flow")
_DTYPES = {"i": "int32", "q": "int64", "I": "uint32", "B": "uint8", "d": "float64"}
_FILTERS = ("rank", "name", "cat", "kind", "ts", "dur", "step")


def _uri(path, params="mode=ro"):
    """A SQLite URI for a file path: every character SQLite would read as syntax ('?', '#', '%')
    percent-escaped, so that "job#1.tdb" opens job#1.tdb and never creates a file "job"."""
    from urllib.parse import quote
    return f"file:{quote(os.path.abspath(path), safe='/')}?{params}"


def _extension_path():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "libtracedb_sqlite.so")
    return path if os.path.exists(path) else None


class Database:
    """A trace database opened for reading (tracedb.open)."""

    def __init__(self, path):
        if not os.path.exists(path):
            raise FileNotFoundError(f"tracedb.open: {path}: no such file")
        self.path = os.fspath(path)
        self._con = None
        self._strings = None
        self._ids = None

    # ---- SQL ----
    def connection(self):
        """The sqlite3 connection (read-only) with the tracedb extension loaded."""
        if self._con is None:
            con = sqlite3.connect(_uri(self.path), uri=True)
            ext = _extension_path()
            if ext is None:
                raise RuntimeError("tracedb: libtracedb_sqlite.so is not installed beside the "
                                   "package; db.sql() needs it (db.events() does not)")
            con.enable_load_extension(True)
            con.load_extension(ext)
            con.enable_load_extension(False)
            # As tracedb's own connections (docs/security.md): the file's schema is untrusted.
            con.execute("SELECT tracedb_harden()")
            self._con = con
        return self._con

    def sql(self, statement, params=()):
        """Runs one SQL statement; returns its rows as a list of tuples."""
        return self.connection().execute(statement, params).fetchall()

    def close(self):
        if self._con is not None:
            self._con.close()
            self._con = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ---- columns ----
    def strings(self):
        """The interned strings: a list indexed by string id."""
        if self._strings is None:
            con = sqlite3.connect(_uri(self.path), uri=True)
            try:
                rows = con.execute("SELECT id, s FROM strings").fetchall()
            finally:
                con.close()
            # Indexed by id, sized by the row count (engine/db/block_check.h, DenseIdLimit): an id
            # beyond it (a damaged or hostile file) is left out, as by the events table.
            limit = len(rows) + 1024
            rows = [(i, s) for i, s in rows if 0 <= i <= limit]
            size = max((i for i, _ in rows), default=-1) + 1
            # ids without a string (0: "none") get unique placeholders, so that the table can be
            # the categories of a pandas Categorical; rows that point at them are made missing.
            table = [f"\0<{i}>" for i in range(size)]
            for i, s in rows:
                table[i] = s
            self._strings = table
            self._ids = {s: i for i, s in rows}
        return self._strings

    def _string_ids(self, value, what):
        self.strings()
        values = [value] if isinstance(value, str) else list(value)
        return [self._ids[v] for v in values if v in self._ids] or []

    def events(self, columns=None, where=None, pandas=None):
        """Events as columns, decoded from the blocks.

        columns: names from COLUMNS (default DEFAULT_COLUMNS).
        where: {column: value} with column one of rank, name, cat, kind (a value or a list of
          values), ts, dur, step (a value, or an inclusive (lo, hi) pair, None for an open end).
          The zone maps choose the blocks; the rows are then checked one by one in C++.
        pandas: True for a pandas.DataFrame (nullable columns as pandas' nullable dtypes, name/
          cat/kind/lane as categoricals), False for a dict of NumPy arrays (nullable columns as
          numpy.ma masked arrays, name/cat/kind/lane as object arrays of str); None: a DataFrame
          when pandas is installed.
        Row order: by rank, then block, then (thread/lane, start order): sort if you need ts order.
        """
        import numpy as np
        cols = tuple(columns) if columns is not None else DEFAULT_COLUMNS
        for c in cols:
            if c not in COLUMNS:
                raise ValueError(f"tracedb: no column {c!r} in events (one of {COLUMNS})")
        kw = {}
        for key, value in (where or {}).items():
            if key not in _FILTERS:
                raise ValueError(f"tracedb: cannot filter on {key!r} (one of {_FILTERS})")
            if key == "rank":
                kw["ranks"] = [value] if isinstance(value, int) else list(value)
            elif key in ("name", "cat"):
                kw[key + "s"] = self._string_ids(value, key)
            elif key == "kind":
                values = [value] if isinstance(value, str) else list(value)
                for v in values:
                    if v not in KINDS:
                        raise ValueError(f"tracedb: kind {v!r} is none of {KINDS}")
                kw["kinds"] = [KINDS.index(v) for v in values]
            else:
                kw[key] = (value, value) if isinstance(value, int) else tuple(value)
        n, raw, lanes, self.blocks_read, self.blocks_total = _tracedb_read.scan(
            self.path, cols, **kw)

        if pandas is None:
            import importlib.util
            pandas = importlib.util.find_spec("pandas") is not None
        out = {}
        for c in cols:
            buf, nulls = raw[c]
            fmt = memoryview(buf).format
            values = np.frombuffer(buf, dtype=_DTYPES[fmt], count=n)
            mask = np.frombuffer(nulls, dtype=np.bool_, count=n) if nulls is not None else None
            out[c] = (values, mask)
        return self._as_dataframe(out, cols, lanes) if pandas else self._as_numpy(out, cols, lanes)

    def _labels(self, c, lanes):
        import numpy as np
        if c == "kind":
            return np.array(KINDS, dtype=object)
        if c == "lane":
            return np.array(lanes, dtype=object)
        return np.array(self.strings(), dtype=object)

    def _as_numpy(self, out, cols, lanes):
        import numpy as np
        result = {}
        for c in cols:
            values, mask = out[c]
            if c in ("name", "cat", "kind", "lane"):
                labels = self._labels(c, lanes)
                if c == "lane":
                    codes = np.where(mask, 0, values) if len(labels) else np.zeros_like(values)
                    arr = labels[codes] if len(labels) else np.full(len(values), None, object)
                    result[c] = np.ma.masked_array(arr, mask=mask)
                else:
                    result[c] = labels[values]
            elif mask is not None:
                result[c] = np.ma.masked_array(values, mask=mask)
            else:
                result[c] = values
        return result

    def _as_dataframe(self, out, cols, lanes):
        import numpy as np
        import pandas as pd
        data = {}
        for c in cols:
            values, mask = out[c]
            if c in ("name", "cat", "kind", "lane"):
                labels = self._labels(c, lanes)
                codes = values.astype(np.int32, copy=False)
                if mask is not None:
                    codes = np.where(mask, -1, codes)
                if c in ("name", "cat") and len(labels) and labels[0] == "\0<0>":
                    codes = np.where(codes == 0, -1, codes)  # id 0: no string
                data[c] = pd.Categorical.from_codes(codes, categories=pd.Index(labels))
            elif mask is not None:
                if values.dtype.kind == "f":
                    data[c] = pd.arrays.FloatingArray(values, mask)
                else:
                    data[c] = pd.arrays.IntegerArray(values, mask)
            else:
                data[c] = values
        return pd.DataFrame(data, copy=False)


def open(path):  # noqa: A001  (tracedb.open, as the issue names it)
    """Opens a trace database for reading: db.sql(...), db.events(...)."""
    return Database(path)
