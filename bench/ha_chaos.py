#!/usr/bin/python3
"""The Jepsen-style loop of tests/integration/ha_chaos_test.cc, long: three
etcd members, three servers and two agents, each on a host of its own (a
network namespace; run as root), a client submitting and killing jobs all
along, and --rounds seeded faults (kill -9 of the leader, the leader paused
past its lease, an etcd member killed, the leader's host cut off). After
every round the test checks that no acknowledged submission was lost, no GPU
or port was given twice, no task runs twice, no job is both running and
ended, every running task still runs as the same process, and no node is
LOST; it fails at the first round that breaks one. Prints each round, the
failover figures (fault -> a submission acknowledged) and the verdict.
Usage:
  bench/ha_chaos.py [--rounds 40] [--seed N] [--build build/release]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
parser = argparse.ArgumentParser()
parser.add_argument("--rounds", type=int, default=40)
parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
parser.add_argument("--build", default=os.path.join(here, "..", "build", "release"))
args = parser.parse_args()

binary = os.path.join(args.build, "tests", "integration", "integration_test")
env = dict(os.environ, TRAINYARD_CHAOS_ROUNDS=str(args.rounds), TRAINYARD_CHAOS_SEED=str(args.seed),
           TRAINYARD_BIN=os.path.join(args.build, "trainyard"), TRAINYARD_SOURCE_DIR=os.path.join(here, ".."))
started = time.monotonic()
run = subprocess.run([binary, "--gtest_filter=HaChaosTest.*"], env=env, stdout=subprocess.PIPE,
                     stderr=subprocess.STDOUT, text=True)
failovers = {}
agents_back = {}
for line in run.stdout.splitlines():
    m = re.match(r"round \d+ \(seed \d+\): (.*): a submission acknowledged (\d+) ms after the fault", line)
    back = re.match(r"round \d+ \(seed \d+\): (.*): every agent back with the leader (\d+) ms after the fault", line)
    if m:
        failovers.setdefault(m.group(1), []).append(int(m.group(2)))
        print(line, flush=True)
    elif back:
        agents_back.setdefault(back.group(1), []).append(int(back.group(2)))
        print(line, flush=True)
    elif line.startswith("chaos") or "Failure" in line or "hosts in" in line or "loopback" in line:
        print(line)
for what, table in (("a submission acknowledged", failovers), ("every agent back with the leader", agents_back)):
    for fault, ms in sorted(table.items()):
        ms.sort()
        p99 = ms[min(len(ms) - 1, int(round(0.99 * (len(ms) - 1))))]
        print("%s: %d rounds, fault -> %s: p50 %d ms, p99 %d ms, max %d ms"
              % (fault, len(ms), what, statistics.median(ms), p99, ms[-1]))
verdict = "every check held" if run.returncode == 0 else "A CHECK FAILED (output above)"
print("seed %d, %d rounds in %.0f s: %s" % (args.seed, args.rounds, time.monotonic() - started, verdict))
if run.returncode != 0:
    print(run.stdout[-20000:])
sys.exit(run.returncode)
