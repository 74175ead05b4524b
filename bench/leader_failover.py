#!/usr/bin/python3
"""Failover of servers on one etcd store: from kill -9 of the leader to the
new leader acknowledging a submission.

Starts etcd (Debian's etcd-server; --members 1 or 3) and --servers servers
(plaintext, --no-auth: the failover is measured, not the security) in a fresh
directory. Each round: kill -9 the leader, then run `trainyard submit` against
the list of all servers until one call succeeds; the time from the kill to
that acknowledgement is one failover. The killed server is started again and
waits as a standby before the next round. Prints every failover and the
median / p99. Usage:
  bench/leader_failover.py [--rounds 20] [--members 1] [--servers 2] [--lease-ms 1000]
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

from up_cluster import free_port

parser = argparse.ArgumentParser()
parser.add_argument("--rounds", type=int, default=20)
parser.add_argument("--members", type=int, default=1)
parser.add_argument("--servers", type=int, default=2)
parser.add_argument("--lease-ms", type=int, default=1000)
# etcd's own --election-timeout: its shortest lease is 1.5 x this, rounded up
# to whole seconds (2 s at etcd's default 1000 ms, 1 s at 500 ms).
parser.add_argument("--etcd-election-ms", type=int, default=1000)
parser.add_argument("--trainyard", default=os.path.join(os.path.dirname(__file__), "..", "build", "release",
                                                        "trainyard"))
args = parser.parse_args()


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.01)
    raise SystemExit("timed out waiting for " + what)


d = tempfile.mkdtemp(prefix="trainyard-failover-bench-")
procs = []
try:
    peers = [(free_port(), free_port()) for _ in range(args.members)]
    cluster = ",".join("m%d=http://127.0.0.1:%d" % (i, p[1]) for i, p in enumerate(peers))
    for i, (client, peer) in enumerate(peers):
        procs.append(subprocess.Popen(
            ["etcd", "--name", "m%d" % i, "--data-dir", "%s/etcd-%d" % (d, i),
             "--listen-client-urls", "http://127.0.0.1:%d" % client,
             "--advertise-client-urls", "http://127.0.0.1:%d" % client,
             "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
             "--initial-cluster", cluster, "--logger", "zap", "--log-level", "error",
             "--election-timeout", str(args.etcd_election_ms),
             "--heartbeat-interval", str(max(10, args.etcd_election_ms // 10))],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    store = "etcd://" + ",".join("127.0.0.1:%d" % p[0] for p in peers)
    ports = [free_port(pair=True) for _ in range(args.servers)]
    server_list = ",".join("127.0.0.1:%d" % p for p in ports)
    servers = [None] * args.servers
    logs = ["%s/server-%d.log" % (d, i) for i in range(args.servers)]

    def start(i):
        log = open(logs[i], "a")
        servers[i] = subprocess.Popen(
            [args.trainyard, "server", "--listen", "127.0.0.1:%d" % ports[i], "--data-dir", "%s/server-%d" % (d, i),
             "--store", store, "--leader-lease-ms", str(args.lease_ms), "--no-auth"],
            stdout=log, stderr=subprocess.STDOUT)

    def leads(i):
        # The last word of its log (appended across restarts) says it leads.
        with open(logs[i]) as f:
            text = f.read()
        return text.rfind("listening on") > text.rfind("standby:")

    def log_count(i, text):
        with open(logs[i]) as f:
            return f.read().count(text)

    job = ("name: failover-%d\nreplicas:\n  worker:\n    count: 1\n    resources: {cpu: 100m, memory: 64Mi}\n"
           "    command: [sleep, '1']\n")

    submitted = [0]

    def submit():
        submitted[0] += 1
        return subprocess.run([args.trainyard, "submit", "-", "--server", server_list],
                              input=job % submitted[0], text=True,
                              stdout=subprocess.DEVNULL, stderr=open(d + "/submit.err", "w"),
                              env=dict(os.environ, TRAINYARD_TOKEN="", TRAINYARD_CA_FILE="")).returncode == 0

    for i in range(args.servers):
        open(logs[i], "w").close()
        start(i)
        wait_for(lambda: log_count(i, "listening on") + log_count(i, "standby:") > 0, 60, "server %d" % i)
    wait_for(submit, 60, "a first submission")
    failovers = []
    for r in range(args.rounds):
        leader = next(i for i in range(args.servers) if servers[i].poll() is None and leads(i))
        t0 = time.monotonic()
        servers[leader].send_signal(signal.SIGKILL)
        servers[leader].wait()
        while not submit():
            pass
        failovers.append(time.monotonic() - t0)
        print("round %d: server %d killed, a submission acknowledged %.0f ms later" % (r, leader, failovers[-1] * 1000),
              flush=True)
        # The killed server comes back as a standby before the next round.
        standbys = log_count(leader, "standby:")
        start(leader)
        wait_for(lambda: log_count(leader, "standby:") > standbys, 60, "server %d as a standby" % leader)
    failovers.sort()
    p99 = failovers[min(len(failovers) - 1, int(round(0.99 * (len(failovers) - 1))))]
    print("failover (kill -9 of the leader -> a submission acknowledged), %d rounds, lease %d ms, %d etcd members "
          "(election timeout %d ms): p50 %.0f ms, p99 %.0f ms, min %.0f ms, max %.0f ms"
          % (len(failovers), args.lease_ms, args.members, args.etcd_election_ms, statistics.median(failovers) * 1000, p99 * 1000,
             failovers[0] * 1000, failovers[-1] * 1000))
finally:
    for p in procs + [s for s in (servers if "servers" in dir() else []) if s]:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    if os.environ.get("KEEP"): print(d)
    else: shutil.rmtree(d, ignore_errors=True)
