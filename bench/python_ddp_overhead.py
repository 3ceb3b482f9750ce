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
        r = json.load(f)
    return r["step_s"], r["step_cpu_s"]


OP_COST = r"""
import os, sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
for _ in range(200):
    dist.all_reduce(t)
cpu = []
for _ in range(5):
    c0 = time.process_time_ns()
    for _ in range(int(sys.argv[1])):
        dist.all_reduce(t)
    cpu.append((time.process_time_ns() - c0) / int(sys.argv[1]))
print(sorted(cpu)[len(cpu) // 2])
"""


def op_cost(n, extra_env):
    """CPU ns (all threads of the process) per dist.all_reduce of one float in a 1-rank gloo
    group (median of 5 loops): CPU time, because wall time on a shared machine mostly measures
    the other jobs."""
    env = dict(os.environ)
    env.pop("TRACEDB_DIR", None)
    env.update(extra_env)
    env.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    out = subprocess.run([sys.executable, "-c", OP_COST, str(n)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return float(out.split()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--op-cost", type=int, default=0,
                    help="instead: ns per all_reduce call (1 rank), N calls per loop")
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
    if a.op_cost:
        try:
            for _ in range(a.runs):
                plain.append(op_cost(a.op_cost, {}))
                shutil.rmtree(recorded["TRACEDB_DIR"], ignore_errors=True)
                traced.append(op_cost(a.op_cost, recorded))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        p, t = statistics.median(plain), statistics.median(traced)
        print(f"dist.all_reduce(1 float), 1 rank, gloo: {a.runs} runs each, median CPU ns/call "
              f"(all threads)")
        print(f"  without capture {p:10.0f}   runs: {' '.join(f'{x:.0f}' for x in plain)}")
        print(f"  with capture    {t:10.0f}   runs: {' '.join(f'{x:.0f}' for x in traced)}")
        print(f"  added per call  {t - p:10.0f} ns")
        return
    try:
        for _ in range(a.runs):
            plain.append(run(example, a.ranks, a.steps, {}, tmp))
            shutil.rmtree(recorded["TRACEDB_DIR"], ignore_errors=True)
            traced.append(run(example, a.ranks, a.steps, recorded, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"examples/ddp_train.py: {a.ranks} ranks, {a.steps} steps, {a.runs} runs each "
          f"(alternating), median ms per step of rank 0: wall, and CPU (its threads)")
    for i, what in ((0, "wall"), (1, "CPU ")):
        p = statistics.median(x[i] for x in plain)
        t = statistics.median(x[i] for x in traced)
        print(f"  {what} without capture {p * 1000:8.2f}   runs: "
              f"{' '.join(f'{x[i] * 1000:.1f}' for x in plain)}")
        print(f"  {what} with capture    {t * 1000:8.2f}   runs: "
              f"{' '.join(f'{x[i] * 1000:.1f}' for x in traced)}")
        print(f"  {what} ratio           {t / p:8.3f}  ({(t / p - 1) * 100:+.1f}%)")


if __name__ == "__main__":
    main()
