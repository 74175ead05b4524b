#!/usr/bin/python3
"""PyTorch DDP example for Trainyard (docs/examples.md).

Trains a small two-layer network on a synthetic regression data set (fixed
seed) with DistributedDataParallel over gloo on CPU. Each rank is one
Trainyard task started with the env:// variables of `framework: pytorch`
(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE). Rank 0 writes a checkpoint
after every epoch to TRAINYARD_CHECKPOINT_DIR atomically (write a temporary
file, then rename); on start every rank restores from it if one exists and
prints "resumed from epoch K". Prints "epoch N loss X" per epoch (flushed).
Run it with Debian's /usr/bin/python3 (python3-torch); ranks are launched
directly, without torchrun.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

CHECKPOINT = "pytorch_ddp.pt"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--epoch-sleep-ms", type=int, default=int(os.environ.get("EPOCH_SLEEP_MS", "0")))
    return p.parse_args()


def require_env(name):
    value = os.environ.get(name)
    if not value:
        sys.exit(f"train.py: {name} is not set: run this as a Trainyard task of a "
                 f"`framework: pytorch` job (or set the env:// variables yourself)")
    return value


def make_dataset(samples):
    g = torch.Generator().manual_seed(20261129)
    x = torch.randn(samples, 16, generator=g)
    w = torch.randn(16, 1, generator=g)
    y = torch.tanh(x @ w) + 0.05 * torch.randn(samples, 1, generator=g)
    return x, y


def load_checkpoint(path, model, opt):
    if not os.path.exists(path):
        return 0
    state = torch.load(path)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    return state["epoch"]


def save_checkpoint(path, model, opt, epoch):
    tmp = f"{path}.tmp.{os.getpid()}"
    torch.save({"epoch": epoch, "model": model.state_dict(), "optimizer": opt.state_dict()}, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def main():
    args = parse_args()
    rank = int(require_env("RANK"))
    world = int(require_env("WORLD_SIZE"))
    require_env("MASTER_ADDR")
    require_env("MASTER_PORT")
    ckpt_dir = require_env("TRAINYARD_CHECKPOINT_DIR")
    os.makedirs(ckpt_dir, exist_ok=True)
    ckpt = os.path.join(ckpt_dir, CHECKPOINT)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    print(f"rank {rank} of {world} joined {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    start = load_checkpoint(ckpt, model, opt)  # before DDP: it broadcasts rank 0's weights
    if start > 0:
        print(f"resumed from epoch {start}", flush=True)
    ddp = DDP(model)
    x, y = make_dataset(args.samples)
    shard = torch.arange(rank, args.samples, world)
    loss_fn = torch.nn.MSELoss()
    for epoch in range(start + 1, args.epochs + 1):
        perm = shard[torch.randperm(len(shard), generator=torch.Generator().manual_seed(epoch))]
        for i in range(0, len(perm), args.batch):
            idx = perm[i:i + args.batch]
            opt.zero_grad()
            loss_fn(ddp(x[idx]), y[idx]).backward()
            opt.step()
        time.sleep(args.epoch_sleep_ms / 1000.0)
        with torch.no_grad():
            loss = loss_fn(model(x), y).item()
        if rank == 0:
            save_checkpoint(ckpt, model, opt, epoch)
        dist.barrier()  # the checkpoint of `epoch` exists before anyone trains on
        print(f"epoch {epoch} loss {loss:.4f}", flush=True)
    dist.destroy_process_group()
    print(f"rank {rank} done", flush=True)


if __name__ == "__main__":
    main()
