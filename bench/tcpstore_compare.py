#!/usr/bin/python3
"""The job master's benchmark workload on PyTorch's TCPStore, for comparison.

N ranks, each with its own TCPStore client (its own connection) to one
TCPStore server, in one process (one thread per rank; the store's calls release
the GIL). Register: every rank connects, adds itself to a counter, the last one
sets a key and all wait for it. Barrier: the same add + wait on a fresh key per
round. A round's time runs from the first rank entering to the last leaving, as
bench/jobmaster_bench.cc measures the job master. Prints one JSON object.

Run with Debian's interpreter (python3-torch): /usr/bin/python3 bench/tcpstore_compare.py
"""
import argparse
import json
import statistics
import threading
import time
from datetime import timedelta

import torch.distributed as dist


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def store_barrier(store, key, world):
    if store.add(key, 1) == world:
        store.set(key + "/done", "1")
    store.wait([key + "/done"])


def run(workers, barriers):
    timeout = timedelta(seconds=60)
    server = dist.TCPStore("127.0.0.1", 0, workers, True, timeout, wait_for_workers=False)
    port = server.port
    start = threading.Barrier(workers + 1)
    enter = [[0.0] * (barriers + 1) for _ in range(workers)]
    leave = [[0.0] * (barriers + 1) for _ in range(workers)]

    def rank(r):
        start.wait()
        enter[r][0] = time.perf_counter()
        client = dist.TCPStore("127.0.0.1", port, workers, False, timeout)
        store_barrier(client, "joined", workers)
        leave[r][0] = time.perf_counter()
        for b in range(1, barriers + 1):
            start.wait()
            enter[r][b] = time.perf_counter()
            store_barrier(client, "barrier/%d" % b, workers)
            leave[r][b] = time.perf_counter()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(workers)]
    for t in threads:
        t.start()
    for _ in range(barriers + 1):
        start.wait()
    for t in threads:
        t.join()
    rounds = [(max(leave[r][b] for r in range(workers)) - min(enter[r][b] for r in range(workers))) * 1e3
              for b in range(barriers + 1)]
    barrier_ms = rounds[1:]
    return {
        "workers": workers,
        "barriers": barriers,
        "register_ms": rounds[0],
        "barrier_p50_ms": statistics.median(barrier_ms),
        "barrier_p99_ms": percentile(barrier_ms, 0.99),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--barriers", type=int, default=100)
    args = parser.parse_args()
    print(json.dumps(run(args.workers, args.barriers)))


if __name__ == "__main__":
    main()
