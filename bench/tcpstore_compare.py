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


def discovery(workers):
    """Rendezvous as frameworks do it on a store: every rank sets its address,
    then (all) every rank reads every rank's address, or (rank0) every rank
    waits for rank 0's. Times run from the first rank starting to the last
    one done, connections included."""
    timeout = timedelta(seconds=120)
    server = dist.TCPStore("127.0.0.1", 0, workers, True, timeout, wait_for_workers=False)
    port = server.port
    out = {"workers": workers}
    for kind in ("all", "rank0"):
        start = threading.Barrier(workers + 1)
        ends = [None] * workers

        def rank(r):
            client = dist.TCPStore("127.0.0.1", port, workers, False, timeout)
            start.wait()
            client.set("%s/addr/%d" % (kind, r), "10.0.%d.%d:%d" % (r // 8 // 256, r // 8 % 256, 29500 + r % 8))
            if kind == "all":
                keys = ["%s/addr/%d" % (kind, k) for k in range(workers)]
                client.wait(keys)
                for key in keys:  # this torch has no multi_get
                    client.get(key)
            else:
                client.wait(["%s/addr/0" % kind])
                client.get("%s/addr/0" % kind)
            ends[r] = time.perf_counter()

        threads = [threading.Thread(target=rank, args=(r,)) for r in range(workers)]
        for t in threads:
            t.start()
        start.wait()
        began = time.perf_counter()
        for t in threads:
            t.join()
        if None in ends:
            raise SystemExit("a rank failed its %s rendezvous" % kind)
        out[kind + "_ms"] = (max(ends) - began) * 1e3
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--barriers", type=int, default=100)
    parser.add_argument("--discovery", action="store_true",
                        help="time address rendezvous (all read all / wait for rank 0) instead")
    args = parser.parse_args()
    if args.discovery:
        print(json.dumps(discovery(args.workers)))
    else:
        print(json.dumps(run(args.workers, args.barriers)))


if __name__ == "__main__":
    main()
