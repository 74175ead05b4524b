#!/usr/bin/python3
"""Launch at scale on `trainyard up`: submit to all RUNNING, kill to all gone.

Each run starts `trainyard up --nodes 4` (real agent processes, TLS on every
channel, as up always has it) in a fresh directory, submits one job of
--tasks one-process tasks (`sleep`, 100m CPU, 64Mi each), and measures
  - submit -> RUNNING: from just before `trainyard submit` runs to the
    job's "started" event (the server's clock; every task reported RUNNING);
  - submit -> processes: until --tasks `sleep` processes of this run exist
    (read from /proc);
  - kill -> gone: from just before `trainyard kill` runs until none of them
    is left (by /proc);
and whether any task was declared ended on the way (the job must reach
RUNNING with no restart and no lost task). Prints every run and the
medians. Runs alternate between the binaries given (--trainyard may be
repeated: e.g. main's build as the baseline, then this tree's).
Usage: bench/launch_scale.py [--runs 5] [--tasks 1000] [--nodes 4]
                             [--trainyard PATH]...
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request

parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=5)
parser.add_argument("--tasks", type=int, default=1000)
parser.add_argument("--nodes", type=int, default=4)
parser.add_argument("--timeout", type=float, default=120, help="seconds a run may take to start or stop its tasks")
parser.add_argument("--trainyard", action="append",
                    help="binary to measure (repeatable; default build/release/trainyard)")
args = parser.parse_args()
binaries = args.trainyard or [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "release",
                                           "trainyard")]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sleepers(tag):
    """PIDs of this run's task processes: `sleep TAG`."""
    want = ("sleep\0%s\0" % tag).encode()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                if f.read() == want:
                    pids.append(int(name))
        except OSError:
            pass
    return pids


def wait_until(cond, timeout, every=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(every)
    return False


def one_run(binary, run):
    d = tempfile.mkdtemp(prefix="trainyard-launch-bench-")
    data = d + "/.trainyard"
    up = subprocess.Popen([binary, "up", "--nodes", str(args.nodes), "--data-dir", data, "--port", str(free_port())],
                          cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    http = None
    for line in up.stdout:
        if "HTTP API and /metrics on http://" in line:
            http = line.split("http://")[1].strip().rstrip("/")
        if line.startswith("Trainyard is up"):
            break
    # Keep reading up's output so it never blocks on a full pipe.
    drain = subprocess.Popen(["cat"], stdin=up.stdout, stdout=open(d + "/up.log", "w"))
    env = dict(os.environ, TRAINYARD_CONFIG=data + "/client.yaml")
    env.pop("TRAINYARD_TOKEN", None)
    env.pop("TRAINYARD_CA_FILE", None)
    token = [l.split(":", 1)[1].strip() for l in open(data + "/client.yaml") if l.startswith("token:")][0]
    tag = str(7000 + run)
    spec = d + "/big.yaml"
    with open(spec, "w") as f:
        f.write("name: big\nreplicas:\n  worker:\n    count: %d\n    resources: {cpu: 100m, memory: 64Mi}\n"
                "    command: [sleep, \"%s\"]\n" % (args.tasks, tag))
    result = {}
    try:
        t0 = time.time()
        subprocess.run([binary, "submit", spec], env=env, check=True, stdout=subprocess.DEVNULL)
        # Every 100 ms: a scan of /proc reads every process's cmdline, and at 10 ms it
        # took a core of this machine from the cluster it measures.
        procs_ok = wait_until(lambda: len(sleepers(tag)) >= args.tasks, args.timeout, every=0.1)
        result["procs"] = time.time() - t0 if procs_ok else None

        def job():
            req = urllib.request.Request("http://%s/api/v1/jobs/big" % http,
                                         headers={"Authorization": "Bearer " + token})
            return json.load(urllib.request.urlopen(req, timeout=30))

        state = {}

        def settled():
            state["j"] = job()
            return state["j"]["state"] in ("RUNNING", "FAILED", "KILLED", "SUCCEEDED", "DEADLINE_EXCEEDED")

        wait_until(settled, args.timeout, every=0.2)
        j = state["j"]
        started = [e for e in j.get("events", []) if e.get("kind") == "started"]
        lost = [e for e in j.get("events", []) if e.get("kind") in ("task_restarted", "task_failed", "task_moved", "finished")]
        result["state"] = j["state"]
        result["running"] = (started[0]["time_unix_ms"] / 1000.0 - t0) if started and j["state"] == "RUNNING" else None
        result["lost"] = len(lost)
        for e in lost[:3]:
            print("  %s: %s" % (e.get("kind"), e.get("text")), flush=True)
        pids = sleepers(tag)
        t1 = time.time()
        subprocess.run([binary, "kill", "big"], env=env, check=True, stdout=subprocess.DEVNULL)
        gone = wait_until(lambda: not any(os.path.exists("/proc/%d" % p) for p in pids), args.timeout, every=0.05)
        result["gone"] = time.time() - t1 if gone else None
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(60)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()
        drain.wait()
        for p in sleepers(tag):  # whatever outlived the cluster
            os.kill(p, signal.SIGKILL)
        shutil.rmtree(d, ignore_errors=True)
    return result


def fmt(v):
    return "-" if v is None else "%.3f" % v


results = {b: [] for b in binaries}
for run in range(args.runs):
    for b in binaries:
        r = one_run(b, run)
        results[b].append(r)
        print("%s run %d: state %s, submit->RUNNING %s s, submit->%d processes %s s, kill->gone %s s, tasks lost %d"
              % (b, run, r.get("state"), fmt(r.get("running")), args.tasks, fmt(r.get("procs")), fmt(r.get("gone")),
                 r.get("lost", 0)), flush=True)

for b in binaries:
    rs = results[b]
    print("%s: %d tasks on %d agents (TLS), %d runs, %d reached RUNNING" %
          (b, args.tasks, args.nodes, len(rs), sum(1 for r in rs if r.get("running") is not None)))
    for key, what in (("running", "submit -> RUNNING"), ("procs", "submit -> all processes"), ("gone", "kill -> all gone")):
        vals = [r[key] for r in rs if r.get(key) is not None]
        print("  %-24s p50 %s s  (%s)" % (what, fmt(statistics.median(vals)) if vals else "-",
                                        ", ".join(fmt(v) for v in vals)))
