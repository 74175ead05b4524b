"""A task of the SDK's worker tests: registers with its job master through
trainyard.Worker, meets the other workers at two barriers, prints what
discovery told it, and completes.

With --fail, worker 1 raises once worker 0 waits in the second barrier (the
Worker reports ERROR with the exception as its reason) and worker 0 prints
how its barrier failed. Worker 1's end fails the job, whose other tasks are
then stopped: worker 0 ignores that SIGTERM so that it prints in any case."""
import signal
import sys
import time

import trainyard


def wait_until_in_barrier(worker: trainyard.Worker, worker_id: int) -> None:
    deadline = time.monotonic() + 60
    while not any(w.worker_id == worker_id and w.in_barrier for w in worker.workers()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"worker {worker_id} did not enter the barrier")
        time.sleep(0.05)  # asks the master again; bounded by the deadline


with trainyard.Worker.from_env() as worker:
    worker.running()
    print(f"registered id={worker.worker_id} of={worker.num_workers}", flush=True)
    print(f"barrier generation={worker.barrier(timeout=60)}", flush=True)
    if "--fail" in sys.argv:
        if worker.worker_id == 1:
            wait_until_in_barrier(worker, 0)
            raise RuntimeError("worker 1 gives up")
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            worker.barrier(timeout=60)
        except trainyard.JobMasterError as e:
            print(f"barrier failed: {e}", flush=True)
            raise
    everyone = worker.workers(wait_for_all=True, timeout=60)
    print("workers " + ",".join(f"{w.worker_id}:{w.role}/{w.index}" for w in everyone), flush=True)
    torch = worker.torch_env(timeout=60)
    print(f"torch rank={torch['RANK']} world={torch['WORLD_SIZE']} addr={torch['MASTER_ADDR']} "
          f"port={torch['MASTER_PORT']}", flush=True)
    print(f"barrier generation={worker.barrier(timeout=60)}", flush=True)
