"""A small DistributedDataParallel job over gloo (CPU) with known answers put in, for the PyTorch
tests of the why analyses (docs/why.md) and of the hang forensics (docs/hang.md); driven by
tests/torch_test.py under `tracedb record --nproc 4`, which records it with no tracedb code in
it but the `load_batch`/`fetch_batch` spans (tracedb's Python API) that name the data loading.

Each step: optimizer.zero_grad (the capture starts the step there), a data-loading span, the DDP
forward, loss.backward() (DDP's Reducer allreduces the one gradient bucket from it), the optimizer
step. The model is tiny (two linear layers around a `Delay` module that sleeps in its forward or
backward when told): a step is about a millisecond of compute.

  torch_job.py why STEPS [STEP:RANK:PHASE:MS ...]
      PHASE is forward, backward or load_batch: at STEP, RANK sleeps MS more in that phase
      (forward: inside the DDP forward; backward: inside the backward pass, before the last
      layer's gradient is ready and so before the bucket's allreduce; load_batch: inside the
      span). The others then wait in that step's gloo:all_reduce.
  torch_job.py hang STEP DIR
      at STEP, rank 2 blocks in dist.recv from rank 3 (which never sends) inside `fetch_batch`;
      the others block in the step's bucket allreduce, inside `backward`. Each rank writes
      DIR/expect-RANK.txt first: "CALL PEER STEP" and the open spans it will be in (the known
      answer); rank 2 prints "hang: rank 2 blocks at step N". The job runs until it is stopped.
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import tracedb


class _DelayFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, fwd_s, bwd_s):
        ctx.bwd_s = bwd_s
        if fwd_s > 0:
            time.sleep(fwd_s)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        if ctx.bwd_s > 0:
            time.sleep(ctx.bwd_s)
        return grad, None, None


class Delay(nn.Module):
    """Identity that sleeps `fwd_s` in forward and `bwd_s` in backward (set per step)."""

    def __init__(self):
        super().__init__()
        self.fwd_s = 0.0
        self.bwd_s = 0.0

    def forward(self, x):
        return _DelayFn.apply(x, self.fwd_s, self.bwd_s)


def parse_delays(args):
    delays = {}
    for a in args:
        step, rank, phase, ms = a.split(":")
        if phase not in ("forward", "backward", "load_batch"):
            sys.exit("torch_job: unknown phase %r in %r" % (phase, a))
        delays[(int(step), int(rank), phase)] = float(ms) / 1000.0
    return delays


def expect(out_dir, rank, line):
    path = os.path.join(out_dir, "expect-%d.txt" % rank)
    with open(path + ".tmp", "w") as f:
        f.write(line)
    os.replace(path + ".tmp", path)


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("why", "hang"):
        sys.exit("usage: torch_job.py why STEPS [STEP:RANK:PHASE:MS ...] | hang STEP DIR")
    mode = sys.argv[1]
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    delay = Delay()
    model = nn.Sequential(nn.Linear(16, 32), delay, nn.ReLU(), nn.Linear(32, 4))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loss_fn = nn.MSELoss()
    gen = torch.Generator().manual_seed(100 + rank)
    if mode == "why":
        steps, delays, hang_at, out_dir = int(sys.argv[2]), parse_delays(sys.argv[3:]), -1, None
    else:
        steps, delays, hang_at, out_dir = 1 << 30, {}, int(sys.argv[2]), sys.argv[3]
    for step in range(steps):
        opt.zero_grad()
        name = "fetch_batch" if mode == "hang" else "load_batch"
        with tracedb.span(name, "phase"):
            x = torch.randn(8, 16, generator=gen)
            y = torch.randn(8, 4, generator=gen)
            if step == hang_at and rank == 2:
                expect(out_dir, rank, "gloo:recv 3 %d\ngloo:recv fetch_batch\n" % step)
                print("hang: rank 2 blocks at step %d" % step, flush=True)
                dist.recv(torch.zeros(1), src=3)  # rank 3 never sends
            if mode == "hang":
                time.sleep(0.002)  # steps of at least 2 ms: the flight ring's window is in time
            pause = delays.get((step, rank, "load_batch"), 0.0)
            if pause:
                time.sleep(pause)
        delay.fwd_s = delays.get((step, rank, "forward"), 0.0)
        delay.bwd_s = delays.get((step, rank, "backward"), 0.0)
        out = ddp(x)
        loss = loss_fn(out, y)
        if step == hang_at and rank != 2:
            expect(out_dir, rank, "gloo:all_reduce -1 %d\ngloo:all_reduce backward\n" % step)
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
