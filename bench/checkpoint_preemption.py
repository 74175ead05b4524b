#!/usr/bin/python3
"""Work lost per preemption and the time from decision to room freed:
coordinated checkpoints against SIGTERM + grace, on `trainyard up`.

Starts `trainyard up --nodes 1 --gpus-per-node 8` (real agents and processes,
TLS) in a fresh directory. Each run submits a ptr job that fills the 8 GPUs,
then a production job that needs all 8. Runs alternate between two kinds:
  - coordinated: the job is ordered to checkpoint (docs/jobmaster.md,
    "Checkpoints"), saves the step it is at, and is stopped once saved;
  - grace: the job only saves periodically and dies at SIGTERM, as a
    program that does not coordinate.
Two workloads (--workload):
  - shell (default): 2 shell workers (4 GPUs each, framework none: it has a
    job master) count steps (one per ~50 ms), saving every 100 steps; the
    coordinated one polls `trainyard worker checkpoint-requested` each step
    and answers `trainyard worker checkpoint-done STEP`;
  - pytorch: examples/pytorch_ddp/train.py as 4 DDP ranks over gloo (2 GPUs
    each), 32 steps an epoch and a checkpoint at each epoch's end; the
    coordinated job says `jobmaster: true`, and its rank 0 broadcasts the
    order so every rank saves at one step (docs/examples.md). Needs
    /usr/bin/python3 with torch and the Python SDK (build/release/python).
The preemption comes at a different step each run (the shell's 150 + 37 x
run, pytorch's 40 + 11 x run), so the periodic saves fall at different
distances from it. Per run it prints:
  lost   steps a worker ran past the step it resumes at (the last step each
         worker reached minus the step saved), the largest over the workers;
  freed  the preemption decision (the victim's "preempted" event) to the
         production job's "scheduled" event (server clock).
Then the medians per kind and their ratio. Usage:
  bench/checkpoint_preemption.py [--runs 3] [--workload shell|pytorch] [--trainyard PATH]
"""
import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import time

parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=3, help="runs per worker kind")
parser.add_argument("--trainyard", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build",
                                                        "release", "trainyard"))
parser.add_argument("--workload", choices=("shell", "pytorch"), default="shell")
args = parser.parse_args()
BIN = os.path.abspath(args.trainyard)
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def free_port_pair():
    while True:
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
            return port


def wait_until(cond, timeout, every=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(every)
    raise RuntimeError("timed out")


def read_step(path):
    """The step in a worker's file, which it rewrites each step (retried when caught empty)."""
    def value():
        try:
            return int(open(path).read())
        except ValueError:
            return None
    return wait_until(value, 10, 0.01)


def worker_script(out, coordinated):
    # $out/last-I: the last step reached; $out/saved-I: the last step saved.
    poll = (f"if {BIN} worker checkpoint-requested > /dev/null 2>&1; then echo $step > {out}/saved-$TRAINYARD_INDEX; "
            f"{BIN} worker checkpoint-done $step > /dev/null; fi; ") if coordinated else ""
    return (f"step=${{TRAINYARD_RESUME_STEP:-0}}; {BIN} worker state RUNNING > /dev/null; "
            f"while true; do step=$((step+1)); sleep 0.05; echo $step > {out}/last-$TRAINYARD_INDEX; "
            f"[ $((step % 100)) -eq 0 ] && echo $step > {out}/saved-$TRAINYARD_INDEX; {poll}done")


def shell_job(name, out, coordinated):
    """The shell workload: its spec, its workers' indexes, and its steps of one save period."""
    script = worker_script(out, coordinated).replace("'", "'\\''")
    spec = (f"name: {name}\npriority: ptr\nreplicas:\n  worker:\n    count: 2\n"
            f"    resources: {{gpus: 4}}\n    command: [sh, -c, '{script}']\n")
    return spec, (0, 1)


def pytorch_job(name, out, coordinated):
    """The pytorch workload: 4 ranks of examples/pytorch_ddp/train.py, each
    writing its steps done to OUT/last-RANK; the coordinated one has a master."""
    train = os.path.abspath(os.path.join(ROOT, "examples", "pytorch_ddp", "train.py"))
    sdk = os.path.abspath(os.path.join(os.path.dirname(BIN), "python"))
    command = (f"[/usr/bin/python3, {train}, --epochs, '1000', --samples, '8192', --step-sleep-ms, '50', "
               f"--step-file, {out}/last-RANK]")
    role = (f"    resources: {{cpu: 250m, memory: 512Mi, gpus: 2}}\n    command: {command}\n"
            f"    env: {{PYTHONPATH: {sdk}}}\n")
    spec = (f"name: {name}\nframework: pytorch\npriority: ptr\njobmaster: {'true' if coordinated else 'false'}\n"
            f"replicas:\n  master:\n    count: 1\n{role}  worker:\n    count: 3\n{role}")
    return spec, (0, 1, 2, 3)


def main():
    tmp = tempfile.mkdtemp(prefix="trainyard-ckpt-bench-")
    data = os.path.join(tmp, "cluster")
    port = free_port_pair()
    log = open(os.path.join(tmp, "up.log"), "wb")
    up = subprocess.Popen([BIN, "up", "--nodes", "1", "--gpus-per-node", "8", "--port", str(port), "--data-dir", data],
                          stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    env = dict(os.environ, TRAINYARD_CONFIG=os.path.join(data, "client.yaml"))

    def cli(*a):
        r = subprocess.run([BIN, *a], capture_output=True, text=True, env=env, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"trainyard {' '.join(a)}: {r.stderr}")
        return r.stdout

    def describe(job):
        return json.loads(cli("describe", job, "-o", "json"))

    def event_ms(d, kind):
        return next((e["time_unix_ms"] for e in d["events"] if e["kind"] == kind), None)

    def submit(spec, name):
        path = os.path.join(tmp, name + ".yaml")
        with open(path, "w") as f:
            f.write(spec)
        return cli("submit", path).split()[1]  # "job NAME submitted"

    try:
        wait_until(lambda: "Press Ctrl-C" in open(os.path.join(tmp, "up.log"), errors="replace").read(), 120)
        results = {"coordinated": [], "grace": []}
        for run in range(args.runs * 2):
            kind = "coordinated" if run % 2 == 0 else "grace"
            out = os.path.join(tmp, f"run{run}")
            os.makedirs(out)
            make = pytorch_job if args.workload == "pytorch" else shell_job
            spec, workers = make(f"low{run}", out, kind == "coordinated")
            low = submit(spec, f"low{run}")
            at = (40 + 11 * (run // 2)) if args.workload == "pytorch" else (150 + 37 * (run // 2))

            def reached():
                try:
                    return min(int(open(f"{out}/last-{i}").read()) for i in workers) >= at
                except (OSError, ValueError):
                    return False
            wait_until(reached, 300)
            prod = submit("name: urgent\npriority: production\nreplicas:\n  worker:\n    resources: {gpus: 8}\n"
                          "    command: [sh, -c, 'sleep 3']\n", f"urgent{run}")
            wait_until(lambda: event_ms(describe(prod), "scheduled"), 120)
            last = [read_step(f"{out}/last-{i}") for i in workers]
            d = describe(low)
            if d.get("resume_step") is not None:
                resume = d["resume_step"]
            elif args.workload == "pytorch":  # the last checkpoint rank 0 saved (at an epoch's end)
                resume = read_step(f"{out}/last-0.saved")
            else:
                resume = min(read_step(f"{out}/saved-{i}") for i in workers)
            lost = max(l - resume for l in last)
            freed = (event_ms(describe(prod), "scheduled") - event_ms(d, "preempted")) / 1000.0
            results[kind].append((lost, freed))
            print(f"run {run} {kind:11s} preempted near step {at}: resumes at {resume}, lost {lost} steps, "
                  f"decision -> room freed {freed:.2f} s", flush=True)
            cli("kill", low)
            wait_until(lambda: describe(prod)["state"] == "SUCCEEDED", 120)
        print()
        med = {}
        for kind, rows in results.items():
            med[kind] = (statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows))
            print(f"{kind:11s} median lost {med[kind][0]:.0f} steps, decision -> room freed {med[kind][1]:.2f} s "
                  f"({len(rows)} runs)")
        c, g = med["coordinated"], med["grace"]
        print(f"lost steps, coordinated / grace: {c[0] / g[0]:.2f}" if g[0] else "grace lost no steps")
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
            try:
                up.wait(timeout=60)
            except subprocess.TimeoutExpired:
                up.kill()


if __name__ == "__main__":
    main()
