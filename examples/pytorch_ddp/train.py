#!/usr/bin/python3
"""PyTorch DDP example for Trainyard (docs/examples.md).

Trains a small two-layer network on a synthetic regression data set (fixed
seed) with DistributedDataParallel over gloo on CPU. Each rank is one
Trainyard task started with the env:// variables of `framework: pytorch`
(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE). Rank 0 writes a checkpoint
after every epoch to TRAINYARD_CHECKPOINT_DIR atomically (write a temporary
file, then rename); on start every rank restores from it if one exists and
prints "resumed from epoch K" (at an epoch's end) or "resumed from step S"
(inside one). Prints "epoch N loss X" per epoch (flushed). Run it with
Debian's /usr/bin/python3 (python3-torch); ranks are launched directly,
without torchrun.

Coordinated checkpoints (docs/jobmaster.md, "Checkpoints"): when the job has
a master (`jobmaster: true` in its spec, TRAINYARD_JOB_MASTER set), every
rank registers with it through the Python SDK (`import trainyard`: put the
build's python folder on PYTHONPATH). Before each step rank 0 looks whether
the job is ordered to checkpoint and broadcasts the order's id, so all ranks
stop at the same step; rank 0 saves that step, every rank reports it, and the
ranks wait to be stopped (a preemption or a time limit stops the job once all
saved). The next start resumes at that step: the checkpoint file's (the
server's TRAINYARD_RESUME_STEP says the same unless the ranks trained on and
saved again; the file is the newer).

Elastic (docs/elastic.md, examples/pytorch_elastic.yaml): each start takes
its WORLD_SIZE as it is; a checkpoint saved at another size resumes at the
same place in its epoch (each rank's shard, and so the steps per epoch,
follow the size).
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
    p.add_argument("--step-sleep-ms", type=int, default=0, help="extra milliseconds per step")
    p.add_argument("--step-file", default="", help="rewrite this file with the steps done after each step "
                   "(RANK is replaced by the rank), and rank 0's FILE.saved with the step of each checkpoint "
                   "it saves, for measuring work lost")
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


def load_checkpoint(path, model, opt, steps_per_epoch):
    """The steps done by the checkpoint at `path` (0: none), in steps of this run's size. A
    checkpoint saved at another WORLD_SIZE (an elastic job resized, docs/elastic.md) had another
    number of steps per epoch: its place in its epoch is carried over as the same fraction."""
    if not os.path.exists(path):
        return 0
    state = torch.load(path)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    step = state.get("step", state["epoch"] * steps_per_epoch)
    saved_per_epoch = state.get("steps_per_epoch", steps_per_epoch)
    if saved_per_epoch == steps_per_epoch:
        return step
    epoch, batch = divmod(step, saved_per_epoch)
    return epoch * steps_per_epoch + batch * steps_per_epoch // saved_per_epoch


def save_checkpoint(path, model, opt, step, steps_per_epoch):
    tmp = f"{path}.tmp.{os.getpid()}"
    torch.save({"step": step, "epoch": step // steps_per_epoch, "steps_per_epoch": steps_per_epoch,
                "model": model.state_dict(), "optimizer": opt.state_dict()}, tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def saved(step_file, step):
    """Notes the step of a checkpoint just saved in STEP_FILE.saved (with --step-file)."""
    if step_file:
        with open(step_file.replace("RANK", "0") + ".saved", "w") as f:
            f.write(f"{step}\n")


def join_master():
    """The job master's link (a trainyard.Worker) when the job has one, else None."""
    if not os.environ.get("TRAINYARD_JOB_MASTER"):
        return None
    try:
        import trainyard  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        sys.exit(f"train.py: the job has a master (TRAINYARD_JOB_MASTER) but the Trainyard Python SDK cannot be "
                 f"imported ({e}): put the build's python folder on PYTHONPATH (docs/python-sdk.md)")
    w = trainyard.Worker.from_env()
    # The master waits for every rank that checkpoints; the saving is done
    # in the training loop, where all ranks stop at one step.
    w.on_checkpoint(lambda request: None)
    return w


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
    master = join_master()
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    print(f"rank {rank} of {world} joined {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
    if master is not None:
        master.running()

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    x, y = make_dataset(args.samples)
    shard = torch.arange(rank, args.samples, world)
    # Every rank takes the same number of steps per epoch (DDP's all-reduce
    # pairs them): the smallest shard's batches.
    steps_per_epoch = max(1, (args.samples // world + args.batch - 1) // args.batch)
    start = load_checkpoint(ckpt, model, opt, steps_per_epoch)  # before DDP: it broadcasts rank 0's weights
    if start > 0:
        epoch, batch = divmod(start, steps_per_epoch)
        where = f"epoch {epoch} at step {start}" if batch == 0 else \
            f"step {start} (epoch {epoch + 1}, batch {batch} of {steps_per_epoch})"
        print(f"resumed from {where}", flush=True)
    ddp = DDP(model)
    loss_fn = torch.nn.MSELoss()
    order = torch.zeros(2, dtype=torch.int64)  # the order's id and deadline (unix ms)
    perm = None
    for step in range(start, args.epochs * steps_per_epoch):
        epoch, batch = divmod(step, steps_per_epoch)
        if master is not None:
            # Rank 0 reads the order (a local read: the master pushes it);
            # the broadcast stops every rank at this same step.
            request = master.checkpoint_requested() if rank == 0 else None
            order[0] = request.order if request is not None else 0
            order[1] = int((request.deadline or 0) * 1000) if request is not None else 0
            dist.broadcast(order, 0)
            if order[0].item() > 0:
                if rank == 0:
                    save_checkpoint(ckpt, model, opt, step, steps_per_epoch)
                    saved(args.step_file, step)
                dist.barrier()  # saved before any rank reports it
                # Printed first: the last report gets the job stopped.
                print(f"rank {rank} saved step {step} as ordered; waiting to be stopped", flush=True)
                master.checkpoint_done(step, int(order[0].item()))
                # The job is stopped once every rank reported, or at the
                # order's deadline. Still running well past it (the order
                # was dropped: a server restart forgets open orders), the
                # ranks train on.
                until = order[1].item() / 1000.0 + 10
                while time.time() < until:
                    time.sleep(0.5)
                print(f"rank {rank} still running 10 s past the order's deadline: training on", flush=True)
        if perm is None or batch == 0:
            perm = shard[torch.randperm(len(shard), generator=torch.Generator().manual_seed(epoch + 1))]
        idx = perm[batch * args.batch:(batch + 1) * args.batch]
        opt.zero_grad()
        loss_fn(ddp(x[idx]), y[idx]).backward()
        opt.step()
        if args.step_file:
            with open(args.step_file.replace("RANK", str(rank)), "w") as f:
                f.write(f"{step + 1}\n")
        time.sleep(args.step_sleep_ms / 1000.0)
        if batch + 1 < steps_per_epoch:
            continue
        time.sleep(args.epoch_sleep_ms / 1000.0)
        with torch.no_grad():
            loss = loss_fn(model(x), y).item()
        if rank == 0:
            save_checkpoint(ckpt, model, opt, step + 1, steps_per_epoch)
            saved(args.step_file, step + 1)
        dist.barrier()  # the checkpoint of this epoch exists before anyone trains on
        print(f"epoch {epoch + 1} loss {loss:.4f}", flush=True)
    dist.destroy_process_group()
    if master is not None:
        master.completed()
        master.close()
    print(f"rank {rank} done", flush=True)


if __name__ == "__main__":
    main()
