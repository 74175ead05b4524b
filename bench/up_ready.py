#!/usr/bin/python3
"""`trainyard up` to a ready cluster: seconds from launch to its banner.

Each run starts `trainyard up --nodes N` in a fresh directory (so a new CA
and certificates are made each time, as on a first start), waits for the
"Trainyard is up" line, and stops it with Ctrl-C. Prints every run and the
median. Usage: bench/up_ready.py [--runs 5] [--nodes 2] [--trainyard PATH]
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=5)
parser.add_argument("--nodes", type=int, default=2)
parser.add_argument("--trainyard", default=os.path.join(os.path.dirname(__file__), "..", "build", "release", "trainyard"))
args = parser.parse_args()

times = []
for _ in range(args.runs):
    d = tempfile.mkdtemp(prefix="trainyard-up-bench-")
    start = time.monotonic()
    p = subprocess.Popen([args.trainyard, "up", "--nodes", str(args.nodes), "--data-dir", d + "/.trainyard"],
                         cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        if line.startswith("Trainyard is up"):
            times.append(time.monotonic() - start)
            break
    p.send_signal(signal.SIGINT)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    shutil.rmtree(d, ignore_errors=True)

if not times:
    raise SystemExit("up never printed its banner")
print("up to ready, %d nodes: %s s; median %.3f s" % (args.nodes, ", ".join("%.3f" % t for t in times),
                                                       statistics.median(times)))
