"""A task of the SDK's coordinated-checkpoint test: trains in steps, saves
when its job is ordered to checkpoint (a preemption), and on its next start
resumes at the step its job's workers saved together (TRAINYARD_RESUME_STEP),
then trains 40 more steps and completes."""
import time

import trainyard

worker = trainyard.Worker.from_env()
worker.running()
start = worker.env.resume_step or 0
print(f"start at {start}", flush=True)
step = start


def save(request: trainyard.CheckpointRequest) -> int:
    print(f"saved step={step} order={request.order} reason={request.reason}", flush=True)
    return step


worker.on_checkpoint(save)
# The first start trains until its job is preempted; a resumed one finishes.
target = start + 40 if worker.env.resume_step is not None else 10**9
while step < target:
    time.sleep(0.05)
    step += 1
    worker.checkpoint_if_requested()
worker.completed()
