"""DDP over sub-groups, for test_ddp.py (4 ranks): ranks 0 and 1 train one model over the group
[0, 1], ranks 2 and 3 another over [2, 3]; 3 steps."""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
low, high = dist.new_group([0, 1]), dist.new_group([2, 3])
group = low if rank < 2 else high
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
ddp = DDP(model, process_group=group)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    ddp(torch.randn(4, 8)).sum().backward()
    opt.step()
dist.destroy_process_group()
