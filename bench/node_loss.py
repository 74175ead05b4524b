#!/usr/bin/python3
"""A node that goes silent under a running task, on a `trainyard up` cluster.

Starts `trainyard up --nodes 2` (its server declares a node LOST after 5 s
without a heartbeat: `--node-timeout-ms 5000`) in a fresh directory and
submits a job of one 1-GPU worker (restartPolicy OnFailure). Then, per run:
stops the agent of the worker's node with SIGSTOP (a hung or cut-off host:
its task keeps running, nobody hears from it) and times
  * silent -> LOST: until `trainyard nodes -o json` shows the node LOST;
  * LOST -> running again: from there until `describe` shows the worker
    RUNNING in its next attempt on the other node (attempt NODE_LOST);
  * silent -> running again: the two together.
Then SIGCONT: the agent comes back, the server has it kill the old copy, and
the node is READY again for the next run. Prints each figure's median and
spread. Usage: bench/node_loss.py [--runs 5] [--trainyard PATH]
"""
import argparse
import json
import os
import signal
import statistics
import time

from up_cluster import UpCluster, wait

parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=5)
parser.add_argument("--trainyard", default=os.path.join(os.path.dirname(__file__), "..", "build", "release",
                                                        "trainyard"))
args = parser.parse_args()
if not 1 <= args.runs <= 50:
    raise SystemExit("--runs: 1..50")


def node_state(c, name):
    for n in json.loads(c.cli("nodes", "-o", "json"))["nodes"]:
        if n["info"]["name"] == name:
            return n["info"].get("state", "")
    return ""


def agent_pid(c, node):
    """The pid of up's agent child for `node`: its command line names the node's data dir."""
    want = os.path.join(c.dir, ".trainyard", node).encode()
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{p}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if ppid == c.up.pid and b"agent" in argv and want in argv:
            return int(p)
    raise SystemExit(f"no agent process of {node} under up ({c.up.pid})")


stopped = []  # agents this script stopped, continued before it exits
with UpCluster(args.trainyard, nodes=2, prefix="trainyard-node-loss-bench-") as c:
    try:
        job = c.submit("name: steady\nreplicas:\n  worker:\n    resources: {cpu: 100m, memory: 64Mi, gpus: 1}\n"
                       "    command: [sleep, '3600']\n    restartPolicy: OnFailure\n")
        wait("the job to run", lambda: c.task(job).get("state") == "RUNNING")
        lost, after, total = [], [], []
        for run in range(args.runs):
            t = c.task(job)
            node, attempt = t["node"], t.get("attempt", 0)
            pid = agent_pid(c, node)
            t0 = time.monotonic()
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
            t_lost = wait("the node LOST", lambda: node_state(c, node) == "LOST", timeout=90)

            def moved():
                w = c.task(job)
                return w.get("state") == "RUNNING" and w.get("attempt", 0) > attempt and w.get("node") != node
            t_run = wait("the worker running again", moved, timeout=90)
            lost.append(t_lost - t0)
            after.append(t_run - t_lost)
            total.append(t_run - t0)
            w = c.task(job)
            last = (w.get("attempts") or [{}])[-1].get("attempt_class")
            print(f"run {run + 1}: {node} silent -> LOST {lost[-1] * 1000:.0f} ms, running on {w['node']} "
                  f"{after[-1] * 1000:.0f} ms later ({last})", flush=True)
            os.kill(pid, signal.SIGCONT)
            stopped.remove(pid)
            wait(f"{node} READY again", lambda: node_state(c, node) == "READY", timeout=90)
        for name, xs in (("silent -> LOST (the 5 s node timeout)", lost), ("LOST -> running again", after),
                         ("silent -> running again", total)):
            print(f"{name}: median {statistics.median(xs) * 1000:.0f} ms, min {min(xs) * 1000:.0f}, "
                  f"max {max(xs) * 1000:.0f} ({len(xs)} runs)")
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except OSError:
                pass
