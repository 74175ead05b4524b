"""A task of the SDK's PyTorch test: finds its rendezvous through the job
master (Worker.torch_env), joins a gloo process group, sums every rank's
rank + 1 with all_reduce, prints the sum and completes."""
import datetime
import os

import torch
import torch.distributed as dist

import trainyard

with trainyard.Worker.from_env() as worker:
    worker.running()
    os.environ.update(worker.torch_env(timeout=60))
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    value = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)
    print(f"rank={dist.get_rank()} world={dist.get_world_size()} sum={int(value.item())}", flush=True)
    worker.barrier(timeout=60)
    dist.destroy_process_group()
