"""A small data-parallel training job: an MLP on synthetic data, DistributedDataParallel over gloo
on CPU. It knows nothing of tracedb; `tracedb record` records it with no code change:

    tracedb record -o ddp.tdb --nproc 4 -- /usr/bin/python3 examples/ddp_train.py
    tracedb record -o ddp.tdb -- mpirun -np 4 /usr/bin/python3 examples/ddp_train.py

Needs RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (set by `tracedb record`, torchrun, or from an
MPI launcher's variables by tracedb's start-up hook). Options:
  --steps N          training steps (default 20)
  --bucket-mb X      DDP's bucket_cap_mb (default 0.5: several gradient buckets)
  --straggler-ms T   the last rank sleeps T ms before each forward (default 0)
  --report FILE      rank 0 writes DDP's own facts (parameter bytes, bucket sizes) as JSON
"""
import argparse
import json
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--bucket-mb", type=float, default=0.5)
    ap.add_argument("--straggler-ms", type=float, default=0.0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--report", default="")
    a = ap.parse_args()

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    # 2.2 MB of parameters: DDP's first bucket holds at most 1 MiB, the others --bucket-mb.
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    ddp = DDP(model, bucket_cap_mb=a.bucket_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(1000 + rank)

    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(a.steps):
        x = torch.randn(a.batch, 64, generator=gen)
        y = torch.randint(0, 10, (a.batch,), generator=gen)
        if a.straggler_ms > 0 and rank == world - 1:
            time.sleep(a.straggler_ms / 1000.0)
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        loss.backward()
        opt.step()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0

    # DDP's own account of its gradient buckets: as built at construction (logged by DDP, used
    # in the first step), and as rebuilt after the first step in the order the gradients became
    # ready (the parameters in reverse here), by the same assignment function DDP's Reducer uses.
    if rank == 0:
        info = ddp._get_ddp_logging_data()
        params = [p for p in model.parameters() if p.requires_grad]
        nbytes = [p.numel() * p.element_size() for p in params]
        ready = list(range(len(params)))[::-1]
        buckets, _ = dist._compute_bucket_assignment_by_size(
            [params[i] for i in ready],
            [dist._DEFAULT_FIRST_BUCKET_BYTES, int(a.bucket_mb * 1024 * 1024)])
        report = {
            "world_size": world,
            "steps": a.steps,
            "step_s": elapsed / a.steps,
            "step_cpu_s": cpu / a.steps,  # this process, all its threads
            "param_bytes": sum(nbytes),
            "buckets_first_step": [int(b) for b in str(info.get("bucket_sizes", "")).split(",")
                                   if b],
            "buckets_rebuilt": [sum(nbytes[ready[i]] for i in b) for b in buckets],
        }
        print(f"ddp_train: {world} ranks, {a.steps} steps, {report['step_s'] * 1000:.2f} ms/step, "
              f"{report['param_bytes']} parameter bytes in buckets {report['buckets_rebuilt']}",
              flush=True)
        if a.report:
            with open(a.report, "w") as f:
                json.dump(report, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
