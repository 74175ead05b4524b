#!/usr/bin/python3
"""examples/pytorch_elastic.yaml through a grow, a shrink and a grow on a `trainyard up` cluster.

Starts `trainyard up --nodes 1` (32 cores) with elasticGrowAfterMs: 5000, holds 29 cores with a
filler job so the PyTorch DDP example (rank 0 "master" + 1..3 workers, 1 core each; epochs slowed
to 4 s by EPOCH_SLEEP_MS) starts at 2 ranks; kills the filler (the job grows to 4 ranks), submits
a production job of 29 cores (the job is preempted and placed again at 2 ranks) that ends after
25 s (it grows to 4 again), and waits for the job to succeed. Prints the job's resizes with the
time since the start, then each rank's attempts as its log says them (WORLD_SIZE, where it
resumed, the losses), and exits non-zero unless the job ended SUCCEEDED at membership epoch 4
with its last loss at most 0.05 (docs/examples.md). Usage: bench/elastic_pytorch.py [--trainyard PATH]
"""
import argparse
import os
import re
import subprocess
import time

from up_cluster import UpCluster, wait

parser = argparse.ArgumentParser()
parser.add_argument("--trainyard", default=os.path.join(os.path.dirname(__file__), "..", "build", "release",
                                                        "trainyard"))
args = parser.parse_args()
BIN = os.path.abspath(args.trainyard)
SPEC = os.path.join(os.path.dirname(BIN), "examples", "pytorch_elastic.yaml")  # absolute paths, written by the build
JOB = "pytorch-elastic"

t_start = time.monotonic()


def say(*what):
    print(f"[{time.monotonic() - t_start:6.1f} s]", *what, flush=True)


with UpCluster(BIN, nodes=1, prefix="ty-elastic-torch-", config="elasticGrowAfterMs: 5000\n") as c:
    spec = open(SPEC).read().replace("    restartPolicy: OnFailure\n",
                                     "    restartPolicy: OnFailure\n    env: {EPOCH_SLEEP_MS: '4000'}\n")
    filler = "name: filler\nreplicas:\n  worker:\n    resources: {cpu: 29, memory: 1Gi}\n    command: [sleep, '3600']\n"
    prod = ("name: prod\npriority: production\nreplicas:\n  worker:\n    resources: {cpu: 29, memory: 1Gi}\n"
            "    command: [sleep, '25']\n")
    def at_epoch(n):
        d = c.describe(JOB)
        return d["membership_epoch"] >= n and d["state"] == "RUNNING"

    c.submit(filler)
    wait("the filler to run", lambda: c.describe("filler")["state"] == "RUNNING")
    c.submit(spec)
    wait("epoch 1", lambda: at_epoch(1), 120)
    say("epoch 1 runs")
    time.sleep(8)
    c.cli("kill", "filler")
    say("filler killed")
    wait("epoch 2", lambda: at_epoch(2), 120)
    say("epoch 2 runs")
    time.sleep(6)
    c.submit(prod)
    say("production job submitted")
    wait("epoch 3", lambda: at_epoch(3), 120)
    say("epoch 3 runs")
    wait("the job to end", lambda: c.describe(JOB)["state"] in ("SUCCEEDED", "FAILED", "KILLED"), 600)
    d = c.describe(JOB)
    say(f"{d['state']} at membership epoch {d['membership_epoch']}: {d.get('reason', '')}")
    for e in d["events"]:
        if e["kind"] in ("resizing", "preempted", "membership"):
            print(f"  {e['kind']}: {e['text'][:110]}")
    losses = []
    for task in ("master/0", "worker/0", "worker/1", "worker/2"):
        for attempt in range(8):
            r = subprocess.run([BIN, "logs", JOB, task, "--attempt", str(attempt)], env=c.env, capture_output=True,
                               text=True, timeout=60)
            lines = [l for l in r.stdout.splitlines() if re.search(r"joined|resumed|epoch \d+ loss|done", l)]
            if lines:
                print(f"  {task} attempt {attempt}: {' / '.join(lines)}")
            if task == "master/0":
                losses += [float(m) for m in re.findall(r"epoch \d+ loss ([0-9.]+)", r.stdout)]
    ok = d["state"] == "SUCCEEDED" and d["membership_epoch"] == 4 and losses and losses[-1] <= 0.05
    print(f"last loss {losses[-1] if losses else None}; {'as stated' if ok else 'NOT as stated'}")
    raise SystemExit(0 if ok else 1)
