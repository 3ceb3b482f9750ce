"""DDP training step time with and without the PyTorch capture: examples/ddp_train.py, 4 local
ranks over gloo, alternately plain and recorded (the environment `tracedb record --nproc` gives:
TRACEDB_DIR, the preloaded recorder and the start-up hook on PYTHONPATH). Prints the median step
time of each and the ratio. The step time is the example's own (rank 0, training loop only).

    /usr/bin/python3 bench/python_ddp_overhead.py --build build [--runs 5] [--steps 40]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import shutil


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(example, ranks, steps, extra_env, tmp):
    report = os.path.join(tmp, "report.json")
    port = str(free_port())
    procs = []
    for r in range(ranks):
        env = dict(os.environ)
        env.pop("TRACEDB_DIR", None)
        env.update(extra_env)
        env.update(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(ranks),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable, example, "--steps", str(steps),
                                       "--report", report], env=env,
                                      stdout=subprocess.DEVNULL))
    if any(p.wait() != 0 for p in procs):
        raise SystemExit("a rank failed")
    with open(report) as f:
        return json.load(f)["step_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--ranks", type=int, default=4)
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    example = os.path.join(root, "examples", "ddp_train.py")
    build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="tracedb-ddp-bench-")
    recorded = {
        "TRACEDB_DIR": os.path.join(tmp, "segments"),
        "LD_PRELOAD": os.path.join(build, "libtracedb.so"),
        "PYTHONPATH": os.path.join(build, "python", "_boot") + ":" + os.path.join(build, "python"),
    }
    plain, traced = [], []
    try:
        for _ in range(a.runs):
            plain.append(run(example, a.ranks, a.steps, {}, tmp))
            shutil.rmtree(recorded["TRACEDB_DIR"], ignore_errors=True)
            traced.append(run(example, a.ranks, a.steps, recorded, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    p, t = statistics.median(plain), statistics.median(traced)
    print(f"examples/ddp_train.py: {a.ranks} ranks, {a.steps} steps, {a.runs} runs each "
          f"(alternating), median ms/step")
    print(f"  without capture {p * 1000:8.2f}   runs: {' '.join(f'{x*1000:.1f}' for x in plain)}")
    print(f"  with capture    {t * 1000:8.2f}   runs: {' '.join(f'{x*1000:.1f}' for x in traced)}")
    print(f"  ratio           {t / p:8.3f}  ({(t / p - 1) * 100:+.1f}%)")


if __name__ == "__main__":
    main()
