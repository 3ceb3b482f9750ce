"""torch.distributed operations with known groups, peers and roots, for test_ddp.py: 4 ranks.
Writes nothing of its own; tracedb records it with no code change."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(256)                                   # 1024 bytes
dist.all_reduce(t)                                    # world, seq 0
dist.broadcast(t, src=2)                              # world, root 2
odd = dist.new_group([1, 3])                          # comm WORLD+1 on ranks 1 and 3
even = dist.new_group(ranks=[0, 2])                   # comm WORLD+2 on ranks 0 and 2
if rank in (1, 3):
    dist.all_reduce(torch.ones(16), group=odd)        # 64 bytes
    dist.broadcast(torch.ones(8), 3, odd)             # root: group rank 1
else:
    dist.all_reduce(torch.ones(32), group=even)       # 128 bytes
if rank == 0:
    dist.send(torch.ones(10), dst=1)                  # 40 bytes
    dist.isend(torch.ones(5), 3).wait()               # 20 bytes
elif rank == 1:
    dist.recv(torch.zeros(10), src=0)
elif rank == 3:
    dist.irecv(torch.zeros(5), src=0).wait()
dist.barrier()
dist.destroy_process_group()
