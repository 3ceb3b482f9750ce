"""tracedb: record spans, steps and communication from Python into a tracedb trace.

    import tracedb
    tracedb.start("traces")              # or set TRACEDB_DIR: recording starts at import
    with tracedb.span("forward", cat="compute"):
        ...
    @tracedb.trace
    def train_step(batch): ...
    tracedb.step(n)                      # the training step number (and the step window)

Every call is a thin wrapper over the recorder's C ABI (recorder/include/tracedb/recorder.h),
implemented in the `_tracedb` extension; none of them blocks or raises on the recording path.
`tracedb.torch` records torch.distributed jobs with no code change (see docs/python.md).
"""

import functools as _functools

from tracedb._tracedb import (  # noqa: F401  (the public API)
    CAT_COMM, CAT_COMPUTE, CAT_CUDA, CAT_MPI, CAT_NCCL, CAT_PHASE, CAT_STEP, CAT_USER,
    begin, clock_sync, comm_define, complete, counter, counters, enabled, end, flush, instant,
    intern, lane, now, rank, span, start, step, stop, thread_name, trigger, world_size,
)

__all__ = [
    "start", "stop", "flush", "enabled", "rank", "world_size", "now", "intern", "lane",
    "thread_name", "span", "trace", "begin", "end", "instant", "complete", "counter", "step",
    "clock_sync", "comm_define", "counters", "trigger",
    "CAT_USER", "CAT_COMPUTE", "CAT_COMM", "CAT_PHASE", "CAT_MPI", "CAT_NCCL", "CAT_CUDA",
    "CAT_STEP",
]


def trace(fn=None, *, name=None, cat=None, lane=None):
    """Decorator: records each call of the function as a span named after it.

        @tracedb.trace
        def forward(x): ...

        @tracedb.trace(name="loader", cat="phase")
        def next_batch(): ...
    """
    def wrap(f):
        span_name = name if name is not None else getattr(f, "__qualname__", f.__name__)
        if cat is None and lane is None:
            @_functools.wraps(f)
            def traced(*args, **kwargs):
                with span(span_name):
                    return f(*args, **kwargs)
        else:
            @_functools.wraps(f)
            def traced(*args, **kwargs):
                with span(span_name, cat, lane):
                    return f(*args, **kwargs)
        return traced

    if fn is not None:
        return wrap(fn)
    return wrap


def open(path):  # noqa: A001  (tracedb.open)
    """Opens a trace database for reading (tracedb.read.Database): db.sql(...) returns rows,
    db.events(columns=[...], where={...}) NumPy arrays or a pandas DataFrame."""
    from tracedb import read
    return read.open(path)


__all__.append("open")
