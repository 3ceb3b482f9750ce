"""Cost of `with tracedb.span(name):` beside a context manager that only reads
time.perf_counter_ns() twice, and beside torch.autograd.profiler.record_function (when torch is
installed). Prints ns per with-statement (median of repeats) and the ratios.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_span_bench.py [--n 1000000] [--repeat 7]

The recorder records into a temporary directory for the tracedb rows (TRACEDB_BUFFER_MB is raised
so that nothing is dropped); docs/bench-python.md has the figures.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TRACEDB_BUFFER_MB", "512")
import tracedb  # noqa: E402


class TwoClocks:
    """The floor: a context manager that does nothing but read the clock at entry and exit."""
    __slots__ = ("t0", "t1")

    def __enter__(self):
        self.t0 = time.perf_counter_ns()
        return self

    def __exit__(self, *exc):
        self.t1 = time.perf_counter_ns()
        return False


def per_call_ns(make, n):
    t0 = time.perf_counter_ns()
    for _ in range(n):
        with make():
            pass
    return (time.perf_counter_ns() - t0) / n


def empty_loop_ns(n):
    t0 = time.perf_counter_ns()
    for _ in range(n):
        pass
    return (time.perf_counter_ns() - t0) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()

    tmp = tempfile.mkdtemp(prefix="tracedb-pybench-")
    tracedb.start(tmp)
    span = tracedb.span
    cases = {
        "two perf_counter_ns (floor)": lambda: TwoClocks(),
        "tracedb.span(name)": lambda: span("forward"),
        "tracedb.span(name, cat)": lambda: span("forward", "compute"),
    }
    try:
        import torch.autograd.profiler as prof
        cases["torch record_function (no profiler)"] = lambda: prof.record_function("forward")
    except ImportError:
        print("torch not installed: record_function is not measured", file=sys.stderr)

    results = {k: [] for k in cases}
    for _ in range(a.repeat):
        for k, make in cases.items():
            results[k].append(per_call_ns(make, a.n))
    loop = statistics.median(empty_loop_ns(a.n) for _ in range(a.repeat))
    tracedb.flush()
    c = tracedb.counters()
    tracedb.stop()

    floor = statistics.median(results["two perf_counter_ns (floor)"])
    print(f"python {sys.version.split()[0]}, n={a.n}, repeat={a.repeat} (median), "
          f"empty loop {loop:.1f} ns/iter included in every row")
    print(f"{'case':40s} {'ns/with':>9s} {'x floor':>8s}")
    for k, v in results.items():
        m = statistics.median(v)
        print(f"{k:40s} {m:9.1f} {m / floor:8.2f}")
    print(f"recorder: {c['written']} events written, {c['dropped']} dropped")
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
