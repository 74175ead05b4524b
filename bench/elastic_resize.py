#!/usr/bin/python3
"""Grow and shrink of an 8-worker elastic job on a `trainyard up` cluster (docs/elastic.md).

Starts `trainyard up --nodes 2` (8 simulated GPUs per node) with a server config of
elasticGrowAfterMs: 0 and submits an elastic job: `worker: {count: 8, minCount: 4}`, 2 GPUs per
worker, shell workers that count steps and save when their master orders a checkpoint
(`trainyard worker checkpoint-requested` / `checkpoint-done`), resuming at the step saved. A
filler job holds one node's 8 GPUs, so the job starts at 4. Then, per run, each step once the
job's workers have been stepping for 3 s at their size:
  * grow 4 -> 8: the job holding the other node (the filler, later the production job) is
    killed; timed until `describe` shows the job's next membership epoch with 8 workers
    RUNNING. "stop" is the part from the `resizing` event to the `membership` event (the
    checkpoint and the stop of the 4 that ran; the server's clock);
  * shrink 8 -> 4: a production job of 8 GPUs is submitted; timed until the production job
    and the job's next epoch with 4 workers both run.
Prints each figure's median and spread. Usage: bench/elastic_resize.py [--runs 5] [--trainyard PATH]
"""
import argparse
import os
import statistics
import time

from up_cluster import UpCluster, wait

parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=5)
parser.add_argument("--events", action="store_true", help="print each grow's events, ms after its resizing event")
parser.add_argument("--trainyard", default=os.path.join(os.path.dirname(__file__), "..", "build", "release",
                                                        "trainyard"))
args = parser.parse_args()
if not 1 <= args.runs <= 50:
    raise SystemExit("--runs: 1..50")
BIN = os.path.abspath(args.trainyard)

WORKER = (f'step=${{TRAINYARD_RESUME_STEP:-0}}; {BIN} worker state RUNNING || exit 1; '
          f'while true; do step=$((step+1)); sleep 0.1; '
          f'if {BIN} worker checkpoint-requested > /dev/null; then {BIN} worker checkpoint-done $step || exit 1; fi; '
          f'done')
ELASTIC = f"""name: elastic
replicas:
  worker:
    count: 8
    minCount: 4
    resources: {{gpus: 2}}
    command: [sh, -c, '{WORKER}']
"""


def holder(name, priority):
    return (f"name: {name}\npriority: {priority}\nreplicas:\n  worker:\n    resources: {{gpus: 8}}\n"
            f"    command: [sleep, '3600']\n")


def at_size(c, job, epoch, workers):
    """Whether `job` runs its membership epoch `epoch` (or later) with `workers` workers running."""
    d = c.describe(job)
    running = sum(1 for t in d["tasks"] if t.get("role") == "worker" and t.get("state") == "RUNNING")
    return d.get("membership_epoch", 0) >= epoch and running == workers and d.get("state") == "RUNNING"


def running(c, job):
    return c.describe(job).get("state") == "RUNNING"


def event_ms(d, kind):
    times = [e["time_unix_ms"] for e in d["events"] if e["kind"] == kind]
    return times[-1] if times else None


# The job's workers have been stepping this long at its size before each grow or shrink (the
# server's elasticGrowAfterMs is 0: the grow starts as soon as the room appears).
STEADY = 3
config = "elasticGrowAfterMs: 0\npreemptionGraceMs: 60000\n"
grow, stop, shrink = [], [], []
with UpCluster(args.trainyard, nodes=2, prefix="ty-elastic-bench-", config=config) as c:
    c.submit(holder("filler", "iteration"))
    wait("the filler to run", lambda: running(c, "filler"))
    c.submit(ELASTIC)
    wait("the job to run at 4", lambda: at_size(c, "elastic", 1, 4), timeout=120)
    holding = "filler"
    for run in range(args.runs):
        epoch = c.describe("elastic")["membership_epoch"]
        time.sleep(STEADY)
        t0 = time.monotonic()
        c.cli("kill", holding)
        t1 = wait("the job to grow to 8", lambda: at_size(c, "elastic", epoch + 1, 8), timeout=120)
        d = c.describe("elastic")
        grow.append((t1 - t0) * 1000)
        stop.append(event_ms(d, "membership") - event_ms(d, "resizing"))
        if args.events:
            t_resize = event_ms(d, "resizing")
            for e in d["events"]:
                if e["time_unix_ms"] >= t_resize:
                    print(f"  +{e['time_unix_ms'] - t_resize} ms {e['kind']}: {e['text'][:100]}")
        holding = f"urgent-{run}"
        epoch = d["membership_epoch"]
        time.sleep(STEADY)
        t0 = time.monotonic()
        c.submit(holder(holding, "production"))
        t1 = wait("the job to shrink to 4", lambda: at_size(c, "elastic", epoch + 1, 4) and running(c, holding),
                  timeout=120)
        shrink.append((t1 - t0) * 1000)
        print(f"run {run + 1}: grow 4->8 {grow[-1]:.0f} ms (stop {stop[-1]:.0f} ms), "
              f"shrink 8->4 {shrink[-1]:.0f} ms", flush=True)


def line(name, xs):
    return f"{name}: median {statistics.median(xs):.0f} ms (min {min(xs):.0f}, max {max(xs):.0f}, {len(xs)} runs)"


print(line("grow 4->8, holder killed -> 8 workers running", grow))
print(line("  of which resizing -> placed again (checkpoint and stop)", stop))
print(line("shrink 8->4, production submitted -> it and 4 workers running", shrink))
