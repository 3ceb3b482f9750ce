"""Many asynchronous collectives in flight at once, for test_ddp.py (4 ranks): 60 allreduces of
distinct sizes issued back to back, half through torch.distributed (labelled by tracedb's
wrappers) and half straight on the process group object (from C++'s point of view: what DDP's
Reducer does), so that gloo's two worker threads start them in any order."""
import os

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
pg = dist.distributed_c10d._get_default_group()
works = []
for i in range(60):
    t = torch.ones(i + 1)                     # 4 * (i + 1) bytes: the issue order, in bytes
    if i % 2:
        works.append(pg.allreduce([t]))       # no Python wrapper around it
    else:
        works.append(dist.all_reduce(t, async_op=True))
for w in works:
    w.wait()
dist.destroy_process_group()
# What the observer could not put back in issue order (test_ddp.py reads it).
import tracedb._tracedb_torch as observer  # noqa: E402
# (One write(2) of the whole line: the four ranks share the pipe, and a pipe write of at most
# PIPE_BUF bytes is never interleaved with another.)
os.write(1, ("async_ops rank %d late_starts %d\n" % (int(os.environ["RANK"]),
                                                     observer.stats()["late_starts"])).encode())
