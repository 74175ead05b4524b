#!/usr/bin/python3
"""A faulty GPU under a running task, on a `trainyard up` cluster (docs/gpu-health.md).

Starts `trainyard up --nodes 2` (8 simulated GPUs each) in a fresh directory and
submits a job of one 1-GPU worker. Then, per run: appends an Xid 48 line (a
double-bit ECC error: the GPU is excluded) for the worker's GPU to its node's
GPU event file, as the driver would log it, and times
  * fault -> node view: until `trainyard nodes -o json` shows the fault;
  * fault -> running again: until `describe` shows the worker RUNNING in its
    next attempt, on another GPU (its attempt GPU_ERROR).
Each run leaves one more GPU out of service (at most 15 runs). Prints each
figure's median and spread. Usage: bench/gpu_fault_move.py [--runs 10] [--trainyard PATH]
"""
import argparse
import json
import os
import statistics
import time

from up_cluster import UpCluster, wait

parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=10)
parser.add_argument("--trainyard", default=os.path.join(os.path.dirname(__file__), "..", "build", "release",
                                                        "trainyard"))
args = parser.parse_args()
if not 1 <= args.runs <= 15:
    raise SystemExit("--runs: 1..15 (each run takes one of the 16 GPUs out of service)")


with UpCluster(args.trainyard, nodes=2, prefix="trainyard-gpu-fault-bench-") as c:
    job = c.submit("name: faulty\nreplicas:\n  worker:\n    resources: {cpu: 100m, memory: 64Mi, gpus: 1}\n"
                   "    command: [sleep, '3600']\n    restartPolicy: OnFailure\n")
    wait("the job to run", lambda: c.task(job).get("state") == "RUNNING")
    seen, running = [], []
    for run in range(args.runs):
        t = c.task(job)
        node, gpu, attempt = t["node"], t["gpu_mask_indices"][0], t.get("attempt", 0)
        t0 = time.monotonic()
        with open(os.path.join(c.dir, ".trainyard", node, "gpu-events"), "a") as f:
            f.write("NVRM: Xid (PCI:0000:%02x:00): 48, pid=1, name=python3, DBE (0x1)\n" % (gpu + 1))

        def shown():
            for n in json.loads(c.cli("nodes", "-o", "json"))["nodes"]:
                if n["info"]["name"] == node:
                    return any(x.get("gpu", 0) == gpu for x in n["info"].get("gpu_faults", []))
            return False
        seen.append(wait("the fault in the node view", shown) - t0)

        def moved():
            w = c.task(job)
            return w.get("state") == "RUNNING" and w.get("attempt", 0) > attempt
        running.append(wait("the worker running again", moved) - t0)
        w = c.task(job)
        last = (w.get("attempts") or [{}])[-1].get("attempt_class")
        print(f"run {run + 1}: {node} GPU {gpu} faulty -> node view {seen[-1] * 1000:.0f} ms, "
              f"running on {w['node']} GPU {w['gpu_mask_indices'][0]} after {running[-1] * 1000:.0f} ms ({last})")
    for name, xs in (("fault -> node view", seen), ("fault -> running again on a healthy GPU", running)):
        print(f"{name}: median {statistics.median(xs) * 1000:.0f} ms, min {min(xs) * 1000:.0f}, "
              f"max {max(xs) * 1000:.0f} ({len(xs)} runs)")
