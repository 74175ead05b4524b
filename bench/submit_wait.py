#!/usr/bin/python3
"""`trainyard submit` as a user's shell runs it, on a `trainyard up` cluster.

Starts `trainyard up --nodes 1` in a fresh directory, then, alternating:
  * plain `trainyard submit FILE`: the client's CPU (user + system, from the
    child's rusage) and wall time per call;
  * `trainyard submit FILE --wait` of a job that runs 1 s: how long after the
    server's own "started" time (the job's event, ms since the epoch) the
    CLI printed RUNNING, i.e. what `--wait` adds to the server's answer.
  * with --callgrind, one `trainyard submit FILE` and one `trainyard --version`
    under valgrind's callgrind: instructions per call, steady on a noisy machine.
Prints every figure's median. Usage:
  bench/submit_wait.py [--runs 20] [--trainyard PATH] [--callgrind]
With --trainyard pointing at another build, the same sitting measures it too.
"""
import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

from up_cluster import free_port_pair

parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=20)
parser.add_argument("--callgrind", action="store_true",
                    help="also count the instructions of one submit and one --version per binary")
parser.add_argument("--trainyard", action="append",
                    help="binary to measure (repeat to compare builds in one sitting)")
args = parser.parse_args()
binaries = args.trainyard or [os.path.join(os.path.dirname(__file__), "..", "build", "release", "trainyard")]

def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime

d = tempfile.mkdtemp(prefix="trainyard-submit-bench-")
up_bin = binaries[0]
up = subprocess.Popen([up_bin, "up", "--nodes", "1", "--port", str(free_port_pair()), "--http-port", "0",
                       "--data-dir", d + "/.trainyard"], cwd=d, stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT, text=True)
try:
    for line in up.stdout:
        if line.startswith("Trainyard is up"):
            break
    else:
        raise SystemExit("up never printed its banner")
    env = dict(os.environ, TRAINYARD_CONFIG=d + "/.trainyard/client.yaml")
    for k in ("TRAINYARD_TOKEN", "TRAINYARD_SERVER", "TRAINYARD_CA_FILE"):
        env.pop(k, None)
    plain = os.path.join(d, "plain.yaml")
    waited = os.path.join(d, "waited.yaml")
    n = 0
    figures = {b: {"cpu": [], "wall": [], "running_after": []} for b in binaries}
    for i in range(args.runs):
        for b in binaries if i % 2 == 0 else list(reversed(binaries)):
            n += 1
            with open(plain, "w") as f:
                f.write("name: plain-%d\nreplicas:\n  worker:\n    resources: {cpu: 100m, memory: 64Mi}\n"
                        "    command: [sh, -c, 'exit 0']\n" % n)
            cpu0, t0 = child_cpu(), time.monotonic()
            r = subprocess.run([b, "submit", plain], cwd=d, env=env, capture_output=True, text=True)
            figures[b]["wall"].append(time.monotonic() - t0)
            figures[b]["cpu"].append(child_cpu() - cpu0)
            if r.returncode != 0:
                raise SystemExit("submit failed: " + r.stdout + r.stderr)
            name = "waited-%d" % n
            with open(waited, "w") as f:
                f.write("name: %s\nreplicas:\n  worker:\n    resources: {cpu: 100m, memory: 64Mi}\n"
                        "    command: [sh, -c, 'sleep 1']\n" % name)
            p = subprocess.Popen([b, "submit", waited, "--wait"], cwd=d, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
            seen = None
            for line in p.stdout:
                if seen is None and line.startswith(name + ": RUNNING"):
                    seen = time.time()
            p.wait()
            desc = json.loads(subprocess.run([b, "describe", name, "-o", "json"], cwd=d, env=env,
                                             capture_output=True, text=True).stdout)
            started = [e["time_unix_ms"] for e in desc["events"] if e["kind"] == "started"]
            if seen is None or not started:
                raise SystemExit("%s: --wait never printed RUNNING" % name)
            figures[b]["running_after"].append(seen - started[0] / 1000.0)
    instructions = {}
    if args.callgrind:
        for b in binaries:
            for what, argv in (("submit", [b, "submit", plain]), ("--version", [b, "--version"])):
                n += 1
                with open(plain, "w") as f:
                    f.write("name: counted-%d\nreplicas:\n  worker:\n    resources: {cpu: 100m, memory: 64Mi}\n"
                            "    command: [sh, -c, 'exit 0']\n" % n)
                out = os.path.join(d, "callgrind.out")
                r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out] + argv,
                                   cwd=d, env=env, capture_output=True, text=True)
                refs = [l for l in r.stderr.splitlines() if "Collected :" in l]
                if r.returncode != 0 or not refs:
                    raise SystemExit("callgrind of %s %s failed: %s" % (b, what, r.stderr[-2000:]))
                instructions[(b, what)] = int(refs[-1].split(":")[-1].strip())
    for b in binaries:
        f = figures[b]
        print("%s (%d runs each, alternating)" % (b, args.runs))
        print("  trainyard submit: client CPU median %.1f ms, wall median %.1f ms" %
              (1000 * statistics.median(f["cpu"]), 1000 * statistics.median(f["wall"])))
        print("  submit --wait prints RUNNING after the server started the job: median %.1f ms, max %.1f ms" %
              (1000 * statistics.median(f["running_after"]), 1000 * max(f["running_after"])))
        for what in ("submit", "--version"):
            if (b, what) in instructions:
                print("  trainyard %s under callgrind: %.1f M instructions" % (what, instructions[(b, what)] / 1e6))
finally:
    up.send_signal(signal.SIGINT)
    try:
        up.wait(30)
    except subprocess.TimeoutExpired:
        up.kill()
        up.wait()
    shutil.rmtree(d, ignore_errors=True)
