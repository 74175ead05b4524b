"""A task of the SDK's checkpoint test: registers a checkpoint callback that
writes its step to TRAINYARD_CHECKPOINT_DIR, makes the SIGTERM of a kill run
it, says it is ready and waits to be killed."""
import os
import signal

import trainyard

worker = trainyard.Worker.from_env()
worker.running()


def save(request: trainyard.CheckpointRequest) -> int:
    path = os.path.join(worker.env.checkpoint_dir or ".", f"worker-{worker.worker_id}.step")
    with open(path, "w") as f:
        f.write("42\n")
    print(f"checkpoint reason={request.reason} step=42", flush=True)
    return 42


worker.on_checkpoint(save)
worker.handle_sigterm_as_checkpoint()
print("ready", flush=True)
while True:
    signal.pause()  # until the kill's SIGTERM
